"""The workload applications alone, with no server: their own CPU per request against the real PostgreSQL.

    python workload_floor.py APP TARGET --tests db,fortunes --concurrency 64 --duration 3 --runs 3

Run by bench/workloads/run in the benchmark venv, with BENCH_PG_DSN set and no server running. It prints one
JSON line per test type: the calls per second and, what matters, the CPU time of the calling thread per call
(the median over the runs), a figure that wall-clock noise on a shared machine moves much less than req/s.

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

async def asgi_floor(app, tests: dict[str, str], concurrency: int, duration: float, runs: int) -> dict:
    to_app: asyncio.Queue = asyncio.Queue()
    from_app: asyncio.Queue = asyncio.Queue()
    state: dict = {}
    lifespan = asyncio.ensure_future(app({"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"},
                                          "state": state}, to_app.get, from_app.put))
    await to_app.put({"type": "lifespan.startup"})
    started = await asyncio.wait_for(from_app.get(), 60)
    if started["type"] != "lifespan.startup.complete":
        raise RuntimeError(f"lifespan startup: {started}")
    request = {"type": "http.request", "body": b"", "more_body": False}

    async def receive():
        return request

    out = {}
    for test, url in tests.items():
        path, query = split(url)
        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
                 "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
                 "query_string": query.encode(), "root_path": "", "headers": [(b"host", b"127.0.0.1")],
                 "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000), "state": state}
        statuses: list[int] = []

        async def send(message):
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        async def calls(stop_at: float, counter: list[int]):
            while time.perf_counter() < stop_at:
                await app(dict(scope), receive, send)
                counter[0] += 1

        async def one_run(seconds: float) -> tuple[float, float]:
            counter = [0]
            start, cpu = time.perf_counter(), time.thread_time()
            await asyncio.gather(*(calls(start + seconds, counter) for _ in range(concurrency)))
            elapsed, used = time.perf_counter() - start, time.thread_time() - cpu
            return counter[0] / elapsed, used / counter[0] * 1e6

        await one_run(min(1.0, duration))  # warm-up: statement caches, the pool's connections
        figures = [await one_run(duration) for _ in range(runs)]
        bad = [s for s in statuses if s != 200]
        if bad:
            raise RuntimeError(f"{test}: the app answered {bad[0]}")
        out[test] = figures
    await to_app.put({"type": "lifespan.shutdown"})
    await asyncio.wait_for(from_app.get(), 60)
    await lifespan
    return out


# ---------------------------------------------------------------- WSGI

def wsgi_floor(app, tests: dict[str, str], duration: float, runs: int) -> dict:
    out = {}
    for test, url in tests.items():
        path, query = split(url)
        base = {"REQUEST_METHOD": "GET", "SCRIPT_NAME": "", "PATH_INFO": path, "QUERY_STRING": query,
                "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1",
                "REMOTE_ADDR": "127.0.0.1", "REMOTE_PORT": "50000", "HTTP_HOST": "127.0.0.1",
                "wsgi.version": (1, 0), "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr,
                "wsgi.multithread": True, "wsgi.multiprocess": False, "wsgi.run_once": False}
        statuses: list[str] = []

        def start_response(status, headers, exc_info=None):
            statuses.append(status)

        def one_run(seconds: float) -> tuple[float, float]:
            n, start, cpu = 0, time.perf_counter(), time.thread_time()
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
            return n / elapsed, used / n * 1e6

        one_run(min(1.0, duration))
        figures = [one_run(duration) for _ in range(runs)]
        bad = [s for s in statuses if not s.startswith("200")]
        if bad:
            raise RuntimeError(f"{test}: the app answered {bad[0]}")
        out[test] = figures
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kind", choices=("asgi", "wsgi"))
    p.add_argument("target", help="module:attribute in bench/workloads")
    p.add_argument("--tests", required=True, help="comma-separated name=url pairs")
    p.add_argument("--concurrency", type=int, default=64, help="ASGI: requests in the loop at once")
    p.add_argument("--duration", type=float, default=3)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args(argv)
    tests = dict(pair.split("=", 1) for pair in args.tests.split(","))
    app = load(args.target)
    if args.kind == "asgi":
        import uvloop
        figures = uvloop.run(asgi_floor(app, tests, args.concurrency, args.duration, args.runs))
    else:
        figures = wsgi_floor(app, tests, args.duration, args.runs)
    for test, runs in figures.items():
        print(json.dumps({"test": test, "rps": statistics.median(r for r, _ in runs),
                          "cpu_us_per_req": statistics.median(u for _, u in runs),
                          "cpu_us_runs": [round(u, 1) for _, u in runs]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
