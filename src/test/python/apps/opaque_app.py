"""An application whose protocol cannot be detected by inspecting the callable:
a callable object taking *args. It answers as WSGI when called with two
arguments and as ASGI when called with three, so the response says which
protocol the server chose (used with --protocol wsgi|asgi)."""


class Opaque:
    def __call__(self, *args):
        if len(args) == 2:
            environ, start_response = args
            body = b"served as wsgi"
            start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
            return [body]
        return self._asgi(*args)

    async def _asgi(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b"served as asgi"
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


app = Opaque()
