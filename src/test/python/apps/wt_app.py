"""A plain ASGI application for the WebTransport end-to-end tests (test_webtransport.py), written
against the messages of docs/WEBTRANSPORT.md. No third-party imports.

HTTP:
  /                       a small HTML page: the origin the browser's WebTransport code runs in
  /events?id=I            JSON list of what session I recorded (see below)
  /release?id=I           lets session I of /hold go on receiving
  /flood-state?id=I       JSON progress of session I of /flood (see below)

WebTransport sessions (the path decides):
  /echo?id=I              accepts; every stream's data goes back on the same stream (its end too),
                          every datagram back as a datagram; records each message's type, and the
                          scope of the session ("scope" event)
  /refuse?status=N        refuses with status N (403 when absent)
  /close?code=C&reason=R  accepts, then closes at once with code C and reason R
  /record?id=I            accepts and records every message (type, stream, data, end_stream, code,
                          reason) until the disconnect
  /slow?id=I&ms=M         accepts, waits M ms without receiving, then records how many datagrams
                          are waiting to be received (until the first stream data arrives)
  /hold?id=I              as /slow, but waits until /release?id=I is requested (60 s at most)
  /serve?id=I             accepts, opens a bidirectional stream (sends "ping" on it) and a
                          unidirectional one ("one way from the server", then its end); records
                          every message and the IDs it got ("opened"); when the client ends the
                          bidirectional stream, answers "done" and ends it too
  /abort?id=I&reset=R&stop=S
                          accepts; on the first data of a stream the client opened both ways: if it
                          starts with "reset", sends "partial" on it and resets it with code R, else
                          stops it with code S; records every message until the disconnect
  /flood?id=I&size=N      accepts; on the first data of a stream the client opened both ways, a task
                          of its own sends N bytes on that stream in 64 KiB blocks, its progress kept
                          for /flood-state ({"state": "sending"|"done", "sent": bytes handed to
                          send()}); every other stream is echoed as /echo does, by the main task
  /fail                   accepts, then raises
anything else: refused with 404.
"""

import asyncio
import json
from urllib.parse import parse_qs

EVENTS = {}
FLOOD = {}
# Sessions of /hold by ID, set by /release: one event loop serves HTTP and WebTransport alike.
RELEASES = {}

PAGE = b"<!doctype html><title>wt</title><p>WebTransport test page</p>"


def record(sid, event):
    EVENTS.setdefault(sid, []).append(event)


def release(sid):
    return RELEASES.setdefault(sid, asyncio.Event())


async def count_datagrams(sid, receive):
    """Receives until something other than a datagram arrives; records how many datagrams came first."""
    datagrams = 0
    while True:
        message = await receive()
        if message["type"] != "webtransport.datagram.receive":
            break
        datagrams += 1
    record(sid, {"type": "datagrams", "count": datagrams, "then": message["type"]})


def summary(message):
    out = {"type": message["type"]}
    for key in ("stream", "end_stream", "code", "reason"):
        if key in message:
            out[key] = message[key]
    if "data" in message:
        out["data"] = message["data"].decode("latin-1")
    return out


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
    elif scope["type"] == "webtransport":
        await session(scope, receive, send)


async def http(scope, receive, send):
    query = parse_qs(scope["query_string"].decode())
    if scope["path"] == "/events":
        body = json.dumps(EVENTS.get(query.get("id", [""])[0], [])).encode()
        content_type = b"application/json"
    elif scope["path"] == "/flood-state":
        body = json.dumps(FLOOD.get(query.get("id", [""])[0])).encode()
        content_type = b"application/json"
    elif scope["path"] == "/release":
        release(query.get("id", [""])[0]).set()
        body, content_type = b"released", b"text/plain"
    else:
        body, content_type = PAGE, b"text/html"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", content_type)]})
    await send({"type": "http.response.body", "body": body})


