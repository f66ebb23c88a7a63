"""bench/workloads/run: the TechEmpower test types (bench/workloads) on Peregrine and on uvicorn / gunicorn, with a
real PostgreSQL.

One PostgreSQL (bench/lib/postgres.py: Debian's binaries, a temporary directory, durability off) for the whole run.
Then, per worker count and per application, a phase with only that application's servers running, each on its
own port and from bench/workloads:

- fastapi (asyncpg):        peregrine, uvicorn (httptools, uvloop);
- flask (psycopg 3), django (its ORM): peregrine (one WSGI thread, its default), gunicorn sync, gunicorn gthread
                            --threads 4,
                            uvicorn --interface wsgi (its adapter runs 10 threads).

Every server is first asked each test type once and its answer checked (status, Content-Type, shape); a server
that answers one wrongly is not loaded on it. A server with a JIT (Peregrine's JVMs) is loaded until its compiler
threads go quiet (settle()). Each (server, test) is then warmed up (discarded), and the rounds
follow: per test and connection count the servers take turns (A B C D A B C D ...), so that drift on the machine
hits them alike. wrk -t1, medians over the rounds of req/s and p99, errors (socket errors and statuses >= 400),
CPU of the server's process tree and of PostgreSQL's per request, peak RSS of the server's tree; the ratios of
Peregrine's req/s to each peer's. Test types: json, plaintext, db, queries (20), fortunes, updates (20); Django only
db and fortunes. Plaintext is not pipelined here (the benchmark's own runs pipeline it 16 deep).

In the one-worker phases the application alone (bench/lib/workload_floor.py, no server) is measured against the
same PostgreSQL for 2 s right before each round of a test type: its own CPU per request, the least any server's
application thread can spend. The results set its median beside Peregrine's application thread and each server's
whole process.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as c  # noqa: E402
from postgres import Postgres  # noqa: E402

WORKLOADS_DIR = c.BENCH_DIR / "workloads"
TESTS = {"json": "/json", "plaintext": "/plaintext", "db": "/db", "queries": "/queries?queries=20",
         "fortunes": "/fortunes", "updates": "/updates?queries=20"}
APPS = {"fastapi": ("fastapi_app:app", ["peregrine", "uvicorn"], list(TESTS)),
        "flask": ("flask_app:app", ["peregrine", "gunicorn-sync", "gunicorn-gthread", "uvicorn-wsgi"], list(TESTS)),
        "django": ("django_app.wsgi:application", ["peregrine", "gunicorn-sync", "gunicorn-gthread", "uvicorn-wsgi"],
                   ["db", "fortunes"])}
UVICORN_WSGI_THREADS = 10  # uvicorn.middleware.wsgi.WSGIMiddleware's default
CONTENT_TYPES = {"json": "application/json", "plaintext": "text/plain", "db": "application/json",
                 "queries": "application/json", "fortunes": "text/html", "updates": "application/json"}


@dataclass
class Server:
    app: str
    name: str
    workers: int
    port: int = 0
    proc: c.Proc | None = None
    error: str | None = None
    bad_tests: dict = field(default_factory=dict)   # test -> what was wrong with its answer
    results: dict = field(default_factory=dict)     # (test, conns) -> [per-round measurements]
    settled: dict | None = None                      # how long its JIT took to settle (settle())

    @property
    def key(self) -> str:
        return f"{self.app}/{self.name}/w{self.workers}"

    def command(self, args) -> list[str]:
        target = APPS[self.app][0]
        venv_bin, p, w, t = c.VENV / "bin", str(self.port), str(self.workers), str(args.wsgi_threads)
        if self.name == "peregrine":
            cmd = [str(c.PEREGRINE), "--venv", str(c.VENV), "--port", p, "--workers", w, "--log-level", "warning"]
            return cmd + ([] if self.app == "fastapi" else ["--wsgi-threads", str(args.peregrine_wsgi_threads)]) + [target]
        if self.name in ("uvicorn", "uvicorn-wsgi"):
            return [str(venv_bin / "uvicorn"), target, "--host", c.HOST, "--port", p, "--workers", w,
                    "--http", "httptools", "--loop", "uvloop", "--no-access-log", "--log-level", "warning"] \
                + (["--interface", "wsgi"] if self.name == "uvicorn-wsgi" else [])
        if self.name == "gunicorn-sync":
            return [str(venv_bin / "gunicorn"), "-w", w, "-k", "sync", "-b", f"{c.HOST}:{p}", "--log-level", "warning",
                    target]
        if self.name == "gunicorn-gthread":
            return [str(venv_bin / "gunicorn"), "-w", w, "-k", "gthread", "--threads", t, "-b", f"{c.HOST}:{p}",
                    "--log-level", "warning", target]
        raise ValueError(self.name)

    def db_connections(self, args) -> int:
        """The most PostgreSQL connections it opens: asyncpg's pool, or one per thread running requests."""
        per_worker = {"peregrine": args.pool_size if self.app == "fastapi" else args.peregrine_wsgi_threads,
                      "uvicorn": args.pool_size, "uvicorn-wsgi": UVICORN_WSGI_THREADS, "gunicorn-sync": 1,
                      "gunicorn-gthread": args.wsgi_threads}[self.name]
        return per_worker * self.workers


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/workloads/run", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a smoke run: 1 round of 2 s, 1 s of warm-up per server and test")
    p.add_argument("--rounds", type=int, default=3, help="rounds; the figures are the medians")
    p.add_argument("--duration", type=float, default=5, help="measured seconds of each load")
    p.add_argument("--warmup", type=float, default=3, help="seconds of discarded load per server and test")
    # A JVM's JIT compiles the request path during the first 10 to 20 s of load (FastAPI /db on this machine: 1.2 s
    # of compiler threads' CPU in the first 5 s, 0.5 s and 0.3 s in the next two, then about 1 % of a core), and
    # with --workers 2 each worker compiles it again. A server runs for hours: the figures are its steady state.
    p.add_argument("--settle", type=float, default=30,
                   help="at most this many seconds of discarded load per server before the warm-ups, in loads of 2 s "
                        "until the JIT compiler threads of each of its JVMs use under 2.5 %% of a core; 0 skips it")
    p.add_argument("--conns", default="64,256", help="comma-separated wrk connection counts")
    p.add_argument("--workers", default="1", help="comma-separated worker processes per server, each a phase of its own")
    p.add_argument("--apps", default=",".join(APPS), help="comma-separated applications among " + ", ".join(APPS))
    p.add_argument("--tests", default=",".join(TESTS), help="comma-separated test types among " + ", ".join(TESTS))
    # Peregrine runs its default of one WSGI thread: side by side on this machine (Flask, db and fortunes at 64
    # connections against PostgreSQL on loopback) one thread served 2.0x and 1.7x gunicorn sync, two 1.6x and 1.3x,
    # four 1.5x and 1.2x. A round trip to PostgreSQL here is shorter than a request's Python work, and each extra
    # thread adds hand-overs of the GIL at every query (the threads' CPU per request went from 165 to 280 µs).
    p.add_argument("--peregrine-wsgi-threads", type=int, default=1, help="Peregrine's --wsgi-threads (WSGI apps)")
    # 4: gunicorn's gthread worker is there as the threaded choice a user would make; more threads only contend
    # for the GIL (a trial with 8 gave it half the fortunes rate of its sync worker).
    p.add_argument("--wsgi-threads", type=int, default=4, help="gunicorn gthread's --threads (WSGI apps)")
    p.add_argument("--pool-size", type=int, default=16, help="asyncpg pool of the FastAPI app, per worker process")
    p.add_argument("--timeout", type=float, default=5, help="wrk's per-request timeout in seconds")
    p.add_argument("--pause", type=float, default=0.5, help="seconds of rest between two loads")
    p.add_argument("--floor-duration", type=float, default=2,
                   help="seconds of the application alone before each round of a test type (one worker only); "
                        "0 skips it")
    p.add_argument("--out", type=Path, default=c.RESULTS_DIR, help="directory for the JSON and Markdown results")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.duration, args.warmup, args.settle = 1, 2, 1, 0
        args.floor_duration = min(args.floor_duration, 1)
    args.conns = [int(x) for x in args.conns.split(",") if x.strip()]
    args.workers = [int(x) for x in args.workers.split(",") if x.strip()]
    args.apps = [a.strip() for a in args.apps.split(",") if a.strip()]
    args.tests = [t.strip() for t in args.tests.split(",") if t.strip()]
    for a in args.apps:
        if a not in APPS:
            p.error(f"unknown application {a!r}")
    for t in args.tests:
        if t not in TESTS:
            p.error(f"unknown test type {t!r}")
    return args


