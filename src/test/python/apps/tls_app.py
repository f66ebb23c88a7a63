"""A plain ASGI application for the TLS end-to-end tests (test_tls.py).

No third-party imports, so that it runs under every CPython the tests use.

  /                     "hello, tls"
  /scope                JSON: the scope's scheme, http_version, type, path, query and headers
  /own-hsts             sets its own strict-transport-security header (the server must not add a second)
  anything else         404
  WebSocket, any path   accepts, sends the scope's scheme and http_version as JSON, then echoes
                        text messages until the client closes
"""

import json

OWN_HSTS = b"max-age=60; includeSubDomains"


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "websocket":
        await websocket(scope, receive, send)
        return
    await http(scope, receive, send)


async def _respond(send, status, body, content_type=b"text/plain", headers=()):
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
            + list(headers),
        }
    )
    await send({"type": "http.response.body", "body": body})


async def http(scope, receive, send):
    # the body is not needed by any route, but is read so that the request is complete
    while True:
        message = await receive()
        if message["type"] == "http.disconnect" or not message.get("more_body", False):
            break
    path = scope["path"]
    if path == "/":
        await _respond(send, 200, b"hello, tls")
    elif path == "/scope":
        report = {
            "type": scope["type"],
            "scheme": scope.get("scheme"),
            "http_version": scope.get("http_version"),
            "path": path,
            "query_string": scope.get("query_string", b"").decode("latin-1"),
            "headers": [[n.decode("latin-1"), v.decode("latin-1")] for n, v in scope.get("headers", [])],
        }
        await _respond(send, 200, json.dumps(report).encode(), b"application/json")
    elif path == "/own-hsts":
        await _respond(send, 200, b"own hsts", headers=[(b"strict-transport-security", OWN_HSTS)])
    else:
        await _respond(send, 404, b"not found")


async def websocket(scope, receive, send):
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    await send(
        {
            "type": "websocket.send",
            "text": json.dumps({"scheme": scope.get("scheme"), "http_version": scope.get("http_version")}),
        }
    )
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        if message.get("text") is not None:
            await send({"type": "websocket.send", "text": "echo: " + message["text"]})
