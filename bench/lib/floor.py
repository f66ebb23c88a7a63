"""bench/floor: how fast the applications themselves are, with no server, in the benchmark venv's CPython.

ASGI (FastAPI): in a uvloop event loop, awaits app(scope, receive, send) in a loop with a prebuilt scope for
GET /user/0 (copied per call, as frameworks write into it), a receive that returns the empty http.request, and
a send that collects the messages. The lifespan startup runs first, as a server would run it. Each run is
followed by one of the same calls with each in an asyncio task of its own: the floor is the app alone, the
second figure what a server must add at least to run requests side by side.
WSGI (Flask): calls app(environ, start_response) in a loop with a prebuilt environ for GET /user/0 (copied per
call, with a fresh wsgi.input BytesIO), consumes the iterable and calls close().

Runs alternate between the apps; each figure is the median over the runs. A server cannot go faster than
this on one worker (one Python thread): req/s of a server divided by this floor is the share of the time
the Python application gets.

With --serve it measures on demand instead: bench/run keeps one such process and asks it for a short
measurement right before each load of Peregrine (see PairedFloor in run.py).
"""
from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as c  # noqa: E402

PATH = "/user/0"
EXPECTED_BODY = b"0"
BATCH = 500


# ---------------------------------------------------------------- ASGI

def asgi_scope() -> dict:
    return {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
        "method": "GET", "scheme": "http", "path": PATH, "raw_path": PATH.encode(), "query_string": b"",
        "root_path": "", "headers": [(b"host", b"127.0.0.1:8000"), (b"user-agent", b"bench-floor"),
                                     (b"accept", b"*/*")],
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000), "state": {},
    }


REQUEST = {"type": "http.request", "body": b"", "more_body": False}
DISCONNECT = {"type": "http.disconnect"}


async def asgi_lifespan_startup(app):
    """Runs the lifespan protocol's startup; returns a coroutine function that runs the shutdown."""
    to_app: asyncio.Queue = asyncio.Queue()
    from_app: asyncio.Queue = asyncio.Queue()
    scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}

    async def run():
        try:
            await app(scope, to_app.get, from_app.put)
        except Exception as e:  # an app without lifespan support may raise: that is allowed
            await from_app.put({"type": "lifespan.unsupported", "error": repr(e)})

    task = asyncio.ensure_future(run())
    await to_app.put({"type": "lifespan.startup"})
    msg = await asyncio.wait_for(from_app.get(), 30)
    if msg["type"] == "lifespan.startup.failed":
        raise RuntimeError(f"lifespan startup failed: {msg}")

    async def shutdown():
        if msg["type"] == "lifespan.startup.complete":
            await to_app.put({"type": "lifespan.shutdown"})
            await asyncio.wait_for(from_app.get(), 30)
        await asyncio.wait_for(task, 30)

    return shutdown, scope["state"]


async def asgi_check(app, base: dict) -> None:
    sent = []
    got_request = False

    async def receive():
        nonlocal got_request
        if got_request:
            return DISCONNECT
        got_request = True
        return REQUEST

    async def send(message):
        sent.append(message)

    await app(dict(base), receive, send)
    status = sent[0].get("status") if sent else None
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    if status != 200 or body != EXPECTED_BODY:
        raise RuntimeError(f"ASGI app answered {status} {body!r}, not 200 {EXPECTED_BODY!r}: {sent}")


# A server running requests concurrently gives each its own task, created when the request arrives and run
# by the loop's next turn; awaiting the app in the caller's task leaves that cost out. With in_tasks,
# TASK_GROUP tasks are created at a time, as one wake-up of a server's loop would start them.
TASK_GROUP = 16