def tests_of(app: str, args) -> list[str]:
    return [t for t in APPS[app][2] if t in args.tests]


# ---------------------------------------------------------------- checking an answer


def check(port: int, test: str) -> str | None:
    """What is wrong with the server's answer to the test type, or None (a quick form of the benchmark's rules;
    src/test/python/e2e/test_workloads.py checks them in full against Peregrine)."""
    conn = http.client.HTTPConnection(c.HOST, port, timeout=10)
    try:
        conn.request("GET", TESTS[test])
        resp = conn.getresponse()
        body = resp.read()
        ctype = resp.getheader("Content-Type") or ""
    except (OSError, http.client.HTTPException) as e:
        return f"no answer: {e}"
    finally:
        conn.close()
    if resp.status != 200:
        return f"status {resp.status}: {body[:200]!r}"
    if ctype.split(";")[0].strip() != CONTENT_TYPES[test]:
        return f"Content-Type {ctype!r}"
    if test == "plaintext":
        return None if body == b"Hello, World!" else f"body {body[:100]!r}"
    if test == "fortunes":
        text = body.decode("utf-8", "replace")
        if text.count("<tr>") != 14 or "<script" in text or "フレームワークのベンチマーク" not in text:
            return f"not the fortunes table: {text[:300]!r}"
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return f"not JSON: {body[:200]!r}"
    if test == "json":
        return None if value == {"message": "Hello, World!"} else f"body {value!r}"
    rows = [value] if test == "db" else value
    if not isinstance(rows, list) or len(rows) != (1 if test == "db" else 20):
        return f"not {1 if test == 'db' else 20} rows: {body[:200]!r}"
    for row in rows:
        if not (isinstance(row, dict) and set(row) == {"id", "randomNumber"} and all(type(v) is int for v in row.values())):
            return f"row {row!r}"
    return None


