"""The files of $BENCH_STATIC_DIR under /static, as a Python server serves them without a proxy in front:
Starlette's StaticFiles (ASGI, for uvicorn) as `asgi`, Flask's static route (WSGI, for gunicorn) as `wsgi`.
GET / answers 200 empty, for the readiness check."""
import os

from flask import Flask
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

DIRECTORY = os.environ["BENCH_STATIC_DIR"]


async def index(request):
    return Response(b"")


asgi = Starlette(routes=[Route("/", index), Mount("/static", app=StaticFiles(directory=DIRECTORY))])

wsgi = Flask(__name__, static_folder=DIRECTORY, static_url_path="/static")


@wsgi.get("/")
def wsgi_index():
    return ""
