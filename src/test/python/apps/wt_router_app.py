"""A FastAPI application behind peregrine.contrib.fastapi.WebTransportRouter, for
test_webtransport_router.py: WebTransport routes with path parameters next to ordinary FastAPI routes.

FastAPI (served to everything that is not a session):
  GET /                   a small HTML page: the origin the browser's WebTransport code runs in
  GET /hello/{name}       JSON {"hello": name, "http_version": ...}
  GET /lifespan           JSON {"started": whether FastAPI's lifespan ran}
  GET /events?id=I        JSON list of what session I recorded
  WS  /ws/{room}          echoes each text message as "room: message"

WebTransport routes (query id=I names what a session records):
  /chat/{room}            the spec's example: every client stream gets "hello " + its data + " in " + room;
                          records the room as keyword argument and as path_params, and the session's attributes
  /serve/{count:int}      opens a bidirectional stream ("ping", then "got " + the client's answer) and
                          a unidirectional one ("one way" count times)
  /datagrams              every datagram back as "echo " + it, until the session ends
  /close?code=C&reason=R  closes at once with C and R
  /fail                   accepts, then raises
  /record                 reads every client stream by read(5) and records the chunks, a reset (its code), and the end
  /abort                  on each client stream's first bytes: if they start with "reset", sends "partial"
                          and resets it with code 5, else stops it with code 11 (and records that read()
                          then raises ValueError)
  /bulk                   waits until the first client stream holds STREAM_BUFFER unread bytes, records
                          how many it holds a moment later, then echoes the stream by read(65536)
"""

import asyncio
import contextlib
import json
from urllib.parse import parse_qs

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import HTMLResponse, Response

from peregrine.contrib.fastapi import STREAM_BUFFER, SessionClosed, StreamReset, WebTransportRouter

EVENTS = {}
STARTED = []


def record(session, event):
    EVENTS.setdefault(session.query_params.get("id", ""), []).append(event)


@contextlib.asynccontextmanager
async def lifespan(api):
    STARTED.append(True)
    yield


api = FastAPI(lifespan=lifespan)
app = WebTransportRouter(api)


@api.get("/")
async def page():
    return HTMLResponse("<!doctype html><title>wt</title><p>WebTransport router test page</p>")


@api.get("/hello/{name}")
async def hello(name: str, request: Request):
    return {"hello": name, "http_version": request.scope["http_version"]}


@api.get("/lifespan")
async def lifespan_ran():
    return {"started": bool(STARTED)}


@api.get("/events")
async def events(id: str = ""):
    return Response(json.dumps(EVENTS.get(id, [])), media_type="application/json")


@api.websocket("/ws/{room}")
async def ws(websocket: WebSocket, room: str):
    await websocket.accept()
    try:
        while True:
            await websocket.send_text("%s: %s" % (room, await websocket.receive_text()))
    except WebSocketDisconnect:
        pass


@app.route("/chat/{room}")
async def chat(session, room):
    record(session, {"type": "attributes", "room": room, "path_params": session.path_params,
                     "path": session.path, "query_string": session.query_string.decode(),
                     "origin": session.headers.get("origin"), "scope_type": session.scope["type"]})
    await session.accept()
    async for stream in session.incoming_streams():
        await stream.send(b"hello " + await stream.read() + b" in " + room.encode(), end=True)


@app.route("/serve/{count:int}")
async def serve(session, count):
    record(session, {"type": "count", "count_type": type(count).__name__})
    await session.accept()
    bidi = await session.open_stream()
    uni = await session.open_stream(bidirectional=False)
    record(session, {"type": "opened", "bidirectional": [bidi.id, bidi.readable, bidi.writable],
                     "unidirectional": [uni.id, uni.readable, uni.writable]})
    await uni.send(b"one way" * count, end=True)
    await bidi.send(b"ping")
    answer = await bidi.read()
    await bidi.send(b"got " + answer, end=True)
    await session.wait_closed()


@app.route("/datagrams")
async def datagrams(session):
    await session.accept()
    try:
        while True:
            await session.send_datagram(b"echo " + await session.receive_datagram())
    except SessionClosed:
        record(session, {"type": "closed", "code": session.close_code, "reason": session.close_reason})


@app.route("/close")
async def close(session):
    query = parse_qs(session.query_string.decode())
    await session.accept()
    await session.close(int(query["code"][0]), query["reason"][0])


@app.route("/fail")
async def fail(session):
    await session.accept()
    raise RuntimeError("the route failed on purpose: WT-ROUTER-FAILURE")


@app.route("/abort")
async def abort(session):
    await session.accept()
    async for stream in session.incoming_streams():
        first = await stream.read(5)
        if first.startswith(b"reset"):
            await stream.send(b"partial")
            await stream.reset(5)
            record(session, {"type": "reset", "first": first.decode()})
            continue
        await stream.stop(11)
        try:
            await stream.read()
            after = "read"
        except ValueError:
            after = "ValueError"
        record(session, {"type": "stopped", "first": first.decode(), "read after": after})


@app.route("/record")
async def record_streams(session):
    await session.accept()

    async def read(stream):
        chunks = []
        try:
            while True:
                chunk = await stream.read(5)
                if not chunk:
                    break
                chunks.append(chunk.decode())
            record(session, {"type": "stream", "chunks": chunks})
        except StreamReset as e:
            record(session, {"type": "reset", "chunks": chunks, "code": e.code})
        except SessionClosed:
            record(session, {"type": "stream closed", "chunks": chunks})

    readers = []
    async for stream in session.incoming_streams():
        readers.append(asyncio.ensure_future(read(stream)))
    await asyncio.gather(*readers)
    try:
        await session.receive_datagram()
        after = "a datagram"
    except SessionClosed:
        after = "SessionClosed"
    record(session, {"type": "ended", "code": session.close_code, "reason": session.close_reason,
                     "receive_datagram": after})


@app.route("/bulk")
async def bulk(session):
    await session.accept()
    stream = await anext(session.incoming_streams())
    for _ in range(1000):
        if stream.buffered >= STREAM_BUFFER:
            break
        await asyncio.sleep(0.01)
    # give the client time to push more, which the bound must hold back
    await asyncio.sleep(0.5)
    record(session, {"type": "buffered", "bytes": stream.buffered})
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            break
        await stream.send(chunk)
    await stream.send(b"", end=True)
    # Returning would close the session and reset its streams, possibly before the echo is delivered.
    await session.wait_closed()