# ---------------------------------------------------------------- the run


def start(servers: list[Server], args, env: dict, log_dir: Path) -> None:
    for s in servers:
        s.port = c.free_port()
        cmd = s.command(args)
        c.log(f"bench: starting {s.key} on port {s.port}: {' '.join(cmd)}")
        try:
            s.proc = c.Proc(s.key, cmd, cwd=WORKLOADS_DIR, env=env, log_path=log_dir / f"{s.key.replace('/', '-')}.log")
            seconds = c.wait_ready(s.proc, s.port, timeout=90)
            c.log(f"bench: {s.key} ready in {seconds:.1f} s")
        except Exception as e:  # report it and go on with the others
            s.error = f"failed to start: {e}"
            c.log(f"bench: {s.key} {s.error}")
            if s.proc:
                s.proc.stop()
            continue
        for test in tests_of(s.app, args):
            problem = check(s.port, test)
            if problem:
                s.bad_tests[test] = problem
                c.log(f"bench: {s.key} answers {TESTS[test]} wrongly, not loaded on it: {problem}")


def measure(s: Server, test: str, conns: int, duration: float, args, pg: Postgres) -> dict:
    pg_before = c.tree_cpu_seconds(pg.proc.pid)
    m = c.measure_wrk(s.proc.pid, f"http://{c.HOST}:{s.port}{TESTS[test]}", conns, duration, args.timeout)
    pg_cpu = c.tree_cpu_seconds(pg.proc.pid) - pg_before
    m["pg_cpu_s"] = pg_cpu
    m["pg_cpu_s_per_1k"] = pg_cpu / m["requests"] * 1000 if m["requests"] else None
    m["loadavg_1min"] = os.getloadavg()[0]
    return m


SETTLE_LOAD_S = 2
SETTLED_CORE_SHARE = 0.025


