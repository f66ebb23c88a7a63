"""The workload applications alone, with no server: their own CPU per request against the real PostgreSQL.

    python workload_floor.py asgi fastapi_app:app --tests db=/db,fortunes=/fortunes --concurrency 64 --duration 3 --runs 3

Run by bench/workloads/run in the benchmark venv, with BENCH_PG_DSN set. It prints one JSON line per test
type: the calls per second and, what matters, the CPU time of the calling thread per call (the median over
the runs). With --serve it measures on demand instead: bench/workloads/run asks it for one short run right
before each round of a test type's loads, because on these virtual machines the speed of a core changes by a
third within minutes, and a floor taken once before the servers start can be far from the one that held
during a given load.

- ASGI (FastAPI): the lifespan runs first (it opens the asyncpg pool), then `concurrency` asyncio tasks on a
  uvloop loop each await app(scope, receive, send) one call after another, as that many connections of wrk keep
  that many requests in the loop at once. The thread also runs asyncpg's protocol and the loop's own work: what
  a server's Python thread must do at least for these requests.
- WSGI (Flask, Django): app(environ, start_response) called in one thread, one call after another, its
  iterable consumed and closed. A thread blocked on PostgreSQL uses no CPU, so the figure is the same for any
  number of threads sharing one GIL.

A server's application thread cannot use less CPU per request than this; the CPU a peer's whole process uses per
request, divided by this figure, is how far ahead of that peer a server can get with one worker at most.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import io
import json
import statistics
import sys
import time
from pathlib import Path

WORKLOADS_DIR = Path(__file__).resolve().parent.parent / "workloads"


def split(url: str) -> tuple[str, str]:
    path, _, query = url.partition("?")
    return path, query


def load(target: str):
    module, _, attr = target.partition(":")
    sys.path.insert(0, str(WORKLOADS_DIR))
    return getattr(importlib.import_module(module), attr)


# ---------------------------------------------------------------- ASGI

class AsgiFloor:
    """The app awaited in `concurrency` tasks at once on the running loop, after its lifespan startup."""

    def __init__(self, app, concurrency: int):
        self.app, self.concurrency = app, concurrency
        self.state: dict = {}
        self.to_app: asyncio.Queue = asyncio.Queue()
        self.from_app: asyncio.Queue = asyncio.Queue()
        self.lifespan = None

    async def start(self) -> None:
        self.lifespan = asyncio.ensure_future(self.app({"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"},
                                                        "state": self.state}, self.to_app.get, self.from_app.put))
        await self.to_app.put({"type": "lifespan.startup"})
        started = await asyncio.wait_for(self.from_app.get(), 60)
        if started["type"] != "lifespan.startup.complete":
            raise RuntimeError(f"lifespan startup: {started}")

    async def stop(self) -> None:
        await self.to_app.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(self.from_app.get(), 60)
        await self.lifespan

    async def measure(self, url: str, seconds: float) -> tuple[float, float]:
        """(calls per second, CPU µs of this thread per call)."""
        path, query = split(url)
        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
                 "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
                 "query_string": query.encode(), "root_path": "", "headers": [(b"host", b"127.0.0.1")],
                 "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000), "state": self.state}
        request = {"type": "http.request", "body": b"", "more_body": False}
        app, counter, bad = self.app, [0], []

        async def receive():
            return request

        async def send(message):
            if message["type"] == "http.response.start" and message["status"] != 200:
                bad.append(message["status"])

        async def calls(stop_at: float):
            while time.perf_counter() < stop_at:
                await app(dict(scope), receive, send)
                counter[0] += 1

        start, cpu = time.perf_counter(), time.thread_time()
        await asyncio.gather(*(calls(start + seconds) for _ in range(self.concurrency)))
        elapsed, used = time.perf_counter() - start, time.thread_time() - cpu
        if bad:
            raise RuntimeError(f"{url}: the app answered {bad[0]}")
        return counter[0] / elapsed, used / counter[0] * 1e6


# ---------------------------------------------------------------- WSGI

class WsgiFloor:
    """The app called one request after another in this thread."""

    def __init__(self, app):
        self.app = app

    def measure(self, url: str, seconds: float) -> tuple[float, float]:
        path, query = split(url)
        base = {"REQUEST_METHOD": "GET", "SCRIPT_NAME": "", "PATH_INFO": path, "QUERY_STRING": query,
                "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1",
                "REMOTE_ADDR": "127.0.0.1", "REMOTE_PORT": "50000", "HTTP_HOST": "127.0.0.1",
                "wsgi.version": (1, 0), "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr,
                "wsgi.multithread": True, "wsgi.multiprocess": False, "wsgi.run_once": False}
        bad: list[str] = []

        def start_response(status, headers, exc_info=None):
            if not status.startswith("200"):
                bad.append(status)

        app, n, start, cpu = self.app, 0, time.perf_counter(), time.thread_time()
        stop_at = start + seconds
        while time.perf_counter() < stop_at:
            environ = dict(base)
            environ["wsgi.input"] = io.BytesIO(b"")
            result = app(environ, start_response)
            for _chunk in result:
                pass
            if hasattr(result, "close"):
                result.close()
            n += 1
        elapsed, used = time.perf_counter() - start, time.thread_time() - cpu
        if bad:
            raise RuntimeError(f"{url}: the app answered {bad[0]}")
        return n / elapsed, used / n * 1e6


# ---------------------------------------------------------------- main

def figure(test: str, runs: list[tuple[float, float]]) -> str:
    return json.dumps({"test": test, "rps": statistics.median(r for r, _ in runs),
                       "cpu_us_per_req": statistics.median(u for _, u in runs),
                       "cpu_us_runs": [round(u, 1) for _, u in runs]})


async def drive(args, tests: dict[str, str]) -> None:
    """Batch mode: each test warmed up, then measured --runs times; serve mode: measured on demand."""
    app = load(args.target)
    asgi = args.kind == "asgi"
    floor = AsgiFloor(app, args.concurrency) if asgi else WsgiFloor(app)
    if asgi:
        await floor.start()

    async def measure(url: str, seconds: float):
        return await floor.measure(url, seconds) if asgi else floor.measure(url, seconds)

    for url in tests.values():  # warm-up: statement caches, the pool's connections, the templates
        await measure(url, min(1.0, args.duration))
    if args.serve:
        # Between requests this blocks on standard input: the loop and the pool sit idle, taking no CPU
        # while the servers are loaded.
        print(json.dumps({"ready": list(tests)}), flush=True)
        for line in sys.stdin:
            words = line.split()
            if not words or words[0] == "quit":
                break
            try:
                print(figure(words[0], [await measure(tests[words[0]], float(words[1]))]), flush=True)
            except Exception as e:  # reported to the caller, which goes on without this figure
                print(json.dumps({"test": words[0], "error": str(e)}), flush=True)
    else:
        for test, url in tests.items():
            print(figure(test, [await measure(url, args.duration) for _ in range(args.runs)]), flush=True)
    if asgi:
        await floor.stop()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kind", choices=("asgi", "wsgi"))
    p.add_argument("target", help="module:attribute in bench/workloads")
    p.add_argument("--tests", required=True, help="comma-separated name=url pairs")
    p.add_argument("--concurrency", type=int, default=64, help="ASGI: requests in the loop at once")
    p.add_argument("--duration", type=float, default=3)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--serve", action="store_true",
                   help="after the warm-up, measure on demand: for each line 'TEST SECONDS' on standard input "
                        "print one JSON line; 'quit' ends")
    args = p.parse_args(argv)
    tests = dict(pair.split("=", 1) for pair in args.tests.split(","))
    import uvloop
    uvloop.run(drive(args, tests))
    return 0


if __name__ == "__main__":
    sys.exit(main())
