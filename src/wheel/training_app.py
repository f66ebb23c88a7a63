"""The application bin/build-wheel serves during the training run that records the server's AOT cache.

It is plain ASGI so that any CPython with a shared libpython can train, without packages. What matters
is the Java code the requests drive (HTTP/1.1 parsing and framing, the ASGI bridge, lifespan, errors),
not what the application does.
"""


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
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    path = scope["path"]
    if path == "/missing":
        await send({"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"not found"})
    elif path == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        for i in range(3):
            await send({"type": "http.response.body", "body": b"part %d\n" % i, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    elif path == "/error":
        raise RuntimeError("the training run asks for a 500")
    else:
        answer = body or b"hello"
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(answer)).encode())]})
        await send({"type": "http.response.body", "body": answer})
