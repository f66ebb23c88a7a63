"""WSGI entry point of the Django workload: django_app.wsgi:application (run from bench/workloads)."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "django_app.settings")
application = get_wsgi_application()
