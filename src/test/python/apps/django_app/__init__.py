"""A minimal Django project: one settings module, no database."""
