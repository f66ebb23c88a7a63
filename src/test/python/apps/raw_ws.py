"""A plain ASGI application with WebSocket endpoints, for the WebSocket end-to-end tests.

Runs under every CPython the tests use (no third-party imports). Plain HTTP routes report what the
WebSocket endpoints saw: /stats returns a JSON object of counters and the last close codes.
"""

import asyncio
import json
import os

stats = {"received": 0, "sent": 0, "disconnects": [], "slow_released": False, "waiting_sends": 0}
release = None  # set by GET /release: lets /slow start reading


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "http":
        await http(scope, receive, send)
        return
    assert scope["type"] == "websocket"
    handler = ROUTES.get(scope["path"], echo)
    await handler(scope, receive, send)


async def http(scope, receive, send):
    global release
    if scope["path"] == "/release":
        _release().set()
        body = b"released"
    elif scope["path"] == "/reset":
        stats.update(received=0, sent=0, disconnects=[])
        body = b"ok"
    else:
        body = json.dumps(stats).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


def _release():
    global release
    if release is None:
        release = asyncio.Event()
    return release


async def expect_connect(receive):
    message = await receive()
    assert message["type"] == "websocket.connect", message


async def echo(scope, receive, send):
    """Echoes every message as it came (text as text, bytes as bytes); records the peer's close code."""
    await expect_connect(receive)
    await send({"type": "websocket.accept"})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            stats["disconnects"].append([message["code"], message.get("reason", "")])
            return
        stats["received"] += 1
        if message.get("text") is not None:
            await send({"type": "websocket.send", "text": message["text"]})
        else:
            await send({"type": "websocket.send", "bytes": message["bytes"]})


async def scope_report(scope, receive, send):
    """Accepts and sends the scope (what is JSON-able) as one text message, then closes."""
    await expect_connect(receive)
    await send({"type": "websocket.accept"})
    report = {
        key: scope[key]
        for key in ("type", "http_version", "scheme", "path", "root_path", "subprotocols", "client", "server")
    }
    report["raw_path"] = scope["raw_path"].decode("latin-1")
    report["query_string"] = scope["query_string"].decode("latin-1")
    report["headers"] = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]]
    report["has_state"] = isinstance(scope.get("state"), dict)
    report["asgi"] = scope["asgi"]
    report["has_method"] = "method" in scope
    report["extensions"] = scope.get("extensions")
    await send({"type": "websocket.send", "text": json.dumps(report)})
    await send({"type": "websocket.close", "code": 1000})


async def subprotocol(scope, receive, send):
    """Picks 'chat.v2' when offered, else the first offered, else none; echoes once."""
    await expect_connect(receive)
    offered = scope["subprotocols"]
    chosen = "chat.v2" if "chat.v2" in offered else (offered[0] if offered else None)
    await send({"type": "websocket.accept", "subprotocol": chosen})
    await send({"type": "websocket.send", "text": "chose " + str(chosen)})
    await send({"type": "websocket.close"})


async def extra_headers(scope, receive, send):
    await expect_connect(receive)
    await send({"type": "websocket.accept", "headers": [(b"x-extra", b"yes"), (b"set-cookie", b"session=abc")]})
    await send({"type": "websocket.send", "text": "hello"})
    await send({"type": "websocket.close"})


async def deny(scope, receive, send):
    """Refuses the handshake with a real HTTP response, body in two parts."""
    await expect_connect(receive)
    await send({"type": "websocket.http.response.start", "status": 401,
                "headers": [(b"content-type", b"text/plain"), (b"x-denied", b"1")]})
    await send({"type": "websocket.http.response.body", "body": b"not ", "more_body": True})
    await send({"type": "websocket.http.response.body", "body": b"allowed"})


async def reject(scope, receive, send):
    """Closes before accepting: the server answers 403."""
    await expect_connect(receive)
    await send({"type": "websocket.close"})


async def close_with_code(scope, receive, send):
    """Receives one message, then closes with 4001 'bye'; records the close that follows."""
    await expect_connect(receive)
    await send({"type": "websocket.accept"})
    await receive()
    await send({"type": "websocket.close", "code": 4001, "reason": "bye"})
    message = await receive()
    stats["disconnects"].append([message["code"], message.get("reason", "")])


async def burst_then_close(scope, receive, send):
    """On a message 'n', sends the texts '0' to 'n-1' and closes with 4003 'burst done', all in one turn of
    the loop (no send has to wait)."""
    await expect_connect(receive)
    await send({"type": "websocket.accept"})
    n = int((await receive())["text"])
    for i in range(n):
        await send({"type": "websocket.send", "text": str(i)})
    await send({"type": "websocket.close", "code": 4003, "reason": "burst done"})


async def fail_after_accept(scope, receive, send):
    await expect_connect(receive)
    await send({"type": "websocket.accept"})
    raise RuntimeError("deliberate failure after accept")


async def return_without_close(scope, receive, send):
    await expect_connect(receive)
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.send", "text": "bye"})


async def slow(scope, receive, send):
    """Does not receive until GET /release; then counts every message and answers the count when told 'done'."""
    await expect_connect(receive)
    await send({"type": "websocket.accept"})
    await _release().wait()
    count = 0
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        if message.get("text") == "done":
            await send({"type": "websocket.send", "text": str(count)})
            continue
        count += 1
        stats["received"] = count


async def flood(scope, receive, send):
    """Sends 'n' messages of 'size' bytes (from the first message, 'n size'), counting in /stats as it goes."""
    await expect_connect(receive)
    await send({"type": "websocket.accept"})
    first = await receive()
    n, size = map(int, first["text"].split())
    payload = b"x" * size
    for i in range(n):
        await send({"type": "websocket.send", "bytes": payload})
        stats["sent"] = i + 1
    await send({"type": "websocket.send", "text": "end"})
    while (await receive())["type"] != "websocket.disconnect":
        pass


async def flood_from_two_tasks(scope, receive, send):
    """As /flood, from two tasks at once ('a' and 'b', each then sending 'end a' or 'end b'); /stats
    counts the sends in progress ("waiting_sends")."""
    await expect_connect(receive)
    await send({"type": "websocket.accept"})
    first = await receive()
    n, size = map(int, first["text"].split())
    payload = b"x" * size

    async def sender(name):
        for _ in range(n):
            stats["waiting_sends"] += 1
            try:
                await send({"type": "websocket.send", "bytes": payload})
            finally:
                stats["waiting_sends"] -= 1
        await send({"type": "websocket.send", "text": "end " + name})

    await asyncio.gather(sender("a"), sender("b"))
    while (await receive())["type"] != "websocket.disconnect":
        pass


async def wait_for_disconnect(scope, receive, send):
    """Accepts and only waits: for the dead-peer and drain tests."""
    await expect_connect(receive)
    await send({"type": "websocket.accept"})
    message = await receive()
    stats["disconnects"].append([message["code"], message.get("reason", "")])
    marker = os.environ.get("PEREGRINE_TEST_MARKER")
    if marker:
        with open(marker, "a", encoding="utf-8") as f:
            f.write("disconnect %d\n" % message["code"])


ROUTES = {
    "/echo": echo,
    "/scope": scope_report,
    "/subprotocol": subprotocol,
    "/headers": extra_headers,
    "/deny": deny,
    "/reject": reject,
    "/close": close_with_code,
    "/burst": burst_then_close,
    "/fail": fail_after_accept,
    "/return": return_without_close,
    "/slow": slow,
    "/flood": flood,
    "/flood-two": flood_from_two_tasks,
    "/wait": wait_for_disconnect,
}
