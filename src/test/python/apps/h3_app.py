"""A plain ASGI application for the HTTP/3 end-to-end tests (test_http3.py).

No third-party imports, so that it runs under every CPython the tests use.

  /                       "hello, h3"
  /scope[/anything]       JSON: the scope's type, scheme, http_version, method, path, raw_path,
                          query_string, root_path, client, headers, and the request body's size,
                          SHA-256 and text (latin-1); the response carries x-h3-app: scope
  /echo                   the request body back, with the request's content-type
  /upload                 JSON: size and SHA-256 of the request body (read in whatever pieces arrive),
                          and how many http.request messages carried it
  /download?size=N&chunk=C&seed=S&length=L
                          N bytes of random.Random(S).randbytes(N), streamed in pieces of C bytes
                          (64 KiB by default), with a content-length when L is 1 (without by
                          default); x-sha256 is their SHA-256
  /remember?value=V       keeps V in this process (POST or GET); /remembered returns the last one
  /pid                    the process id, as text
  /sleep?ms=M&probe=P     sleeps M milliseconds (1000 by default), then "slept"
  /seen                   JSON list of the path?query of every request received so far
  /status/NNN             status NNN, body "status NNN"
  /flood?id=I             streams up to 1 GiB in 64 KiB pieces, counting in this process what each
                          send() returned for; /progress?id=I: JSON {"sent": bytes, "ended": bool}
  /drip?id=I              after the head, sends a byte every 50 ms (for 30 s at most) while waiting
                          for the next message, http.disconnect when the client goes away; notes
                          "started", that message's type, and "stopped"; /events?id=I: JSON list
  anything else           404, body "not found: <path>"
"""

import asyncio
import hashlib
import json
import os
import random
from urllib.parse import parse_qs

SEEN = []
MEMORY = {"value": None}
PROGRESS = {}
EVENTS = {}
CHUNK = b"x" * 65536


def pattern(size, seed=0):
    """The download's bytes (the tests compute the same)."""
    return random.Random(seed).randbytes(size)


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    await http(scope, receive, send)


async def _read_body(receive):
    chunks = []
    messages = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        messages += 1
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks), messages


async def _respond(send, status, body, content_type=b"text/plain; charset=utf-8", headers=()):
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
            + list(headers),
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _json(send, obj, status=200, headers=()):
    await _respond(send, status, json.dumps(obj).encode(), b"application/json", headers)


async def http(scope, receive, send):
    path = scope["path"]
    query_string = scope.get("query_string", b"").decode("latin-1")
    SEEN.append(path + ("?" + query_string if query_string else ""))
    query = {k: v[-1] for k, v in parse_qs(query_string).items()}
    body, messages = await _read_body(receive)

    if path == "/":
        await _respond(send, 200, b"hello, h3")
    elif path == "/scope" or path.startswith("/scope/"):
        await _json(
            send,
            {
                "type": scope["type"],
                "scheme": scope.get("scheme"),
                "http_version": scope.get("http_version"),
                "method": scope.get("method"),
                "path": path,
                "raw_path": scope["raw_path"].decode("latin-1") if scope.get("raw_path") is not None else None,
                "query_string": query_string,
                "root_path": scope.get("root_path"),
                "client": list(scope["client"]) if scope.get("client") else None,
                "headers": [[n.decode("latin-1"), v.decode("latin-1")] for n, v in scope.get("headers", [])],
                "body_size": len(body),
                "body_sha256": hashlib.sha256(body).hexdigest(),
                "body": body.decode("latin-1"),
            },
            headers=[(b"x-h3-app", b"scope")],
        )
    elif path == "/echo":
        content_type = dict(scope.get("headers", [])).get(b"content-type", b"application/octet-stream")
        await _respond(send, 200, body, content_type)
    elif path == "/upload":
        await _json(send, {"size": len(body), "sha256": hashlib.sha256(body).hexdigest(), "messages": messages})
    elif path == "/download":
        size = int(query.get("size", "1048576"))
        chunk = int(query.get("chunk", "65536"))
        data = pattern(size, int(query.get("seed", "0")))
        headers = [
            (b"content-type", b"application/octet-stream"),
            (b"x-sha256", hashlib.sha256(data).hexdigest().encode()),
        ]
        if query.get("length") == "1":
            headers.append((b"content-length", str(size).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for start in range(0, size, chunk):
            await send({"type": "http.response.body", "body": data[start:start + chunk], "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    elif path == "/remember":
        MEMORY["value"] = query.get("value")
        await _respond(send, 200, b"remembered")
    elif path == "/remembered":
        await _json(send, {"value": MEMORY["value"]})
    elif path == "/pid":
        await _respond(send, 200, str(os.getpid()).encode())
    elif path == "/sleep":
        await asyncio.sleep(int(query.get("ms", "1000")) / 1000)
        await _respond(send, 200, b"slept")
    elif path == "/seen":
        await _json(send, SEEN)
    elif path == "/flood":
        progress = PROGRESS.setdefault(query.get("id", ""), {"sent": 0, "ended": False})
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/octet-stream")]})
        try:
            while progress["sent"] < 1 << 30:
                await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
                progress["sent"] += len(CHUNK)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            progress["ended"] = True
    elif path == "/progress":
        await _json(send, PROGRESS.get(query.get("id", ""), {"sent": 0, "ended": False}))
    elif path == "/drip":
        events = EVENTS.setdefault(query.get("id", ""), [])
        events.append("started")

        async def watch():
            events.append((await receive())["type"])

        watcher = asyncio.ensure_future(watch())
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        for _ in range(600):
            if watcher.done():
                break
            await send({"type": "http.response.body", "body": b".", "more_body": True})
            await asyncio.sleep(0.05)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        events.append("stopped")
    elif path == "/events":
        await _json(send, EVENTS.get(query.get("id", ""), []))
    elif path.startswith("/status/"):
        status = int(path[len("/status/"):])
        await _respond(send, status, b"status %d" % status)
    else:
        await _respond(send, 404, b"not found: " + path.encode("utf-8", "replace"))
