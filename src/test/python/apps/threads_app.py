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
"""
import asyncio
import os
import sys
import threading

from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

RECORD = os.environ.get("PEREGRINE_TEST_RECORD")
_record_lock = threading.Lock()
_meetings = {}
_meetings_lock = threading.Lock()


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


def meet(request):
    n = int(request.query_params["n"])
    with _meetings_lock:
        barrier = _meetings.setdefault(n, threading.Barrier(n))
    try:
        barrier.wait(timeout=20)
    except threading.BrokenBarrierError:
        return PlainTextResponse("alone", status_code=503)
    return PlainTextResponse(threading.current_thread().name)


async def meet_blocking(request):
    # Blocking on purpose: the barrier is passed only if N loops are running at once.
    return meet(request)


async def sleep(request):
    record("sleep")
    await asyncio.sleep(float(request.query_params.get("s", "1")))
    return PlainTextResponse("slept")


async def lifespan(app):
    name = threading.current_thread().name
    record("startup " + name)
    yield {"lifespan_thread": name}
    record("shutdown " + name)


app = Starlette(routes=[Route("/thread", thread), Route("/meet", meet_blocking), Route("/sleep", sleep)], lifespan=lifespan)
