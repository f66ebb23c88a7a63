"""A FastAPI application for Peregrine's end-to-end tests (CPython 3.11 here:
pydantic-core has no wheel for the other interpreters on this machine)."""

import asyncio
import os
import threading
from contextlib import asynccontextmanager
from typing import List, Optional

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse
from pydantic import BaseModel


def _marker(line):
    path = os.environ.get("PEREGRINE_TEST_MARKER")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


@asynccontextmanager
async def lifespan(app):
    app.state.started = True
    app.state.greeting = "hello from lifespan"
    _marker("startup")
    yield
    _marker("shutdown")


app = FastAPI(lifespan=lifespan)


class Item(BaseModel):
    name: str
    price: float
    tags: List[str] = []


@app.get("/")
async def root():
    return {"hello": "fastapi"}


@app.get("/items/{item_id}")
async def read_item(item_id: int, q: Optional[str] = None, limit: int = 10):
    return {"item_id": item_id, "q": q, "limit": limit}


@app.post("/items")
async def create_item(item: Item):
    return {"received": item.model_dump(), "total": item.price * 2}


@app.get("/stream")
async def stream(n: int = 5):
    async def gen():
        for i in range(n):
            yield "line %d\n" % i
            await asyncio.sleep(0)

    return StreamingResponse(gen(), media_type="text/plain")


@app.get("/sync")
def sync_endpoint(x: int = 0):
    # A plain def endpoint: FastAPI runs it in an anyio worker thread.
    return {"thread": threading.current_thread().name, "ident": threading.get_ident(), "x": x * 2}


@app.get("/async-thread")
async def async_thread():
    return {"thread": threading.current_thread().name, "ident": threading.get_ident()}


@app.get("/state")
async def state(request: Request):
    return {
        "started": getattr(request.app.state, "started", False),
        "greeting": getattr(request.app.state, "greeting", None),
    }


@app.get("/client")
async def client(request: Request):
    # What Starlette derives from the scope: client, scheme (forwarded headers), and the added headers.
    return {
        "host": request.client.host if request.client else None,
        "port": request.client.port if request.client else None,
        "scheme": request.url.scheme,
        "request_id": request.headers.get("x-request-id"),
        "request_start": request.headers.get("x-request-start"),
    }


@app.websocket("/ws/echo")
async def ws_echo(websocket: WebSocket, prefix: str = "echo"):
    """Text comes back prefixed, bytes as they came."""
    await websocket.accept()
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            if message.get("text") is not None:
                await websocket.send_text(prefix + ": " + message["text"])
            else:
                await websocket.send_bytes(message["bytes"])
    except WebSocketDisconnect:
        pass


@app.websocket("/ws/private")
async def ws_private(websocket: WebSocket):
    await websocket.close(code=1008)


@app.websocket("/ws/deny")
async def ws_deny(websocket: WebSocket):
    from starlette.responses import PlainTextResponse

    await websocket.send_denial_response(PlainTextResponse("go away", status_code=451))
