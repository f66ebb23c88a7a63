"""Applications that send files, for test_static.py (issue 16 item 9).

wsgi_app (WSGI):   /file?path=P[&offset=N][&length=L]  wsgi.file_wrapper around open(P), seeked to N,
                                                       with Content-Length L when given
                   /bytesio?size=N                     wsgi.file_wrapper around a BytesIO (no fileno)
asgi_app (ASGI):   /pathsend?path=P                    http.response.pathsend of P, if the scope offers it
                   /extensions                         JSON of scope["extensions"]
starlette_app:     /file?path=P                        Starlette's FileResponse(P)
"""
import io
import json
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.responses import FileResponse
from starlette.routing import Route


def _query(qs):
    return {k: v[0] for k, v in parse_qs(qs).items()}


def wsgi_app(environ, start_response):
    q = _query(environ.get("QUERY_STRING", ""))
    if environ["PATH_INFO"] == "/file":
        f = open(q["path"], "rb")
        f.seek(int(q.get("offset", 0)))
        headers = [("Content-Type", "application/octet-stream")]
        if "length" in q:
            headers.append(("Content-Length", q["length"]))
        start_response("200 OK", headers)
        return environ["wsgi.file_wrapper"](f, 8192)
    if environ["PATH_INFO"] == "/bytesio":
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return environ["wsgi.file_wrapper"](io.BytesIO(b"x" * int(q["size"])), 8192)
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"not found"]


async def asgi_app(scope, receive, send):
    if scope["type"] != "http":
        return
    q = _query(scope["query_string"].decode())
    if scope["path"] == "/extensions":
        body = json.dumps(scope.get("extensions")).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})
        return
    if scope["path"] == "/pathsend" and "http.response.pathsend" in scope.get("extensions", {}):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/octet-stream")]})
        await send({"type": "http.response.pathsend", "path": q["path"]})
        return
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b"not found"})


async def _file(request):
    return FileResponse(request.query_params["path"])


starlette_app = Starlette(routes=[Route("/file", _file)])
