"""A plain ASGI 3 application (no framework) for Peregrine's end-to-end tests.

Everything here is deliberately written against the ASGI specification only, so
that the same application can be served by Peregrine and by uvicorn (the
reference server the tests are validated against).

Routes (the ``root_path``, if any, is stripped before routing):

  /                       "hello, asgi"
  /echo                   echoes the request body, read with repeated receive();
                          header x-body-chunks = number of http.request messages
  /echo-stream            answers each http.request body chunk as soon as it
                          arrives (a chunked response), proving that the body
                          streams in both directions
  /scope[/anything]       JSON of the scope
  /stream?n=K             K chunks "chunk i\\n" sent with more_body=True
  /stream-wait?marker=F   "first\\n", then waits (up to 10 s) for file F to
                          exist, then "second: seen-marker\\n"
  /answer-then-block?marker=F  a complete response "answered\\n", then blocks the event
                          loop (no await) until file F exists, up to 10 s
  /headers-shapes         response headers as tuples/lists, bytes/bytearray/str
  /error                  raises before anything is sent
  /error-after-start      raises after http.response.start (and one body part)
  /disconnect?id=X        sends a complete response, then calls receive() and
                          records what it returned and how long it took
  /wait-disconnect?id=X   sends nothing; waits for http.disconnect and records it
  /result?id=X            JSON of what /disconnect or /wait-disconnect recorded
  /crlf-header            tries to send a header value containing CR LF
  /status/{code}          answers with that status
  /big?id=X&chunks=N&size=S  N chunks of S bytes with a Content-Length; records
                          in /result?id=X how many send() calls have returned
  /empty-chunks           body messages a, "", b, "" (all more_body) and then c
  /sized?size=S&parts=N&kind=K&length=L  S bytes of a known pattern (sized_body) in N
                          body messages, each a bytes or a bytearray (K);
                          with a Content-Length when L is 1, else chunked
  /no-response            returns without sending anything
  /seen                   JSON list of every request target this process served
  /loop                   the class of the running event loop
  /sleep?s=F              sleeps F seconds, then "slept"

The lifespan sets state["started"] = True and appends "startup" / "shutdown"
lines to the file named by the environment variable PEREGRINE_TEST_MARKER.
``no_lifespan_app`` is the same application but raises on the lifespan scope;
``failing_startup_app`` answers lifespan.startup with lifespan.startup.failed.
"""

import asyncio
import json
import os
import sys
import time
from urllib.parse import parse_qs

SEEN = []
RESULTS = {}


def _marker(line):
    path = os.environ.get("PEREGRINE_TEST_MARKER")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def _jsonable(value):
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("latin-1")
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def _query(scope):
    return {k: v[-1] for k, v in parse_qs(scope.get("query_string", b"").decode("latin-1")).items()}