def settle(s: Server, test: str, args) -> None:
    """Loads of SETTLE_LOAD_S on test until the compiler threads of each of the server's JVMs use under
    SETTLED_CORE_SHARE of a core, at most args.settle seconds; nothing for a server without a JIT. The time it
    took is kept with the server's results."""
    if args.settle <= 0 or c.jit_thread_seconds(s.proc.pid) is None:
        return
    url, spent, jit_total, quiet = f"http://{c.HOST}:{s.port}{TESTS[test]}", 0.0, 0.0, False
    while spent < args.settle and not quiet:
        before = c.jit_thread_seconds(s.proc.pid) or (0.0, 1)
        c.wrk_summary(url, args.conns[0], SETTLE_LOAD_S, args.timeout)
        after = c.jit_thread_seconds(s.proc.pid) or (0.0, 1)
        jit = after[0] - before[0]
        spent, jit_total = spent + SETTLE_LOAD_S, jit_total + jit
        quiet = jit < SETTLED_CORE_SHARE * SETTLE_LOAD_S * after[1]
    s.settled = {"seconds": spent, "jit_cpu_s": round(jit_total, 2), "quiet": quiet}
    c.log(f"bench: {s.key}: {spent:g} s of load on {test} to settle its JIT ({jit_total:.2f} s of compiler CPU"
          f"{'' if quiet else ', still compiling at the limit'})")


def run_phase(servers: list[Server], args, pg: Postgres, floor: PairedFloor | None = None) -> None:
    live = lambda s, test: not s.error and test not in s.bad_tests  # noqa: E731
    app = servers[0].app
    for s in servers:
        first = next((t for t in tests_of(app, args) if live(s, t)), None)
        if first:
            try:
                settle(s, first, args)
            except Exception as e:
                c.log(f"bench: settling {s.key} failed: {e}")
    for test in tests_of(app, args):
        for s in servers:
            if live(s, test):
                c.log(f"bench: warming up {s.key} on {test}: {args.warmup:g} s at {args.conns[0]} connections (discarded)")
                try:
                    c.wrk_summary(f"http://{c.HOST}:{s.port}{TESTS[test]}", args.conns[0], args.warmup, args.timeout)
                except Exception as e:
                    s.bad_tests[test] = f"warm-up failed: {e}"
    for rnd in range(1, args.rounds + 1):
        for test in tests_of(app, args):
            if floor:
                floor.measure(test, args.floor_duration)
            for conns in args.conns:
                for s in servers:
                    if not live(s, test):
                        continue
                    if not s.proc.alive():
                        s.error = f"exited with status {s.proc.popen.returncode} in round {rnd}:\n{s.proc.log_tail()}"
                        c.log(f"bench: {s.key} {s.error}")
                        continue
                    time.sleep(args.pause)
                    try:
                        m = measure(s, test, conns, args.duration, args, pg)
                    except Exception as e:
                        c.log(f"bench: round {rnd}, {s.key} {test} at {conns} connections failed: {e}")
                        m = {"failed": str(e)}
                    m["round"] = rnd
                    s.results.setdefault((test, conns), []).append(m)
                    if "failed" not in m:
                        c.log(f"round {rnd}/{args.rounds}  {test:<9} c={conns:<4} {s.key:<28} {m['rps']:>8.0f} req/s  "
                              f"p99 {m['p99_ms']:8.2f} ms  errors {m['error_total']:<5} CPU {c.fmt(m['cpu_s_per_1k'], 3)} "
                              f"ms/req, PostgreSQL {c.fmt(m['pg_cpu_s_per_1k'], 3)} ms/req  peak RSS {m['peak_rss_mib']:.0f} MiB")


