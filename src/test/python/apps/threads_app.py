"""A Starlette application for the tests of free-threaded workers (--free-threaded).

Environment:
  PEREGRINE_TEST_RECORD  a file that gets a line "import" when the module is imported, and
                         "startup THREAD" / "shutdown THREAD" as each lifespan runs, THREAD being
                         the name of the thread that ran it.

Routes:
  /thread        JSON: the serving thread's name, the name of the thread whose lifespan made the
                 request's state, and whether the GIL is enabled
  /meet?n=N      waits (blocking its thread) until N requests are in it at once, then answers with its
                 thread's name: only N threads running at the same time can all be answered
  /sleep?s=F     records "sleep", awaits F seconds, then "slept"
  /pid           the process's id
  /block?s=F     records "block", blocks its thread (and so its loop) for F seconds, then "unblocked"
"""
import asyncio
import os
import sys
import threading
import time

import meeting
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

RECORD = os.environ.get("PEREGRINE_TEST_RECORD")
_record_lock = threading.Lock()


def record(line):
    if RECORD:
        with _record_lock, open(RECORD, "a") as f:
            f.write(line + "\n")


record("import")


def gil_enabled():
    check = getattr(sys, "_is_gil_enabled", None)
    return True if check is None else check()


async def thread(request):
    return JSONResponse({"thread": threading.current_thread().name,
                         "lifespan_thread": request.state.lifespan_thread,
                         "gil_enabled": gil_enabled()})


async def meet(request):
    # Blocking its loop on purpose: the meeting happens only if N loops run at once.
    name = meeting.meet(int(request.query_params["n"]))
    return PlainTextResponse(name) if name else PlainTextResponse("alone", status_code=503)


async def sleep(request):
    record("sleep")
    await asyncio.sleep(float(request.query_params.get("s", "1")))
    return PlainTextResponse("slept")


async def pid(request):
    return PlainTextResponse(str(os.getpid()))


async def block(request):
    record("block")
    time.sleep(float(request.query_params.get("s", "1")))  # the mistake of a synchronous call in async code
    record("unblocked")
    return PlainTextResponse(threading.current_thread().name)


async def lifespan(app):
    name = threading.current_thread().name
    record("startup " + name)
    yield {"lifespan_thread": name}
    record("shutdown " + name)


app = Starlette(routes=[Route("/thread", thread), Route("/meet", meet), Route("/sleep", sleep), Route("/block", block), Route("/pid", pid)], lifespan=lifespan)
