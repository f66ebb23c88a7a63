"""Settings of the Django workload: the PostgreSQL of BENCH_PG_DSN through psycopg 3, persistent connections
(one per thread that runs requests, kept between requests), no middleware, the shared fortunes template."""
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

WORKLOADS = Path(__file__).resolve().parent.parent
if str(WORKLOADS) not in sys.path:  # workload_rules, beside this package
    sys.path.insert(0, str(WORKLOADS))

from workload_rules import TEMPLATES, dsn  # noqa: E402

_db = urlsplit(dsn())

SECRET_KEY = "peregrine-bench-workloads-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "django_app.urls"
INSTALLED_APPS = ["django_app"]
MIDDLEWARE = []
USE_TZ = True
USE_I18N = False
LOGGING_CONFIG = None
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _db.path.lstrip("/"),
        "USER": unquote(_db.username or ""),
        "PASSWORD": unquote(_db.password or ""),
        "HOST": _db.hostname or "",
        "PORT": str(_db.port or ""),
        "CONN_MAX_AGE": None,
    }
}
# Django's template language, from the file the Jinja2 apps render too: it keeps to the syntax both share.
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "DIRS": [str(TEMPLATES)]}]