class PairedFloor:
    """The application alone (workload_floor.py --serve), against the same PostgreSQL, asked for one short run
    right before each round of a test type's loads: a core's speed drifts within minutes on these machines, so
    a floor taken once before the servers start can be far from the one that held during a load."""

    def __init__(self, app: str, args, env: dict, log_path: Path):
        tests = ",".join(f"{t}={TESTS[t]}" for t in tests_of(app, args))
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [str(c.VENV / "bin" / "python"), str(Path(__file__).resolve().parent / "workload_floor.py"),
             "asgi" if app == "fastapi" else "wsgi", APPS[app][0], "--tests", tests,
             "--concurrency", str(args.conns[0]), "--duration", str(args.floor_duration), "--serve"],
            cwd=WORKLOADS_DIR, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.rounds: dict[str, list[dict]] = {}
        if not self.proc.stdout.readline().startswith('{"ready"'):
            self.close()
            raise RuntimeError(f"the application alone did not start; see {log_path}")

    def measure(self, test: str, seconds: float) -> None:
        try:
            self.proc.stdin.write(f"{test} {seconds:g}\n")
            self.proc.stdin.flush()
            figure = json.loads(self.proc.stdout.readline())
        except (OSError, ValueError) as e:
            c.log(f"bench: the application alone failed: {e}")
            return
        if "error" in figure:
            c.log(f"bench: the application alone failed on {test}: {figure['error']}")
            return
        self.rounds.setdefault(test, []).append(figure)
        c.log(f"floor  {test:<9} the application alone: {figure['rps']:>8.0f} calls/s, "
              f"{figure['cpu_us_per_req']:.0f} µs of CPU per call")

    def summary(self) -> dict:
        return {test: {"rps": c.median([f["rps"] for f in runs]),
                       "cpu_us_per_req": c.median([f["cpu_us_per_req"] for f in runs]),
                       "cpu_us_runs": [round(f["cpu_us_per_req"], 1) for f in runs]}
                for test, runs in self.rounds.items()}

    def close(self) -> None:
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            self.proc.kill()
        self.log.close()


def summarize(servers: list[Server]) -> dict:
    out = {}
    for s in servers:
        for (test, conns), rounds in s.results.items():
            ok = [m for m in rounds if "failed" not in m]
            if ok:
                out.setdefault(s.key, {})[f"{test}@{conns}"] = c.summarize_rounds(
                    ok, ("pg_cpu_s_per_1k", "py_cpu_us_per_req"))
    return out


def ratios(servers: list[Server], summary: dict, args) -> list[dict]:
    out = []
    for workers in args.workers:
        for app in args.apps:
            cand = summary.get(f"{app}/peregrine/w{workers}", {})
            for peer in APPS[app][1][1:]:
                base = summary.get(f"{app}/{peer}/w{workers}", {})
                for test in tests_of(app, args):
                    for conns in args.conns:
                        a, b = cand.get(f"{test}@{conns}"), base.get(f"{test}@{conns}")
                        if not a or not b:
                            continue
                        out.append({"app": app, "workers": workers, "test": test, "conns": conns, "peer": peer,
                                    "rps_ratio": a["rps"] / b["rps"] if b["rps"] else None,
                                    "p99_ratio": a["p99_ms"] / b["p99_ms"] if b["p99_ms"] else None,
                                    "cpu_per_req_ratio": (a["cpu_s_per_1k"] / b["cpu_s_per_1k"]
                                                          if a["cpu_s_per_1k"] and b["cpu_s_per_1k"] else None)})
    return out


def floor_markdown(app: str, workers: int, group: list[Server], summary: dict, floors: dict, args) -> list[str]:
    """CPU per request beside the application's own: where a server's time goes, and the most it can lead by."""
    conns = args.conns[0]
    rows = []
    for test in tests_of(app, args):
        floor = floors.get(test)
        if not floor:
            continue
        pere = summary.get(f"{app}/peregrine/w{workers}", {}).get(f"{test}@{conns}", {})
        cells = [test, f"{floor['cpu_us_per_req']:.0f}", c.fmt(pere.get("py_cpu_us_per_req"), 0)]
        for s in group:
            r = summary.get(s.key, {}).get(f"{test}@{conns}")
            cells.append("" if not r or not r["cpu_s_per_1k"] else
                         f"{r['cpu_s_per_1k'] * 1000:.0f} ({r['cpu_s_per_1k'] * 1000 / floor['cpu_us_per_req']:.2f}x)")
        rows.append("| " + " | ".join(cells) + " |")
    if not rows:
        return []
    return [f"CPU per request at {conns} connections, in µs: the application alone (no server, "
            f"{'as many requests at once' if app == 'fastapi' else 'one call after another'}, {args.floor_duration:g} s "
            "right before each round; the median), Peregrine's "
            "application thread, and each server's whole process (in brackets, over the application alone). With one "
            "worker a server serves at most one request per its application thread's CPU per request, and a "
            "single-threaded peer one per its process's: the bracket of a peer is the most Peregrine can lead it by, "
            "and only while the machine has cores to spare for PostgreSQL, wrk and Peregrine's I/O threads.", "",
            "| Test | App alone | Peregrine app thread | " + " | ".join(f"{s.name} process" for s in group) + " |",
            "| --- | ---: | ---: | " + " | ".join("---:" for _ in group) + " |", *rows, ""]


