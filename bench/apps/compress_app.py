"""bench/compress: GET /json answers the same 100 KiB JSON document (built once at import).

``app`` sends it as is (Peregrine compresses it with --compress); ``gzip_app`` is the same application
under Starlette's GZipMiddleware, as it would run under uvicorn.
"""
import json

from starlette.applications import Starlette
from starlette.middleware.gzip import GZipMiddleware
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route


def _document(size=100 * 1024):
    users, n = [], 0
    while len(json.dumps(users)) < size:
        users.append({"id": n, "name": "user%d" % n, "email": "user%d@example.com" % n, "score": n * 7 % 1000 / 10,
                      "tags": ["alpha", "beta", str(n % 97)], "active": n % 3 == 0})
        n += 1
    return json.dumps(users).encode()


DOCUMENT = _document()


async def document(request):
    return Response(DOCUMENT, media_type="application/json")


async def root(request):
    return PlainTextResponse("ok")


app = Starlette(routes=[Route("/", root), Route("/json", document)])
gzip_app = GZipMiddleware(app, minimum_size=1024)
