"""bench/run: Peregrine against uvicorn (FastAPI) and against uvicorn-wsgi and gunicorn (Flask), one worker each.

Every server runs at once on its own port. Each is warmed up (load discarded), then loaded with wrk, one wrk
thread, on GET /user/0 at each connection count, the servers interleaved round by round (A B C A B C ...) so
that drift on the machine hits all of them alike. The figures are medians over the rounds. See bench/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as c  # noqa: E402


@dataclass
class Server:
    app: str           # "fastapi" or "flask"
    name: str          # "peregrine", "uvicorn", "uvicorn-wsgi", "gunicorn"
    port: int = 0
    proc: c.Proc | None = None
    error: str | None = None
    startup_s: float | None = None
    results: dict = field(default_factory=dict)  # conns -> list of per-round measurements

    @property
    def key(self) -> str:
        return f"{self.app}/{self.name}"

    def command(self) -> list[str]:
        module = {"fastapi": "fastapi_app:app", "flask": "flask_app:app"}[self.app]
        venv_bin = c.VENV / "bin"
        p = str(self.port)
        if self.name == "peregrine":
            return [str(c.PEREGRINE), "--venv", str(c.VENV), "--port", p, "--log-level", "warning", module]
        if self.name == "uvicorn":
            return [str(venv_bin / "uvicorn"), module, "--host", c.HOST, "--port", p, "--workers", "1",
                    "--http", "httptools", "--loop", "uvloop", "--no-access-log", "--log-level", "warning"]
        if self.name == "uvicorn-wsgi":
            return [str(venv_bin / "uvicorn"), module, "--interface", "wsgi", "--host", c.HOST, "--port", p,
                    "--workers", "1", "--http", "httptools", "--loop", "uvloop", "--no-access-log",
                    "--log-level", "warning"]
        if self.name == "gunicorn":
            return [str(venv_bin / "gunicorn"), "-w", "1", "-k", "sync", "-b", f"{c.HOST}:{p}",
                    "--log-level", "warning", module]
        raise ValueError(self.name)


# (app, candidate, baseline, minimum throughput ratio per connection count; "*" for the others)
TARGETS = [
    ("fastapi", "peregrine", "uvicorn", {64: 2.0, 256: 2.2, "*": 2.0}),
    ("flask", "peregrine", "uvicorn-wsgi", {"*": 3.0}),
    ("flask", "peregrine", "gunicorn", {"*": 4.0}),
]
# The application thread's CPU per request may exceed the floor's by this much, and at 64 connections it
# should be busy at least this share of the time.
MAX_US_OVER_FLOOR = 8.0
MIN_BUSY_AT_64 = 0.95
ALL_SERVERS = [("fastapi", "peregrine"), ("fastapi", "uvicorn"),
               ("flask", "peregrine"), ("flask", "uvicorn-wsgi"), ("flask", "gunicorn")]


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bench/run",
        description="Throughput, latency, memory and CPU of Peregrine against uvicorn and gunicorn, one worker "
                    "each, measured side by side with wrk -t1 on GET /user/0. Prints per server and "
                    "connection count the median over the rounds, the ratios to each baseline and PASS/FAIL "
                    "per target (the exit status is 0 either way), and writes bench/results/<timestamp>.json "
                    "and .md. A full run takes about 14 minutes.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="a smoke run of about 3 minutes: 3 rounds of 2 s, 5 s of warm-up")
    p.add_argument("--rounds", type=int, default=5, help="rounds; the figures are the medians (at least 3)")
    p.add_argument("--duration", type=float, default=8, help="seconds of each wrk load")
    p.add_argument("--warmup", type=float, default=10,
                   help="seconds of discarded load per server before round 1 (the JVM's JIT needs several)")
    p.add_argument("--conns", default="64,256,512", help="comma-separated connection counts")
    p.add_argument("--path", default="/user/0", help="request path loaded")
    p.add_argument("--timeout", type=float, default=2, help="wrk's per-request timeout in seconds")
    p.add_argument("--pause", type=float, default=1, help="seconds of rest between two loads")
    p.add_argument("--servers", default=",".join(f"{a}/{n}" for a, n in ALL_SERVERS),
                   help="comma-separated servers to run, among: " + ", ".join(f"{a}/{n}" for a, n in ALL_SERVERS)
                        + "; or 'fastapi' / 'flask' for one app's group")
    p.add_argument("--floor-runs", type=int, default=3,
                   help="runs of bench/floor (of --floor-duration s) made before the servers start, in the same "
                        "session, to compare the Python thread's CPU per request with; 0: none")
    p.add_argument("--floor-duration", type=float, default=4, help="seconds of each floor run")
    p.add_argument("--paired-floor", type=float, default=2,
                   help="seconds of a floor measurement taken right before each load of Peregrine (for FastAPI "
                        "twice that: awaited and in tasks), by one bench/floor process kept waiting between "
                        "loads; the Python-thread target compares each load with its own; 0: none")
    p.add_argument("--out", type=Path, default=c.RESULTS_DIR, help="directory for the JSON and Markdown results")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.duration, args.warmup = 3, 2, 5
    if args.rounds < 1:
        p.error("--rounds must be at least 1 (3 or more for a meaningful median)")
    args.conns = [int(x) for x in args.conns.split(",") if x.strip()]
    wanted = []
    for item in args.servers.split(","):
        item = item.strip()
        matches = [(a, n) for a, n in ALL_SERVERS if item in (a, f"{a}/{n}")]
        if not matches:
            p.error(f"unknown server {item!r}")
        wanted += [m for m in matches if m not in wanted]
    args.servers = [s for s in ALL_SERVERS if s in wanted]
    return args


# ---------------------------------------------------------------- one wrk load


def url(server: Server, path: str) -> str:
    return f"http://{c.HOST}:{server.port}{path}"


def measure(server: Server, conns: int, args, paired_floor: "PairedFloor | None" = None) -> dict:
    floor = paired_floor.measure(server.app, args.paired_floor) \
        if paired_floor and server.name == "peregrine" else None
    m = c.measure_wrk(server.proc.pid, url(server, args.path), conns, args.duration, args.timeout)
    m["loadavg_1min"] = os.getloadavg()[0]  # how busy the shared machine was: read the figures with it
    if floor and m.get("py_cpu_us_per_req") is not None:
        m["floor_cpu_us"] = floor["cpu_us_per_request"]
        m["py_over_floor_us"] = m["py_cpu_us_per_req"] - floor["cpu_us_per_request"]
        if "task_cpu_us_per_request" in floor:
            m["floor_task_cpu_us"] = floor["task_cpu_us_per_request"]
            m["py_over_task_floor_us"] = m["py_cpu_us_per_req"] - floor["task_cpu_us_per_request"]
    return m


class PairedFloor:
    """One bench/floor process in --serve mode: a floor measurement on demand, right before a load.

    On this kind of machine the speed of a core changes by a third within minutes, so a floor measured before
    the servers start can be far from the one that held during a given load; a floor taken seconds before each
    load of Peregrine and subtracted load by load is not. Between measurements the process blocks on its
    standard input and takes no CPU.
    """

    def __init__(self, apps: list[str], log_path: Path):
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve().parent / "floor.py"), "--serve",
                                      "--apps", ",".join(apps), "--warmup", "2"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)
        ready = self.proc.stdout.readline()
        if not ready.startswith('{"ready"'):
            self.close()
            raise RuntimeError(f"bench/floor --serve did not start; see {log_path}")

    def measure(self, app: str, seconds: float) -> dict | None:
        try:
            self.proc.stdin.write(f"{app} {seconds:g}\n")
            self.proc.stdin.flush()
            out = json.loads(self.proc.stdout.readline())
        except (OSError, ValueError) as e:
            c.log(f"bench: the paired floor failed: {e}")
            return None
        return None if "error" in out else out

    def close(self) -> None:
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            self.proc.kill()
        self.log.close()


# ---------------------------------------------------------------- the run


def start_servers(servers: list[Server], log_dir: Path) -> None:
    env = c.child_env()
    for s in servers:
        s.port = c.free_port()
        log_path = log_dir / f"{s.app}-{s.name}.log"
        c.log(f"bench: starting {s.key} on port {s.port}: {' '.join(s.command())}")
        try:
            s.proc = c.Proc(s.key, s.command(), cwd=c.APPS_DIR, env=env, log_path=log_path)
            s.startup_s = c.wait_ready(s.proc, s.port, timeout=60)
            status, body = c.http_get(s.port, "/user/0")
            if status != 200 or body != b"0":
                raise RuntimeError(f"GET /user/0 answered {status} {body[:100]!r}, not 200 '0'")
            c.log(f"bench: {s.key} ready in {s.startup_s:.1f} s")
        except Exception as e:  # report it and go on with the other servers
            s.error = f"failed to start: {e}"
            c.log(f"bench: {s.key} {s.error}")
            if s.proc:
                s.proc.stop()


def run_loads(servers: list[Server], args, paired_floor: PairedFloor | None = None) -> bool:
    """Warm-up, then the interleaved rounds. Returns False when interrupted (partial results are kept)."""
    try:
        for s in servers:
            if s.error:
                continue
            c.log(f"bench: warming up {s.key}: {args.warmup:g} s at {args.conns[0]} connections (discarded)")
            try:
                c.wrk_summary(url(s, args.path), args.conns[0], args.warmup, args.timeout)
            except Exception as e:
                s.error = f"warm-up failed: {e}"
                c.log(f"bench: {s.key} {s.error}")
        for rnd in range(1, args.rounds + 1):
            for conns in args.conns:
                for s in servers:
                    if s.error:
                        continue
                    if not s.proc.alive():
                        s.error = f"exited with status {s.proc.popen.returncode} during round {rnd}:\n" \
                                  + s.proc.log_tail()
                        c.log(f"bench: {s.key} {s.error}")
                        continue
                    time.sleep(args.pause)
                    try:
                        m = measure(s, conns, args, paired_floor)
                    except Exception as e:
                        c.log(f"bench: round {rnd}, {s.key} at {conns} connections failed: {e}")
                        m = {"failed": str(e)}
                    m["round"] = rnd
                    s.results.setdefault(conns, []).append(m)
                    if "failed" not in m:
                        c.log(f"round {rnd}/{args.rounds}  c={conns:<4} {s.key:<20} {m['rps']:>9.0f} req/s  "
                              f"p50 {m['p50_ms']:7.2f} ms  p99 {m['p99_ms']:7.2f} ms  errors {m['error_total']:<5} "
                              f"peak RSS {m['peak_rss_mib']:6.1f} MiB  CPU {fmt(m['cpu_s_per_1k'], 3)} s/1k"
                              + (f"  python thread {m['py_busy'] * 100:.0f} % busy"
                                 + (f" ({m['py_waiting_for_core'] * 100:.1f} % waiting for a core)"
                                    if m.get("py_waiting_for_core") is not None else "")
                                 + f", {m['py_cpu_us_per_req']:.1f} us/req"
                                 if m.get("py_busy") is not None else "")
                              + (f", floor right before {m['floor_cpu_us']:.1f} us ({m['py_over_floor_us']:+.1f})"
                                 if m.get("floor_cpu_us") is not None else ""))
        return True
    except KeyboardInterrupt:
        c.log("bench: interrupted: stopping the servers and writing the partial results")
        return False


def fmt(v, digits=1):
    return "n/a" if v is None else f"{v:.{digits}f}"


# Per load of Peregrine; summarized as medians over the rounds (the differences are taken load by load first).
PYTHON_THREAD_FIGURES = ("py_busy", "py_waiting_for_core", "py_cpu_us_per_req", "floor_cpu_us", "floor_task_cpu_us",
                         "py_over_floor_us", "py_over_task_floor_us")


def summarize(servers: list[Server], args) -> dict:
    summary = {}
    for s in servers:
        per_conn = {}
        for conns in args.conns:
            ok = [m for m in s.results.get(conns, []) if "failed" not in m]
            if not ok:
                continue
            per_conn[conns] = c.summarize_rounds(ok, extra=PYTHON_THREAD_FIGURES if s.name == "peregrine" else ())
        summary[s.key] = per_conn
    return summary


def compare(summary: dict, servers: dict, args) -> tuple[list, list]:
    """Ratios of the medians against each baseline, and the targets (evaluated on the ratios of the medians)."""
    ratios, targets = [], []
    for app, cand, base, minimums in TARGETS:
        a, b = summary.get(f"{app}/{cand}", {}), summary.get(f"{app}/{base}", {})
        if f"{app}/{cand}" not in servers or f"{app}/{base}" not in servers:
            continue  # not selected with --servers
        if not a or not b:
            targets.append({"what": f"{app}: {cand}/{base} req/s >= {minimums['*']}x: not measured "
                                    f"({cand if not a else base} has no results)", "value": None, "pass": False})
            continue
        for conns in args.conns:
            if conns not in a or conns not in b:
                continue
            minimum = minimums.get(conns, minimums["*"])
            ra, rb = a[conns], b[conns]
            ratio = ra["rps"] / rb["rps"] if rb["rps"] else None
            # The same ratio taken round by round (each pair measured minutes apart at most), then the median.
            rounds_a = {m["round"]: m["rps"] for m in servers[f"{app}/{cand}"].results.get(conns, []) if "rps" in m}
            rounds_b = {m["round"]: m["rps"] for m in servers[f"{app}/{base}"].results.get(conns, []) if "rps" in m}
            paired = c.median([rounds_a[r] / rounds_b[r] for r in rounds_a if rounds_b.get(r)])
            # The most any one-thread server could serve in each round: the application's own calls back to
            # back with the Python thread never idle, each in a task of its own for ASGI (as every server that
            # runs requests side by side gives them), from the floor measured right before the round's load.
            floors = {m["round"]: m.get("floor_task_cpu_us") or m.get("floor_cpu_us")
                      for m in servers[f"{app}/{cand}"].results.get(conns, []) if "rps" in m}
            ceiling = c.median([1e6 / floors[r] / rounds_b[r] for r in floors if floors[r] and rounds_b.get(r)])
            ratios.append({"app": app, "candidate": cand, "baseline": base, "conns": conns,
                           "rps_ratio": ratio, "rps_ratio_paired_median": paired, "ceiling_ratio": ceiling,
                           "p99_ratio": ra["p99_ms"] / rb["p99_ms"] if rb["p99_ms"] else None,
                           "cpu_per_req_ratio": (ra["cpu_s_per_1k"] / rb["cpu_s_per_1k"]
                                                 if ra["cpu_s_per_1k"] and rb["cpu_s_per_1k"] else None),
                           "rss_ratio": ra["peak_rss_mib"] / rb["peak_rss_mib"] if rb["peak_rss_mib"] else None})
            targets.append({"what": f"{app}: {cand}/{base} req/s at {conns} connections >= {minimum}x"
                                    + (f" (the application alone allows {ceiling:.2f}x)" if ceiling else ""),
                            "value": ratio, "pass": ratio is not None and ratio >= minimum})
        if 64 in a and 64 in b:
            targets.append({"what": f"{app}: {cand} p99 at 64 connections <= {base}'s "
                                    f"({fmt(a[64]['p99_ms'], 2)} ms vs {fmt(b[64]['p99_ms'], 2)} ms)",
                            "value": a[64]["p99_ms"] / b[64]["p99_ms"] if b[64]["p99_ms"] else None,
                            "pass": a[64]["p99_ms"] <= b[64]["p99_ms"]})
    return ratios, targets


def python_thread_targets(summary: dict, floor: dict | None) -> list:
    """The application thread against the floor: CPU per request over the floor's, and busy share at 64.

    With paired floors, the difference is taken load by load against the floor measured right before it, and
    the target reads the median of those; otherwise against the floor run before the servers started.
    """
    targets = []
    for app in ("fastapi", "flask"):
        per = summary.get(f"{app}/peregrine", {})
        floor_us = (floor or {}).get(app, {}).get("cpu_us_per_request")
        for conns, r in per.items():
            over, against = r.get("py_over_floor_us"), "the floor's right before each load, median"
            if over is None and floor_us is not None and r.get("py_cpu_us_per_req") is not None:
                over, against = r["py_cpu_us_per_req"] - floor_us, "the floor's of the session"
            if over is not None:
                targets.append({"what": f"{app}: Python-thread CPU per request minus {against}, at {conns} "
                                        f"connections <= {MAX_US_OVER_FLOOR:g} µs", "value": over, "unit": "µs",
                                "pass": over <= MAX_US_OVER_FLOOR})
            if conns == 64 and r.get("py_busy") is not None:
                targets.append({"what": f"{app}: Python thread busy at 64 connections >= {MIN_BUSY_AT_64:.0%}",
                                "value": r["py_busy"] * 100, "unit": "%", "pass": r["py_busy"] >= MIN_BUSY_AT_64})
    return targets


def run_floor(args, log_dir: Path) -> dict | None:
    """bench/floor in this session (before the servers start): app -> its summary, or None."""
    if args.floor_runs <= 0:
        return None
    apps = sorted({a for a, n in args.servers if n == "peregrine"})
    if not apps:
        return None
    c.log(f"bench: the floor first: {args.floor_runs} runs of {args.floor_duration:g} s per app")
    out = log_dir / "floor"
    try:
        subprocess.run([sys.executable, str(Path(__file__).resolve().parent / "floor.py"), "--runs", str(args.floor_runs),
                        "--duration", str(args.floor_duration), "--apps", ",".join(apps), "--out", str(out)],
                       check=True, timeout=600)
        result = json.loads(next(out.glob("floor-*.json")).read_text())
    except (subprocess.SubprocessError, OSError, StopIteration, ValueError) as e:
        c.log(f"bench: the floor failed: {e}")
        return None
    return result["summary"]


def markdown(servers, summary, ratios, targets, machine, args, complete, floor=None) -> str:
    lines = [f"### Peregrine vs uvicorn / gunicorn, one worker ({machine['started']})", ""]
    if not complete:
        lines += ["**Interrupted: partial results.**", ""]
    lines += [c.machine_markdown(machine) + f" Load average at the end {', '.join(f'{x:.2f}' for x in os.getloadavg())}.", "",
              f"Load: `wrk -t1 -c<N> -d{max(1, round(args.duration))}s --timeout {max(1, round(args.timeout))}s` on "
              f"`GET {args.path}`, {args.rounds} interleaved rounds after {args.warmup:g} s of warm-up per server; "
              "median over the rounds (peak RSS: the largest over the rounds, whole process tree; "
              "CPU: user+system seconds of the process tree per 1,000 requests). "
              "Errors: socket connect/read/write/timeout plus responses >= 400, per run (median).", "",
              "| App | Server | Conns | Req/s | Req/s range over the rounds | p50 (ms) | p99 (ms) | Errors | "
              "Peak RSS (MiB) | CPU s / 1k req |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in servers:
        if s.error and not summary.get(s.key):
            lines.append(f"| {s.app} | {s.name} | — | {s.error.splitlines()[0]} | | | | | | |")
            continue
        for conns, r in summary.get(s.key, {}).items():
            lines.append(f"| {s.app} | {s.name} | {conns} | {r['rps']:,.0f} | {r['rps_min']:,.0f}–{r['rps_max']:,.0f} | "
                         f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
                         f"{r['errors']:g} | {r['peak_rss_mib']:.0f} | {fmt(r['cpu_s_per_1k'], 3)} |")
    lines += ["", "Peregrine's Python thread (the ASGI thread or the WSGI thread, from /proc/PID/task/TID/stat over each "
              "load): its busy share of the wall time and its CPU per request, against the CPU per call of "
              "bench/floor run in this session before the servers started"
              + (" (" + ", ".join(f"{a} {v['cpu_us_per_request']:.1f} µs" for a, v in floor.items()) + ")." if floor else
                 " (not run)."), "",
              "Waiting for a core is the share of the wall time it was ready to run while the machine's other "
              "threads (wrk's among them) had both cores (/proc/PID/task/TID/schedstat; for WSGI both figures are "
              "summed over its threads); the rest of the time it slept, with no request to run. The last column sets it against the floor's calls made each in an "
              "asyncio task of its own (ASGI only): a task per request is what any server that runs requests side "
              "by side adds at least.", "",
              "| App | Conns | Python thread busy | waiting for a core | Python-thread CPU µs / req | "
              "minus the floor (µs) | minus the floor in tasks (µs) |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in servers:
        if s.name != "peregrine":
            continue
        floor_us = (floor or {}).get(s.app, {}).get("cpu_us_per_request")
        task_us = (floor or {}).get(s.app, {}).get("task_cpu_us_per_request")
        for conns, r in summary.get(s.key, {}).items():
            busy, us, waiting = r.get("py_busy"), r.get("py_cpu_us_per_req"), r.get("py_waiting_for_core")
            lines.append(f"| {s.app} | {conns} | {'n/a' if busy is None else f'{busy * 100:.0f} %'} | "
                         f"{'n/a' if waiting is None else f'{waiting * 100:.1f} %'} | {fmt(us)} | "
                         f"{'n/a' if us is None or floor_us is None else f'{us - floor_us:+.1f}'} | "
                         f"{'n/a' if us is None or task_us is None else f'{us - task_us:+.1f}'} |")
    if any(r.get("floor_cpu_us") is not None for s in servers if s.name == "peregrine"
           for r in summary.get(s.key, {}).values()):
        lines += ["", f"The same loads against a floor measured right before each of them ({args.paired_floor:g} s of "
                      "bench/floor's calls, by one process kept waiting between loads), the difference taken load "
                      "by load, then the median over the rounds; this is what the 8 µs target reads.", "",
                  "| App | Conns | paired floor, median (µs) | minus the paired floor (µs) | "
                  "minus the paired floor in tasks (µs) |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        for s in servers:
            if s.name != "peregrine":
                continue
            for conns, r in summary.get(s.key, {}).items():
                over, over_task = r.get("py_over_floor_us"), r.get("py_over_task_floor_us")
                lines.append(f"| {s.app} | {conns} | {fmt(r.get('floor_cpu_us'))} | "
                             f"{'n/a' if over is None else f'{over:+.1f}'} | "
                             f"{'n/a' if over_task is None else f'{over_task:+.1f}'} |")
    lines += ["", "Ratios Peregrine / baseline: of the medians above, and the median of the ratios taken round by round.",
              "The ceiling is the most any server with one Python thread could reach against that baseline in "
              "the same rounds: the floor measured right before each load, its calls back to back with the thread "
              "never idle (for ASGI each in a task of its own), over the baseline's req/s; median over the rounds.",
              "", "| App | Peregrine vs | Conns | Req/s ratio | Req/s ratio, per round | ceiling | p99 ratio | "
              "CPU per request ratio | Peak RSS ratio |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in ratios:
        lines.append(f"| {r['app']} | {r['baseline']} | {r['conns']} | {fmt(r['rps_ratio'], 2)}x | "
                     f"{fmt(r['rps_ratio_paired_median'], 2)}x | "
                     f"{'n/a' if r.get('ceiling_ratio') is None else fmt(r['ceiling_ratio'], 2) + 'x'} | "
                     f"{fmt(r['p99_ratio'], 2)} | {fmt(r['cpu_per_req_ratio'], 2)} | {fmt(r['rss_ratio'], 2)} |")
    lines += ["", "| Target | Measured | Result |", "| --- | ---: | --- |"]
    for t in targets:
        unit = t.get("unit", "x")
        measured = "n/a" if t["value"] is None else (f"{t['value']:.2f}x" if unit == "x" else f"{t['value']:.1f} {unit}")
        lines.append(f"| {t['what']} | {measured} | {'PASS' if t['pass'] else 'FAIL'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    args = parse_args(argv)
    c.install_cleanup()
    c.raise_nofile()
    stamp = c.timestamp()
    args.out.mkdir(parents=True, exist_ok=True)
    log_dir = args.out / f"{stamp}-logs"
    log_dir.mkdir(parents=True, exist_ok=True)

    machine = c.describe_run(build=any(n == "peregrine" for _, n in args.servers))
    if machine is None:
        return 1
    servers = [Server(a, n) for a, n in args.servers]
    complete = False
    floor = None
    paired_floor = None
    try:
        floor = run_floor(args, log_dir)
        paired_apps = sorted({a for a, n in args.servers if n == "peregrine"})
        if args.paired_floor > 0 and paired_apps:
            try:
                paired_floor = PairedFloor(paired_apps, log_dir / "paired-floor.log")
            except (OSError, RuntimeError) as e:
                c.log(f"bench: no paired floor: {e}")
        start_servers(servers, log_dir)
        for s in servers:
            if s.name == "peregrine" and s.proc and not s.error:
                machine["java"] = c.java_version_of(s.proc.pid)
                break
        complete = run_loads(servers, args, paired_floor)
    except KeyboardInterrupt:
        c.log("bench: interrupted")
    finally:
        if paired_floor:
            paired_floor.close()
        c.stop_all()

    summary = summarize(servers, args)
    ratios, targets = compare(summary, {s.key: s for s in servers}, args)
    targets += python_thread_targets(summary, floor)
    md = markdown(servers, summary, ratios, targets, machine, args, complete, floor)
    result = {
        "machine": machine, "complete": complete,
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "servers": {s.key: {"command": s.command(), "port": s.port, "startup_s": s.startup_s, "error": s.error,
                            "log": str(log_dir / f"{s.app}-{s.name}.log"),
                            "rounds": {str(k): v for k, v in s.results.items()}} for s in servers},
        "summary": {k: {str(n): v for n, v in per.items()} for k, per in summary.items()},
        "ratios": ratios, "targets": targets, "floor": floor,
        "loadavg_at_end": list(os.getloadavg()),
    }
    c.write_results(args.out, stamp, result, md, f"Server logs: {log_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