async def session(scope, receive, send):
    query = parse_qs(scope["query_string"].decode())
    sid = query.get("id", [""])[0]
    connect = await receive()
    assert connect["type"] == "webtransport.connect", connect
    path = scope["path"]
    if path == "/echo":
        record(sid, {"type": "scope", "scope": {
            "type": scope["type"], "path": scope["path"], "query_string": scope["query_string"].decode(),
            "http_version": scope["http_version"], "scheme": scope["scheme"],
            "client": list(scope["client"]), "server": list(scope["server"]),
            "header_names": sorted({name.decode() for name, _ in scope["headers"]}),
            "extensions": sorted(scope["extensions"]), "has_state": isinstance(scope.get("state"), dict)}})
        await send({"type": "webtransport.accept", "headers": [(b"x-wt-app", b"echo")]})
        while True:
            message = await receive()
            record(sid, {"type": message["type"]})
            if message["type"] == "webtransport.stream.receive":
                await send({"type": "webtransport.stream.send", "stream": message["stream"],
                            "data": message["data"], "end_stream": message["end_stream"]})
            elif message["type"] == "webtransport.datagram.receive":
                await send({"type": "webtransport.datagram.send", "data": message["data"]})
            elif message["type"] == "webtransport.disconnect":
                return
    elif path == "/refuse":
        await send({"type": "webtransport.close", "status": int(query.get("status", ["403"])[0])})
    elif path == "/close":
        await send({"type": "webtransport.accept"})
        await send({"type": "webtransport.close", "code": int(query["code"][0]), "reason": query["reason"][0]})
        record(sid, summary(await receive()))
    elif path == "/record":
        await send({"type": "webtransport.accept"})
        while True:
            message = await receive()
            record(sid, summary(message))
            if message["type"] == "webtransport.disconnect":
                return
    elif path == "/slow":
        await send({"type": "webtransport.accept"})
        await asyncio.sleep(int(query.get("ms", ["1000"])[0]) / 1000)
        await count_datagrams(sid, receive)
    elif path == "/hold":
        await send({"type": "webtransport.accept"})
        try:
            await asyncio.wait_for(release(sid).wait(), 60)
        except asyncio.TimeoutError:
            # Bounded so that a test that fails before releasing leaves no session waiting forever.
            pass
        await count_datagrams(sid, receive)
    elif path == "/serve":
        await send({"type": "webtransport.accept"})
        bidi = await send({"type": "webtransport.stream.open", "bidirectional": True})
        uni = await send({"type": "webtransport.stream.open", "bidirectional": False})
        record(sid, {"type": "opened", "bidirectional": bidi, "unidirectional": uni})
        await send({"type": "webtransport.stream.send", "stream": bidi, "data": b"ping"})
        await send({"type": "webtransport.stream.send", "stream": uni, "data": b"one way from the server",
                    "end_stream": True})
        while True:
            message = await receive()
            record(sid, summary(message))
            if message["type"] == "webtransport.disconnect":
                return
            if message["type"] == "webtransport.stream.receive" and message["end_stream"]:
                await send({"type": "webtransport.stream.send", "stream": message["stream"], "data": b"done",
                            "end_stream": True})
    elif path == "/abort":
        await send({"type": "webtransport.accept"})
        aborted = set()
        while True:
            message = await receive()
            record(sid, summary(message))
            if message["type"] == "webtransport.disconnect":
                return
            stream = message.get("stream")
            if message["type"] == "webtransport.stream.receive" and stream % 4 == 0 and stream not in aborted:
                aborted.add(stream)
                if message["data"].startswith(b"reset"):
                    await send({"type": "webtransport.stream.send", "stream": stream, "data": b"partial"})
                    await send({"type": "webtransport.stream.reset", "stream": stream, "code": int(query["reset"][0])})
                else:
                    await send({"type": "webtransport.stream.stop", "stream": stream, "code": int(query["stop"][0])})
                record(sid, {"type": "aborted", "stream": stream})
    elif path == "/flood":
        await send({"type": "webtransport.accept"})
        size = int(query["size"][0])
        flood = flooded = None

        async def send_flood(stream):
            block = bytes(65536)
            FLOOD[sid] = {"state": "sending", "sent": 0}
            while FLOOD[sid]["sent"] < size:
                await send({"type": "webtransport.stream.send", "stream": stream, "data": block})
                FLOOD[sid]["sent"] += len(block)
            FLOOD[sid]["state"] = "done"

        while True:
            message = await receive()
            if message["type"] == "webtransport.disconnect":
                return
            if message["type"] != "webtransport.stream.receive":
                continue
            if flood is None and message["stream"] % 4 == 0:
                flooded = message["stream"]
                flood = asyncio.get_running_loop().create_task(send_flood(flooded))
            elif message["stream"] != flooded:
                await send({"type": "webtransport.stream.send", "stream": message["stream"],
                            "data": message["data"], "end_stream": message["end_stream"]})
    elif path == "/fail":
        await send({"type": "webtransport.accept"})
        raise RuntimeError("the application failed on purpose")
    else:
        await send({"type": "webtransport.close", "status": 404})
