"""The FastAPI hello app of fastapi_app.py, with the pid of the process that answered in an `X-Worker-Pid`
header on every HTTP response: bench/respawn tells from it which worker served a request."""
import os

from fastapi_app import app as fastapi_app


async def app(scope, receive, send):
    if scope["type"] != "http":
        return await fastapi_app(scope, receive, send)

    async def send_naming_the_worker(message):
        if message["type"] == "http.response.start":
            # Read per request, not once at import: a server that imports the application before it forks
            # would otherwise name its parent.
            headers = [*message.get("headers", []), (b"x-worker-pid", str(os.getpid()).encode())]
            message = {**message, "headers": headers}
        await send(message)

    await fastapi_app(scope, receive, send_naming_the_worker)
