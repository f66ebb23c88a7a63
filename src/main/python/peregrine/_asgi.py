"""The ASGI side of the bridge: the event loop the application runs on, lifespan, and the task each request runs in.

Java owns the connections. It hands requests to this loop through a queue and wakes it with an
eventfd; ``_native.asgi_wake`` (Java) drains the queue and starts a ``run_request`` task for each new
request. The request's ``receive`` and ``send`` are Java built-ins bound to the request: each call
crosses once and returns a future, already done unless the application must wait.
"""
import asyncio
import sys
import traceback

from peregrine import _native

_done = _native.asgi_done

# The application: one object for every worker thread of a free-threaded process, each of which runs
# a loop of its own.
_app = None

ASGI_VERSION = {"version": "3.0", "spec_version": "2.4"}


async def run_request(scope, receive, send, cid):
    """One request's task. receive and send are built-ins bound to cid: they return futures."""
    try:
        await _app(scope, receive, send)
    except asyncio.CancelledError:
        _done(cid, "")
    except BaseException:  # the application's failure is reported, never allowed to stop the loop
        _done(cid, traceback.format_exc())
    else:
        _done(cid, None)


def resolve(future, value):
    """Completes a future Java handed out earlier, unless the task awaiting it was cancelled."""
    if not future.done():
        future.set_result(value)


def stop():
    """Called by Java from a task on the loop to stop (each worker thread's own)."""
    asyncio.get_running_loop().stop()


class _Lifespan:
    """Runs the application's lifespan protocol; an app that raises before startup completes has none."""

    def __init__(self, app, loop, state):
        self.app = app
        self.loop = loop
        self.state = state
        self.queue = asyncio.Queue()
        self.started = loop.create_future()
        self.stopped = loop.create_future()
        self.supported = True
        self.failure = None
        self.task = None

    async def _main(self):
        scope = {"type": "lifespan", "asgi": dict(ASGI_VERSION, spec_version="2.0"), "state": self.state}
        try:
            await self.app(scope, self.queue.get, self._send)
        except BaseException:
            if not self.started.done():
                self.supported = False
                _native.log(10, "ASGI lifespan appears unsupported by the application; continuing without it.\n"
                            + traceback.format_exc())
            else:
                _native.log(40, "Exception in ASGI lifespan:\n" + traceback.format_exc())
        finally:
            for future in (self.started, self.stopped):
                if not future.done():
                    future.set_result(None)

    async def _send(self, message):
        kind = message["type"]
        if kind == "lifespan.startup.complete":
            resolve(self.started, None)
        elif kind == "lifespan.startup.failed":
            self.failure = message.get("message", "") or "lifespan startup failed"
            resolve(self.started, None)
        elif kind == "lifespan.shutdown.complete":
            resolve(self.stopped, None)
        elif kind == "lifespan.shutdown.failed":
            _native.log(40, "ASGI lifespan shutdown failed: " + str(message.get("message", "")))
            resolve(self.stopped, None)
        else:
            raise RuntimeError(f"unexpected ASGI lifespan message type {kind!r}")

    async def startup(self):
        self.task = self.loop.create_task(self._main())
        await self.queue.put({"type": "lifespan.startup"})
        await self.started
        return self.failure

    async def shutdown(self):
        if not self.supported or self.task is None or self.task.done():
            return
        await self.queue.put({"type": "lifespan.shutdown"})
        await self.stopped


def _new_loop(use_uvloop):
    if use_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop(), "uvloop"
    return asyncio.new_event_loop(), "asyncio"


def run(app, wake_fd, use_uvloop, lifespan, shared_state=None):
    """The Python thread's whole life in ASGI mode: lifespan startup, serving, lifespan shutdown.

    shared_state: the state of a lifespan that another worker thread ran for the whole process
    (--lifespan-scope process); this loop then runs none of its own."""
    global _app
    loop, loop_name = _new_loop(use_uvloop)
    asyncio.set_event_loop(loop)
    if sys.version_info >= (3, 12):
        # Eager tasks run the application's first steps inside start(), without a trip around the loop.
        loop.set_task_factory(asyncio.eager_task_factory)
    _app = app
    state = {} if shared_state is None else shared_state
    life = _Lifespan(app, loop, state) if lifespan and shared_state is None else None
    try:
        if life is not None:
            failure = loop.run_until_complete(life.startup())
            if failure is not None:
                _native.asgi_ready(None, loop_name, "ASGI lifespan startup failed: " + failure)
                return
            if not life.supported:
                state.clear()
        loop.add_reader(wake_fd, _native.asgi_wake)
        _native.asgi_ready(state, loop_name, None)
        loop.run_forever()
        loop.remove_reader(wake_fd)
        if life is not None:
            loop.run_until_complete(life.shutdown())
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    finally:
        loop.close()