async def asgi_run(app, base: dict, seconds: float, in_tasks: bool = False) -> tuple[int, float, float]:
    """Calls for `seconds`: awaited one after another (the floor), or each in a task of its own (in_tasks)."""
    loop = asyncio.get_running_loop()
    sent: list = []

    async def receive():
        return REQUEST

    async def send(message):
        sent.append(message)

    async def one():
        await app(dict(base), receive, send)

    calls = BATCH // TASK_GROUP * TASK_GROUP if in_tasks else BATCH
    n, start, cpu_start = 0, time.perf_counter(), time.thread_time()
    while True:
        if in_tasks:
            for _ in range(BATCH // TASK_GROUP):
                tasks = [loop.create_task(one()) for _ in range(TASK_GROUP)]
                await tasks[-1]  # the loop runs them in order: when the last is done, so are the others
                sent.clear()
        else:
            for _ in range(BATCH):
                await app(dict(base), receive, send)
                sent.clear()
        n += calls
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n, elapsed, time.thread_time() - cpu_start


# ---------------------------------------------------------------- WSGI

def wsgi_environ() -> dict:
    return {
        "REQUEST_METHOD": "GET", "SCRIPT_NAME": "", "PATH_INFO": PATH, "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1", "REMOTE_PORT": "50000", "HTTP_HOST": "127.0.0.1:8000",
        "HTTP_USER_AGENT": "bench-floor", "HTTP_ACCEPT": "*/*",
        "wsgi.version": (1, 0), "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr,
        "wsgi.multithread": False, "wsgi.multiprocess": False, "wsgi.run_once": False,
    }


def wsgi_call(app, base: dict) -> tuple[str, bytes]:
    status_line = []

    def start_response(status, headers, exc_info=None):
        status_line.append(status)
        return lambda data: None

    environ = dict(base)
    environ["wsgi.input"] = io.BytesIO(b"")
    result = app(environ, start_response)
    try:
        body = b"".join(result)
    finally:
        if hasattr(result, "close"):
            result.close()
    return status_line[0], body


def wsgi_run(app, base: dict, seconds: float) -> tuple[int, float, float]:
    def start_response(status, headers, exc_info=None):
        return None

    n, start, cpu_start = 0, time.perf_counter(), time.thread_time()
    BytesIO = io.BytesIO
    while True:
        for _ in range(BATCH):
            environ = dict(base)
            environ["wsgi.input"] = BytesIO(b"")
            result = app(environ, start_response)
            for _chunk in result:
                pass
            if hasattr(result, "close"):
                result.close()
        n += BATCH
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n, elapsed, time.thread_time() - cpu_start


# ---------------------------------------------------------------- preparing the apps

async def asgi_prepare(app, warmup: float):
    """Lifespan startup, one checked call, then warm-up awaited and in tasks: (shutdown, scope template)."""
    shutdown, state = await asgi_lifespan_startup(app)
    base = asgi_scope()
    base["state"] = state
    await asgi_check(app, base)
    await asgi_run(app, base, warmup)
    await asgi_run(app, base, warmup, in_tasks=True)
    return shutdown, base


def wsgi_prepare(app, warmup: float) -> dict:
    """One checked call, then warm-up: the environ template."""
    base = wsgi_environ()
    status, body = wsgi_call(app, base)
    if not status.startswith("200") or body != EXPECTED_BODY:
        raise RuntimeError(f"WSGI app answered {status} {body!r}")
    wsgi_run(app, base, warmup)
    return base


# ---------------------------------------------------------------- main

def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bench/floor",
        description="Requests per second of bench/apps/fastapi_app.py (ASGI, under uvloop) and flask_app.py "
                    "(WSGI) called directly in Python, with no server: the ceiling of a one-worker server. "
                    "Writes bench/results/floor-<timestamp>.json and .md.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--duration", type=float, default=5, help="seconds of each run")
    p.add_argument("--runs", type=int, default=5, help="runs per app; the figure is the median")
    p.add_argument("--warmup", type=float, default=1, help="seconds of discarded calls per app first")
    p.add_argument("--apps", default="fastapi,flask", help="comma-separated: fastapi, flask")
    p.add_argument("--out", type=Path, default=c.RESULTS_DIR, help="directory for the JSON and Markdown results")
    p.add_argument("--serve", action="store_true",
                   help="for bench/run: load the apps and warm them up once, then for each line '<app> <seconds>' "
                        "read from standard input measure that app once and print the figures as one JSON line; "
                        "nothing is written to --out")
    return p.parse_args(argv)


