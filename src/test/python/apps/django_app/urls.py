from django.urls import path

from . import views

urlpatterns = [
    path("", views.info),
    path("info/<path:rest>", views.info),
    path("post", views.post_data),
    path("echo", views.echo),
    path("meet", views.meet),
]