def sized_body(size):
    """The body of /sized: a pattern that a shifted or truncated copy cannot match."""
    return bytes((i * 7 + i // 251) % 256 for i in range(size))


async def _respond(send, status, body, content_type=b"text/plain; charset=utf-8", headers=()):
    if isinstance(body, str):
        body = body.encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
            + list(headers),
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _json(send, obj, status=200):
    await _respond(send, status, json.dumps(obj), b"application/json")


async def _read_body(receive):
    chunks = 0
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None, chunks
        chunks += 1
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return bytes(body), chunks


async def lifespan(scope, receive, send):
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            state = scope.get("state")
            if state is not None:
                state["started"] = True
                state["token"] = "lifespan-token"
            _marker("startup")
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            _marker("shutdown")
            await send({"type": "lifespan.shutdown.complete"})
            return


# One large bytes object sent by /lent: /lent-refcount shows whether the server still holds references to it.
LENT = bytes(range(256)) * 4096


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        await lifespan(scope, receive, send)
        return
    if scope["type"] != "http":
        raise RuntimeError("unsupported scope type %r" % scope["type"])
    await http(scope, receive, send)


async def no_lifespan_app(scope, receive, send):
    if scope["type"] == "lifespan":
        raise RuntimeError("this application does not support the lifespan protocol")
    await http(scope, receive, send)


async def failing_startup_app(scope, receive, send):
    """Reports lifespan.startup.failed: the server must not serve with it."""
    if scope["type"] == "lifespan":
        message = await receive()
        if message["type"] == "lifespan.startup":
            _marker("startup-failed")
            await send({"type": "lifespan.startup.failed", "message": "database unreachable (on purpose)"})
        return
    await http(scope, receive, send)


async def http(scope, receive, send):
    target = _jsonable(scope.get("raw_path") or scope["path"].encode("utf-8"))
    if scope.get("query_string"):
        target += "?" + _jsonable(scope["query_string"])
    SEEN.append(target)

    path = scope["path"]
    root_path = scope.get("root_path", "")
    if root_path and path.startswith(root_path):
        path = path[len(root_path):] or "/"
    query = _query(scope)

    if path == "/":
        await _respond(send, 200, "hello, asgi")

    elif path == "/echo":
        body, chunks = await _read_body(receive)
        if body is None:
            return
        await _respond(
            send, 200, body, b"application/octet-stream", [(b"x-body-chunks", str(chunks).encode())]
        )

    elif path == "/echo-stream":
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/octet-stream")],
            }
        )
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            if message.get("body"):
                await send({"type": "http.response.body", "body": message["body"], "more_body": True})
            if not message.get("more_body", False):
                break
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    elif path == "/scope" or path.startswith("/scope/"):
        out = {k: _jsonable(v) for k, v in scope.items() if k not in ("state", "app")}
        out["state"] = _jsonable(dict(scope["state"])) if "state" in scope else None
        out["_types"] = {k: type(v).__name__ for k, v in scope.items()}
        out["_header_types"] = sorted(
            {"%s/%s" % (type(n).__name__, type(v).__name__) for n, v in scope.get("headers", [])}
        )
        out["_headers_lowercase"] = all(bytes(n) == bytes(n).lower() for n, _ in scope.get("headers", []))
        body, _ = await _read_body(receive)
        out["_body"] = _jsonable(body)
        await _json(send, out)

    elif path == "/stream":
        n = int(query.get("n", "5"))
        delay = float(query.get("delay", "0"))
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]}
        )
        for i in range(n):
            await send({"type": "http.response.body", "body": b"chunk %d\n" % i, "more_body": True})
            if delay:
                await asyncio.sleep(delay)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    elif path == "/stream-wait":
        marker = query["marker"]
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]}
        )
        await send({"type": "http.response.body", "body": b"first\n", "more_body": True})
        outcome = b"timeout"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if os.path.exists(marker):
                outcome = b"seen-marker"
                break
            await asyncio.sleep(0.02)
        await send({"type": "http.response.body", "body": b"second: " + outcome + b"\n", "more_body": False})

    elif path == "/answer-then-block":
        # Work the application does after its response, without yielding to the loop (a background task
        # of CPU work, say): the response should not wait for it.
        marker = query["marker"]
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", b"9")]})
        await send({"type": "http.response.body", "body": b"answered\n"})
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not os.path.exists(marker):
            time.sleep(0.02)

    elif path == "/headers-shapes":
        body = b"shapes"
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/plain"),
                    [b"content-length", str(len(body)).encode()],
                    (b"x-tuple-bytes", b"tb"),
                    [b"x-list-bytes", b"lb"],
                    (bytearray(b"x-bytearray"), bytearray(b"ba")),
                    ("x-str-name", b"sn"),
                    ["x-str-both", "sb"],
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    elif path == "/error":
        raise RuntimeError("boom in asgi app")

    elif path == "/error-after-start":
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]}
        )
        await send({"type": "http.response.body", "body": b"partial", "more_body": True})
        raise RuntimeError("boom after start")

    elif path == "/disconnect":
        key = query.get("id", "default")
        body, _ = await _read_body(receive)
        await _respond(send, 200, "response complete")
        started = time.monotonic()
        try:
            message = await asyncio.wait_for(receive(), 5)
            RESULTS[key] = {"type": message["type"], "elapsed": time.monotonic() - started}
        except asyncio.TimeoutError:
            RESULTS[key] = {"type": "timeout", "elapsed": time.monotonic() - started}

    elif path == "/wait-disconnect":
        key = query.get("id", "default")
        body, _ = await _read_body(receive)
        RESULTS[key] = {"type": "waiting"}
        try:
            message = await asyncio.wait_for(receive(), 30)
            RESULTS[key] = {"type": message["type"]}
        except asyncio.TimeoutError:
            RESULTS[key] = {"type": "timeout"}

    elif path == "/result":
        await _json(send, RESULTS.get(query.get("id", "default")))

    elif path == "/crlf-header":
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"text/plain"),
                        (b"x-bad", b"value\r\nx-injected: yes"),
                        (b"content-length", b"2"),
                    ],
                }
            )
        except Exception:
            RESULTS["crlf"] = {"type": "send-raised"}
            raise
        RESULTS["crlf"] = {"type": "send-accepted"}
        await send({"type": "http.response.body", "body": b"ok"})

    elif path.startswith("/status/"):
        code = int(path[len("/status/"):])
        if code in (204, 304):
            await send({"type": "http.response.start", "status": code, "headers": []})
            await send({"type": "http.response.body", "body": b""})
        else:
            await _respond(send, code, "status %d" % code)

    elif path == "/big":
        # N chunks of S bytes; RESULTS[id]["sent"] counts the send() calls that returned
        key = query.get("id", "default")
        n = int(query.get("chunks", "16"))
        size = int(query.get("size", "65536"))
        block = b"b" * size
        RESULTS[key] = {"sent": 0}
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/octet-stream"), (b"content-length", str(n * size).encode())],
            }
        )
        for i in range(n):
            await send({"type": "http.response.body", "body": block, "more_body": i < n - 1})
            RESULTS[key] = {"sent": i + 1}

    elif path == "/lent":
        # LENT itself in N body messages (large bytes are lent to the server, not copied)
        n = int(query.get("n", "1"))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/octet-stream"), (b"content-length", str(n * len(LENT)).encode())]})
        for i in range(n):
            await send({"type": "http.response.body", "body": LENT, "more_body": i < n - 1})

    elif path == "/sized":
        size, parts = int(query.get("size", "0")), int(query.get("parts", "1"))
        kind = {"bytes": bytes, "bytearray": bytearray}[query.get("kind", "bytes")]
        body = sized_body(size)
        headers = [(b"content-type", b"application/octet-stream")]
        if query.get("length", "1") == "1":
            headers.append((b"content-length", str(size).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        step = -(-size // parts)  # ceiling: the last part may be shorter
        for i in range(parts):
            piece = body[i * step:(i + 1) * step]
            await send({"type": "http.response.body", "body": kind(piece), "more_body": i < parts - 1})

    elif path == "/lent-refcount":
        await _respond(send, 200, str(sys.getrefcount(LENT)))

    elif path == "/empty-chunks":
        # empty body messages in the middle must not end the response
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]}
        )
        for part in (b"a", b"", b"b", b""):
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": b"c", "more_body": False})

    elif path == "/no-response":
        return

    elif path == "/seen":
        await _json(send, SEEN)

    elif path == "/loop":
        loop = asyncio.get_running_loop()
        await _json(
            send,
            {"module": type(loop).__module__, "name": type(loop).__name__, "python": sys.version.split()[0]},
        )

    elif path == "/sleep":
        await asyncio.sleep(float(query.get("s", "1")))
        await _respond(send, 200, "slept")

    else:
        await _respond(send, 404, "not found: " + path)
