"""ASGI and WSGI applications for the tests of workers, signals, reload and the health check.

Routes (both protocols):
  /pid            the process id of the worker that served the request
  /sleep?s=F      sleeps F seconds, then "slept"
  /hold?mark=M&gate=G   creates the file M (the worker's pid) once the application has the request, then waits
                  (up to 60 s) until the file G exists, then "released"
  /block?mark=M&gate=G  (ASGI) as /hold, but waits with time.sleep: the event loop is blocked
  /crash          kills its own worker process with SIGKILL
  /segfault       dereferences NULL in C (ctypes): a crash inside a C extension
  /big?id=X&chunks=N&size=S   (WSGI) N chunks of S bytes, counting in /result?id=X the chunks handed over
  /seen           JSON list of the paths this worker's application was called with
  anything else   "hello from workers_app"

The ASGI lifespan startup waits while the file named by PEREGRINE_TEST_STARTUP_GATE
does not exist (when that variable is set), so a test can hold a worker in startup; each
worker that waits there creates GATE.waiting-PID first, so the test can tell it does.
When PEREGRINE_TEST_LIFESPAN_DIR is set, each worker creates startup-PID in that directory as
its lifespan startup completes, and shutdown-PID as its lifespan shutdown runs.
"""

import asyncio
import json
import os
import signal
import time
from urllib.parse import parse_qs

SEEN = []
RESULTS = {}
HOLD_LIMIT = 600  # polls of 0.1 s: a test that never opens the gate does not hold the worker forever


def _held(query):
    """The gate of /hold, once the marker (holding this worker's pid) says the application has the request."""
    partial = query["mark"][0] + ".partial"
    with open(partial, "w") as mark:
        mark.write(str(os.getpid()))
    os.rename(partial, query["mark"][0])
    return query["gate"][0]


def _lifespan_marker(phase):
    directory = os.environ.get("PEREGRINE_TEST_LIFESPAN_DIR")
    if directory:
        open(os.path.join(directory, "%s-%d" % (phase, os.getpid())), "w").close()


def _route(path, query):
    SEEN.append(path)
    if path == "/pid":
        return 200, str(os.getpid()).encode()
    if path == "/seen":
        return 200, json.dumps(SEEN).encode()
    if path == "/crash":
        os.kill(os.getpid(), signal.SIGKILL)
    if path == "/segfault":
        import ctypes

        ctypes.string_at(0)
    return 200, b"hello from workers_app"


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                gate = os.environ.get("PEREGRINE_TEST_STARTUP_GATE")
                if gate:
                    open("%s.waiting-%d" % (gate, os.getpid()), "w").close()
                while gate and not os.path.exists(gate):
                    await asyncio.sleep(0.05)
                _lifespan_marker("startup")
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                _lifespan_marker("shutdown")
                await send({"type": "lifespan.shutdown.complete"})
                return
    query = parse_qs(scope["query_string"].decode())
    if scope["path"] == "/sleep":
        SEEN.append("/sleep")
        await asyncio.sleep(float(query.get("s", ["1"])[0]))
        status, body = 200, b"slept"
    elif scope["path"] == "/hold":
        gate = _held(query)
        for _ in range(HOLD_LIMIT):
            if os.path.exists(gate):
                break
            await asyncio.sleep(0.1)
        status, body = 200, b"released"
    elif scope["path"] == "/block":
        gate = _held(query)
        for _ in range(HOLD_LIMIT):
            if os.path.exists(gate):
                break
            time.sleep(0.1)  # a synchronous call in an async view, as applications make by mistake
        status, body = 200, b"released"
    else:
        status, body = _route(scope["path"], query)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _big(key, chunks, size):
    block = b"b" * size
    for i in range(chunks):
        RESULTS[key] = i
        yield block
    RESULTS[key] = chunks


def wsgi(environ, start_response):
    query = parse_qs(environ.get("QUERY_STRING", ""))
    path = environ["PATH_INFO"]
    if path == "/big":
        chunks, size = int(query["chunks"][0]), int(query["size"][0])
        start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(chunks * size))])
        return _big(query["id"][0], chunks, size)
    if path == "/result":
        body = json.dumps(RESULTS.get(query["id"][0])).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]
    if path == "/sleep":
        SEEN.append("/sleep")
        time.sleep(float(query.get("s", ["1"])[0]))
        status, body = 200, b"slept"
    elif path == "/hold":
        gate = _held(query)
        for _ in range(HOLD_LIMIT):
            if os.path.exists(gate):
                break
            time.sleep(0.1)
        status, body = 200, b"released"
    else:
        status, body = _route(path, query)
    start_response("%d OK" % status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
