"""Applications for test_compress.py (--compress): responses of every shape the compression stage must
handle or leave alone.

ASGI ``app``, routes (query parameters):

  /body?size=N&type=T&status=S&length=0|1&h=Name:Value...
                        N bytes of a JSON-ish text body (default 4096) of Content-Type T (default
                        application/json), status S (default 200); length=0 omits Content-Length;
                        each h adds a header
  /chunks?n=K&size=N    K pieces of N bytes each, sent with more_body, no Content-Length
  /sse?n=K&id=X         K server-sent events; event i+1 is produced only after the client
                        called /ack?id=X&i=i, so a client that receives event i must have
                        received it before the app produced the next one
  /ack?id=X&i=I         lets /sse with that id produce its next event
  /page                 an HTML page for Chromium to fetch from (same origin)

WSGI ``wsgi``: /blocks?n=K&size=N yields K blocks, each only after /ack?i=... (the same
acknowledgement, kept by a threading.Event) so a block is read before the next is produced.
"""

import asyncio
import threading
from urllib.parse import parse_qs

PATTERN = b'{"id": 12345, "name": "peregrine", "tags": ["fast", "small"], "ok": true}\n'

_acks = {}  # (id, i) -> asyncio.Event
_wsgi_acks = {}  # i -> threading.Event
_wsgi_lock = threading.Lock()


def text(size):
    return (PATTERN * (size // len(PATTERN) + 1))[:size]


def _query(scope):
    return parse_qs(scope["query_string"].decode(), keep_blank_values=True)


def _ack(key):
    event = _acks.get(key)
    if event is None:
        event = _acks[key] = asyncio.Event()
    return event


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    q = _query(scope)
    path = scope["path"]
    one = lambda name, default: q.get(name, [default])[0]  # noqa: E731
    if path == "/body":
        body = text(int(one("size", "4096")))
        headers = [(b"content-type", one("type", "application/json").encode())]
        if one("length", "1") == "1":
            headers.append((b"content-length", str(len(body)).encode()))
        for h in q.get("h", []):
            name, value = h.split(":", 1)
            headers.append((name.strip().lower().encode(), value.strip().encode()))
        await send({"type": "http.response.start", "status": int(one("status", "200")), "headers": headers})
        await send({"type": "http.response.body", "body": body})
    elif path == "/chunks":
        n, size = int(one("n", "4")), int(one("size", "2000"))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        for i in range(n):
            await send({"type": "http.response.body", "body": text(size), "more_body": i < n - 1})
    elif path == "/sse":
        n, sid = int(one("n", "3")), one("id", "x")
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        for i in range(n):
            await send({"type": "http.response.body", "body": f"id: {i}\ndata: event {i}\n\n".encode(), "more_body": True})
            if i < n - 1:
                await _ack((sid, str(i))).wait()
        await send({"type": "http.response.body", "body": b""})
    elif path == "/ack":
        _ack((one("id", "x"), one("i", "0"))).set()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})
    elif path == "/page":
        body = b"<!doctype html><title>compress</title>"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]})
        await send({"type": "http.response.body", "body": body})
    else:
        await send({"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"not found"})


def _wsgi_ack(i):
    with _wsgi_lock:
        event = _wsgi_acks.get(i)
        if event is None:
            event = _wsgi_acks[i] = threading.Event()
        return event


def wsgi(environ, start_response):
    q = parse_qs(environ.get("QUERY_STRING", ""))
    path = environ["PATH_INFO"]
    if path == "/ack":
        _wsgi_ack(q["i"][0]).set()
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]
    if path == "/blocks":
        n, size = int(q.get("n", ["3"])[0]), int(q.get("size", ["2000"])[0])
        start_response("200 OK", [("Content-Type", "text/plain")])

        def blocks():
            for i in range(n):
                yield f"block {i}\n".encode() + text(size)
                if i < n - 1:
                    _wsgi_ack(str(i)).wait(30)
        return blocks()
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"not found"]
