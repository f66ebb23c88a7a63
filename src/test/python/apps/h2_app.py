"""A plain ASGI application for the HTTP/2 end-to-end tests (test_http2.py).

Every route of raw_asgi is served too (requests this module does not know go to
raw_asgi.http), and the records are shared with it: /result?id=X shows what
the routes below recorded as well.

Routes added here:

  /download?size=N&chunk=C&id=X  N bytes of pattern(N) (numbered lines, so a
                          lost, repeated or reordered piece shows), sent in
                          pieces of C bytes; RESULTS[X]["sent"] counts the
                          send() calls that returned, RESULTS[X]["pieces"] is
                          how many there are
  /digest?id=X&pause_after=N  reads the body with receive(); with pause_after,
                          stops reading once it has N bytes, records
                          {"state": "paused", "read": bytes read} and waits
                          (up to 15 s) for /release?id=X before reading the
                          rest; answers JSON {length, sha256, messages}
  /no-read?id=X           never calls receive(): records {"state": "started"},
                          waits (up to 15 s) for /release?id=X, then answers
  /release?id=X           lets /digest or /no-read with that id go on
  /record?id=X            calls receive() until the body ends or a disconnect,
                          recording every message in RESULTS[X]["messages"]
                          as it goes; answers with the body
  /mirror                 answers every request header x-echo-NAME with a
                          response header x-echo-NAME of the same value, and a
                          JSON body of the request's method, path, query and
                          headers
  /barrier?id=X&n=N&tag=T  answers "passed T" once N requests with the same id
                          are in the application at the same time ("broken T"
                          after 10 s)
"""

import asyncio
import hashlib
import json
from urllib.parse import parse_qs

import raw_asgi
from raw_asgi import RESULTS

_PATTERNS = {}
_RELEASES = {}
_BARRIERS = {}


def pattern(size):
    """size bytes of numbered 8-byte lines; the tests build the same."""
    data = _PATTERNS.get(size)
    if data is None:
        data = b"".join(b"%07d\n" % i for i in range(size // 8 + 1))[:size]
        _PATTERNS[size] = data
    return data


def _query(scope):
    return {k: v[-1] for k, v in parse_qs(scope.get("query_string", b"").decode("latin-1")).items()}


def _release_event(key):
    event = _RELEASES.get(key)
    if event is None:
        event = _RELEASES[key] = asyncio.Event()
    return event


async def _wait_release(key):
    try:
        await asyncio.wait_for(_release_event(key).wait(), 15)
        return True
    except asyncio.TimeoutError:
        return False


async def _send_all(send, status, body, content_type=b"application/octet-stream", headers=()):
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
            + list(headers),
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _send_json(send, obj):
    await _send_all(send, 200, json.dumps(obj).encode(), b"application/json")


async def app(scope, receive, send):
    if scope["type"] != "http":
        await raw_asgi.app(scope, receive, send)
        return
    path = scope["path"]
    query = _query(scope)
    key = query.get("id", "default")

    if path == "/download":
        size = int(query.get("size", "1048576"))
        piece = int(query.get("chunk", "16384"))
        data = pattern(size)
        pieces = max(1, -(-size // piece))
        RESULTS[key] = {"sent": 0, "pieces": pieces}
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/octet-stream"), (b"content-length", str(size).encode())],
            }
        )
        for i in range(pieces):
            await send(
                {"type": "http.response.body", "body": data[i * piece:(i + 1) * piece], "more_body": i < pieces - 1}
            )
            RESULTS[key] = {"sent": i + 1, "pieces": pieces}

    elif path == "/digest":
        pause_after = int(query["pause_after"]) if "pause_after" in query else None
        digest = hashlib.sha256()
        length = messages = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                RESULTS[key] = {"state": "disconnect", "read": length}
                return
            messages += 1
            body = message.get("body", b"")
            digest.update(body)
            length += len(body)
            if not message.get("more_body", False):
                break
            if pause_after is not None and length >= pause_after:
                RESULTS[key] = {"state": "paused", "read": length}
                pause_after = None
                if not await _wait_release(key):
                    RESULTS[key] = {"state": "never released", "read": length}
                    return
        RESULTS[key] = {"state": "done", "read": length}
        await _send_json(send, {"length": length, "sha256": digest.hexdigest(), "messages": messages})

    elif path == "/no-read":
        RESULTS[key] = {"state": "started"}
        released = await _wait_release(key)
        RESULTS[key] = {"state": "released" if released else "never released"}
        await _send_all(send, 200, b"answered without reading", b"text/plain")

    elif path == "/release":
        _release_event(key).set()
        await _send_all(send, 200, b"released", b"text/plain")

    elif path == "/record":
        messages = []
        RESULTS[key] = {"messages": messages}
        body = bytearray()
        while True:
            message = await receive()
            messages.append(
                {"type": message["type"], "length": len(message.get("body", b"")), "more_body": message.get("more_body", False)}
            )
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        await _send_all(send, 200, bytes(body))

    elif path == "/mirror":
        headers = [(bytes(n).decode("latin-1"), bytes(v).decode("latin-1")) for n, v in scope["headers"]]
        echoed = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in headers if n.startswith("x-echo-")]
        body = {
            "method": scope["method"],
            "path": scope["path"],
            "query": scope["query_string"].decode("latin-1"),
            "headers": headers,
        }
        await _send_all(send, 200, json.dumps(body).encode(), b"application/json", echoed)

    elif path == "/barrier":
        n = int(query.get("n", "2"))
        tag = query.get("tag", "")
        state = _BARRIERS.get(key)
        if state is None:
            state = _BARRIERS[key] = {"count": 0, "event": asyncio.Event()}
        state["count"] += 1
        if state["count"] >= n:
            state["event"].set()
        try:
            await asyncio.wait_for(state["event"].wait(), 10)
            outcome = "passed"
        except asyncio.TimeoutError:
            outcome = "broken"
        await _send_all(send, 200, ("%s %s" % (outcome, tag)).encode(), b"text/plain")

    else:
        await raw_asgi.http(scope, receive, send)