def settled_text(servers) -> str:
    done = [s for s in servers if s.settled]
    return ", ".join(f"{s.key} {s.settled['seconds']:g} s ({s.settled['jit_cpu_s']:g} s of compiler CPU"
                     f"{'' if s.settled['quiet'] else ', not yet quiet'})" for s in done) or "none needed it"


def markdown(servers, summary, ratio_rows, machine, args, complete, floors=None) -> str:
    workers_text = " and ".join(f"{w} worker{'s' if w > 1 else ''}" for w in args.workers)
    lines = [f"### TechEmpower test types with PostgreSQL, {workers_text} each ({machine['started']})", ""]
    if not complete:
        lines += ["**Interrupted: partial results.**", ""]
    extra = machine.get("workload_packages", {})
    lines += [c.machine_markdown(machine) + " " + ", ".join(f"{k} {v}" for k, v in extra.items() if k != "python")
              + f"; {machine.get('postgres')}.", "",
              f"`wrk -t1 -c<N> -d{max(1, round(args.duration))}s --timeout {max(1, round(args.timeout))}s`, "
              f"{args.rounds} interleaved round{'s' if args.rounds > 1 else ''} after {args.warmup:g} s of warm-up per "
              "server and test" + (f", and before those, for a JVM, loads of {SETTLE_LOAD_S} s until its JIT settles "
                                  f"(at most {args.settle:g} s): {settled_text(servers)}" if args.settle > 0 else "")
              + "; medians over the rounds. Errors: socket errors plus responses >= 400 (median per load). "
              "CPU: user+system time of the server's process tree per request, and of PostgreSQL's (all its processes). "
              f"Peak RSS: the server's process tree, the largest over the rounds. WSGI: Peregrine `--wsgi-threads "
              f"{args.peregrine_wsgi_threads}`, gunicorn gthread `--threads {args.wsgi_threads}`, uvicorn's WSGI adapter "
              f"{UVICORN_WSGI_THREADS} threads; FastAPI: asyncpg pool of {args.pool_size} per worker. "
              "`queries` and `updates` ask for 20 rows; plaintext is not pipelined.", ""]
    for workers in args.workers:
        for app in args.apps:
            group = [s for s in servers if s.app == app and s.workers == workers]
            if not group:
                continue
            lines += [f"#### {app}, {workers} worker{'s' if workers > 1 else ''} each", "",
                      "| Test | Conns | Server | Req/s | p99 (ms) | Errors | CPU ms / req | PostgreSQL CPU ms / req | "
                      "Peak RSS (MiB) | Peregrine / this |",
                      "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
            for s in group:
                if s.error and not summary.get(s.key):
                    lines.append(f"| — | — | {s.name} | {s.error.splitlines()[0]} | | | | | | |")
            for test in tests_of(app, args):
                for s in group:
                    if test in s.bad_tests:
                        lines.append(f"| {test} | — | {s.name} | wrong answer: {s.bad_tests[test][:120]} | | | | | | |")
                for conns in args.conns:
                    pere = summary.get(f"{app}/peregrine/w{workers}", {}).get(f"{test}@{conns}")
                    for s in group:
                        r = summary.get(s.key, {}).get(f"{test}@{conns}")
                        if not r:
                            continue
                        ratio = "" if s.name == "peregrine" or not pere or not r["rps"] else f"{pere['rps'] / r['rps']:.2f}x"
                        lines.append(f"| {test} | {conns} | {s.name} | {r['rps']:,.0f} | {c.fmt(r['p99_ms'], 2)} | "
                                     f"{r['errors']:g} | {c.fmt(r['cpu_s_per_1k'], 3)} | {c.fmt(r['pg_cpu_s_per_1k'], 3)} | "
                                     f"{r['peak_rss_mib']:.0f} | {ratio} |")
            lines.append("")
            if floors and floors.get(app) and workers == 1:
                lines += floor_markdown(app, workers, group, summary, floors[app], args)
    if ratio_rows:
        peers = []
        for app in args.apps:
            peers += [p for p in APPS[app][1][1:] if p not in peers]
        lines += ["Peregrine's req/s over each peer's (medians):", "",
                  "| App | Workers | Test | Conns | " + " | ".join(f"vs {p}" for p in peers) + " |",
                  "| --- | ---: | --- | ---: | " + " | ".join("---:" for _ in peers) + " |"]
        keys = []
        for r in ratio_rows:
            if (r["app"], r["workers"], r["test"], r["conns"]) not in keys:
                keys.append((r["app"], r["workers"], r["test"], r["conns"]))
        for key in keys:
            by_peer = {r["peer"]: r["rps_ratio"] for r in ratio_rows if (r["app"], r["workers"], r["test"], r["conns"]) == key}
            lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | "
                         + " | ".join("" if p not in by_peer else f"{c.fmt(by_peer[p], 2)}x" for p in peers) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    args = parse_args(argv)
    c.install_cleanup()
    c.raise_nofile()
    if not shutil.which("wrk"):
        c.log("bench: wrk is not installed (Debian: apt-get install wrk)")
        return 1
    stamp = c.timestamp()
    log_dir = args.out / f"workloads-{stamp}-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    machine = c.describe_run(build=True)
    if machine is None:
        return 1
    machine["workload_packages"] = c.package_versions(("django", "jinja2", "asyncpg", "psycopg", "psycopg-binary", "orjson"))
    phases = [[Server(app, name, w) for name in APPS[app][1]] for w in args.workers for app in args.apps]
    servers = [s for phase in phases for s in phase]
    complete = False
    floors: dict = {}  # app -> test -> the application alone, medians over the rounds (PairedFloor)
    # Connections: the largest phase's servers at once, the application alone beside them, and a few for psql.
    max_connections = max(sum(s.db_connections(args) for s in phase) for phase in phases) + args.pool_size + 20
    try:
        pg = Postgres(max_connections=max(100, max_connections))
    except FileNotFoundError as e:
        c.log(f"bench: {e}")
        return 1
    machine["postgres"] = pg.version()
    try:
        c.log(f"bench: starting {machine['postgres']} (max_connections {pg.max_connections})")
        with pg:
            try:
                c.log(f"bench: PostgreSQL on {pg.dsn}, World and Fortune loaded")
                env = c.child_env(BENCH_PG_DSN=pg.dsn, BENCH_PG_POOL_SIZE=str(args.pool_size))
                for phase in phases:
                    app, floor = phase[0].app, None
                    if args.floor_duration > 0 and phase[0].workers == 1:
                        try:
                            floor = PairedFloor(app, args, env, log_dir / f"{app}-alone.log")
                        except RuntimeError as e:
                            c.log(f"bench: {e}")
                    start(phase, args, env, log_dir)
                    if "java" not in machine:
                        for s in phase:
                            if s.name == "peregrine" and s.proc and not s.error:
                                machine["java"] = c.java_version_of(s.proc.pid)
                    run_phase(phase, args, pg, floor)
                    if floor:
                        floor.close()
                        floors[app] = floor.summary()
                    for s in phase:
                        if s.proc:
                            s.proc.stop()
                machine["world_rows_updated"] = int(pg.psql(
                    "SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'world'").strip() or 0)
                complete = True
            finally:
                c.stop_all()  # the servers before PostgreSQL
    except KeyboardInterrupt:
        c.log("bench: interrupted: writing the partial results")

    summary = summarize(servers)
    ratio_rows = ratios(servers, summary, args)
    md = markdown(servers, summary, ratio_rows, machine, args, complete, floors)
    result = {"machine": machine, "complete": complete,
              "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "servers": {s.key: {"command": s.command(args), "error": s.error, "bad_tests": s.bad_tests, "settled": s.settled,
                                  "rounds": {f"{t}@{n}": v for (t, n), v in s.results.items()}} for s in servers},
              "summary": summary, "ratios": ratio_rows, "floors": floors, "loadavg_at_end": list(os.getloadavg())}
    c.write_results(args.out, f"workloads-{stamp}", result, md, f"Server logs: {log_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
