from django.urls import path

from . import views

urlpatterns = [
    path("", views.index),
    path("json", views.json_message),
    path("plaintext", views.plaintext),
    path("db", views.single_query),
    path("queries", views.multiple_queries),
    path("fortunes", views.fortunes),
    path("updates", views.updates),
]
