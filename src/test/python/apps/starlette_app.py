"""A small Starlette application (pure Python, so it runs under every CPython here)."""

import os
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.routing import Route


def _marker(line):
    path = os.environ.get("PEREGRINE_TEST_MARKER")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


@asynccontextmanager
async def lifespan(app):
    _marker("startup")
    yield {"greeting": "hello from starlette lifespan"}
    _marker("shutdown")


async def homepage(request):
    return PlainTextResponse("hello, starlette")


async def user(request):
    return JSONResponse({"name": request.path_params["name"], "q": request.query_params.get("q")})


async def state(request):
    return JSONResponse({"greeting": getattr(request.state, "greeting", None)})


async def echo(request):
    body = await request.body()
    return PlainTextResponse(body[::-1].decode("latin-1"))


async def stream(request):
    async def gen():
        for i in range(4):
            yield "part %d\n" % i

    return StreamingResponse(gen(), media_type="text/plain")


app = Starlette(
    routes=[
        Route("/", homepage),
        Route("/users/{name}", user),
        Route("/state", state),
        Route("/echo", echo, methods=["POST"]),
        Route("/stream", stream),
    ],
    lifespan=lifespan,
)