def serve(apps: list[str], warmup: float) -> int:
    """Measurements on demand, so that bench/run can take one right before each load of the server.

    The process imports and warms up the apps once, then sleeps in a blocking read of standard input between
    requests: it takes no CPU while the servers are loaded.
    """
    import uvloop

    sys.path.insert(0, str(c.APPS_DIR))

    async def loop_body():
        asgi = wsgi = None
        shutdown = None
        if "fastapi" in apps:
            import fastapi_app
            shutdown, base = await asgi_prepare(fastapi_app.app, warmup)
            asgi = (fastapi_app.app, base)
        if "flask" in apps:
            import flask_app
            wsgi = (flask_app.app, wsgi_prepare(flask_app.app, warmup))
        print(json.dumps({"ready": apps}), flush=True)
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            if words[0] == "quit":
                break
            name, seconds = words[0], float(words[1])
            if name == "fastapi" and asgi:
                n, elapsed, cpu = await asgi_run(*asgi, seconds)
                task_n, _, task_cpu = await asgi_run(*asgi, seconds, in_tasks=True)
                out = {"app": name, "rps": n / elapsed, "cpu_us_per_request": cpu / n * 1e6,
                       "task_cpu_us_per_request": task_cpu / task_n * 1e6}
            elif name == "flask" and wsgi:
                n, elapsed, cpu = wsgi_run(*wsgi, seconds)
                out = {"app": name, "rps": n / elapsed, "cpu_us_per_request": cpu / n * 1e6}
            else:
                out = {"app": name, "error": f"not loaded: {name}"}
            print(json.dumps(out), flush=True)
        if shutdown:
            await shutdown()

    uvloop.run(loop_body())
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    apps = [a.strip() for a in args.apps.split(",") if a.strip()]
    if args.serve:
        return serve(apps, args.warmup)
    sys.path.insert(0, str(c.APPS_DIR))
    import uvloop

    runners = {}
    if "fastapi" in apps:
        import fastapi_app

        async def fastapi_bench():
            shutdown, base = await asgi_prepare(fastapi_app.app, args.warmup)
            for _ in range(args.runs):  # yields between runs so that the WSGI runs interleave
                yield await asgi_run(fastapi_app.app, base, args.duration), \
                    await asgi_run(fastapi_app.app, base, args.duration, in_tasks=True)
            await shutdown()

        runners["fastapi"] = ("asgi", fastapi_bench)
    if "flask" in apps:
        import flask_app

        def flask_bench():
            base = wsgi_prepare(flask_app.app, args.warmup)
            for _ in range(args.runs):
                yield wsgi_run(flask_app.app, base, args.duration)

        runners["flask"] = ("wsgi", flask_bench)

    # The ASGI runs need the event loop; the WSGI runs are plain calls. Both are driven from inside one
    # uvloop loop so that their runs alternate (fastapi, flask, fastapi, flask, ...).
    per_app: dict[str, list[float]] = {name: [] for name in runners}
    # CPU time of the calling thread per call: on a machine shared with other work this moves much less
    # than the wall-clock rate, and it is what bench/run compares the server's Python thread with.
    cpu_us: dict[str, list[float]] = {name: [] for name in runners}
    # ASGI only: the same calls, each in a task of its own (asgi_run's in_tasks).
    task_cpu_us: dict[str, list[float]] = {name: [] for name, (kind, _) in runners.items() if kind == "asgi"}

    async def drive():
        gens = {}
        for name, (kind, fn) in runners.items():
            gens[name] = (kind, fn())
        for run in range(args.runs):
            for name, (kind, gen) in gens.items():
                if kind == "asgi":
                    (n, elapsed, cpu), (task_n, _, task_cpu) = await gen.__anext__()
                    task_cpu_us[name].append(task_cpu / task_n * 1e6)
                else:
                    n, elapsed, cpu = next(gen)
                per_app[name].append(n / elapsed)
                cpu_us[name].append(cpu / n * 1e6)
                c.log(f"run {run + 1}/{args.runs}  {name:<8} {n / elapsed:>10,.0f} req/s  "
                      f"({n} calls in {elapsed:.2f} s, {elapsed / n * 1e6:.1f} us per call, "
                      f"{cpu / n * 1e6:.1f} us of CPU"
                      + (f"; {task_cpu_us[name][-1]:.1f} us in a task per call)" if kind == "asgi" else ")"))
        for name, (kind, gen) in gens.items():  # let the generators finish (lifespan shutdown)
            try:
                if kind == "asgi":
                    await gen.__anext__()
                else:
                    next(gen)
            except (StopAsyncIteration, StopIteration):
                pass

    uvloop.run(drive())

    versions = c.package_versions()
    summary = {name: {"rps_median": c.median(v), "rps_min": min(v), "rps_max": max(v),
                      "us_per_request": 1e6 / c.median(v), "cpu_us_per_request": c.median(cpu_us[name]),
                      "cpu_us_runs": cpu_us[name], "runs": v} for name, v in per_app.items()}
    for name, v in task_cpu_us.items():
        summary[name]["task_cpu_us_per_request"] = c.median(v)
        summary[name]["task_cpu_us_runs"] = v
    labels = {"fastapi": "FastAPI (ASGI, uvloop)", "flask": "Flask (WSGI)"}
    md = [f"### Application floor: the apps called directly, no server ({time.strftime('%Y-%m-%d %H:%M:%S %z')})", "",
          f"CPython {platform.python_version()}, FastAPI {versions.get('fastapi')}, Flask {versions.get('flask')}, "
          f"uvloop {versions.get('uvloop')}; {c.cpu_model()}, {os.cpu_count()} CPUs. GET {PATH}, "
          f"median of {args.runs} runs of {args.duration:g} s.", "",
          "| App | Req/s (median) | Min | Max | µs per request | CPU µs per request | CPU µs in a task per request |",
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, s in summary.items():
        in_task = s.get("task_cpu_us_per_request")
        md.append(f"| {labels[name]} | {s['rps_median']:,.0f} | {s['rps_min']:,.0f} | {s['rps_max']:,.0f} | "
                  f"{s['us_per_request']:.1f} | {s['cpu_us_per_request']:.1f} | "
                  f"{'n/a' if in_task is None else f'{in_task:.1f}'} |")
    if task_cpu_us:
        md += ["", "The last column is the same calls with each in an asyncio task of its own, "
                   f"{TASK_GROUP} created at a time: what a server that runs requests concurrently adds at least."]
    md_text = "\n".join(md) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = c.timestamp()
    c.write_results(args.out, f"floor-{stamp}", {"settings": {"duration": args.duration, "runs": args.runs,
                                                              "warmup": args.warmup, "path": PATH},
                                                 "versions": versions, "cpu_model": c.cpu_model(),
                                                 "nproc": os.cpu_count(), "summary": summary}, md_text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
