"""bench/respawn: how soon a worker killed with kill -9 under load is replaced and serving again (issue 32 point 6:
"serving within 3 s"), against gunicorn and uvicorn.

Servers, started at once from bench/apps and measured in interleaved rounds (A B C D A B C D ...):
`peregrine --workers 2 --log-level debug` (PEREGRINE_BIN) against `gunicorn -w 2` (sync worker) on the Flask hello
app, and against `uvicorn --workers 2` on the FastAPI hello app. The apps are pid_flask_app.py and
pid_fastapi_app.py: the hello apps of the other benchmarks, naming the process that answered in an X-Worker-Pid
header.

One round on one server: --clients threads send `GET /` back to back, each request on a new connection (so that
every request is accepted afresh by whichever worker the kernel hands it to), for --warmup seconds and until the
worker to kill is at least --min-age seconds old (Peregrine's supervisor backs off from restarting a worker that
keeps dying within 10 s of its start; one such death it replaces at once, and an old worker's death clears the
count). The victim is the oldest child of the server's main process that has answered; it gets SIGKILL. Then:

- started: from the kill to the start of a new child of the main process (its start time in /proc/PID/stat, in
  clock ticks, so the polling period does not count);
- serving: from the kill to the arrival of the first 200 that names the new child's pid, with the successor's CPU
  time by then (all its threads) and how long its threads had waited for a core (their schedstat): on 2 cores
  under load, what tells a start-up's work from its waiting;
- failed requests of the whole round: connection refused, reset or closed without an answer, timed out, or a
  status other than 200.

The load goes on for --tail seconds after the successor's first answer. For Peregrine the server's log gives when
the supervisor saw the death and when the successor reported ready, and the successor's own start-up split (its
line "Start-up took N ms from the process's start: JVM and settings ..., Python ..., import ..., application
startup ..., sockets ..."), so the report says where the time goes.

Figures: median, fastest and slowest round; PASS/FAIL of Peregrine's median against the 3 s target. The exit
status is 0 whatever they say: a measurement, not a test. Writes bench/results/respawn-<timestamp>.json and .md.
Standard library only: it runs under any CPython >= 3.9. The servers' packages come from --venv.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as c  # noqa: E402

TARGET_S = 3.0
REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: bench-respawn\r\nConnection: close\r\n\r\n"
APPS = {"flask": "pid_flask_app:app", "fastapi": "pid_fastapi_app:app"}
STARTUP_SPLIT = re.compile(
    r"Start-up took (?P<total>-?\d+) ms from the process's start: JVM and (?:Quarkus|settings) (?P<jvm_quarkus>-?\d+) ms, "
    r"Python (?P<python>\d+) ms, import (?P<import>\d+) ms, application startup (?P<app_startup>\d+) ms, "
    r"sockets (?P<sockets>\d+) ms")
SPLIT_PARTS = ("jvm_quarkus", "python", "import", "app_startup", "sockets", "total")
LOG_CLOCK = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) ")


def main_checkout() -> Path | None:
    """The main checkout when this is a git worktree (its target/ holds the venvs)."""
    out = subprocess.run(["git", "-C", str(c.ROOT), "rev-parse", "--path-format=absolute", "--git-common-dir"],
                         capture_output=True, text=True)
    return Path(out.stdout.strip()).parent if out.returncode == 0 and out.stdout.strip() else None


def default_venv() -> Path:
    roots = [c.ROOT] + [r for r in [main_checkout()] if r and r != c.ROOT]
    candidates = [root / "target" / name for name in ("bench-venv", "venv-3.11") for root in roots]
    if os.environ.get("BENCH_VENV"):
        # bench/lib/env.sh names this checkout's bench venv whether it exists or not.
        candidates.insert(0, Path(os.environ["BENCH_VENV"]))
    return next((v for v in candidates if (v / "bin" / "python").exists()), candidates[0])


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bench/respawn",
        description="Time from kill -9 of a worker under load to its successor started and serving: "
                    "peregrine --workers 2 against gunicorn -w 2 (Flask) and uvicorn --workers 2 (FastAPI). "
                    "Writes bench/results/respawn-<timestamp>.json and .md.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--rounds", type=int, default=5, help="kills per server")
    p.add_argument("--apps", default="flask,fastapi", help="comma-separated: flask, fastapi")
    p.add_argument("--clients", type=int, default=4, help="client threads sending requests back to back")
    p.add_argument("--warmup", type=float, default=3.0, help="seconds of load before the kill")
    p.add_argument("--min-age", type=float, default=11.0,
                   help="the worker killed is at least this old (Peregrine backs off from restarting a worker "
                        "that dies again within 10 s of its start)")
    p.add_argument("--tail", type=float, default=1.0, help="seconds of load after the successor's first answer")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the successor to serve")
    p.add_argument("--request-timeout", type=float, default=10.0, help="seconds a request may take")
    p.add_argument("--venv", type=Path, default=default_venv(),
                   help="venv with flask, gunicorn (and fastapi, uvicorn) for the servers")
    p.add_argument("--out", type=Path, default=c.RESULTS_DIR, help="directory for the JSON and Markdown results")
    return p.parse_args(argv)


# ---------------------------------------------------------------- the load


def get_once(port: int, timeout: float) -> tuple[int | None, str | None]:
    """One `GET /` on a new connection: (pid of the worker that answered 200, None) or (None, why it failed)."""
    try:
        with socket.create_connection((c.HOST, port), timeout=timeout) as s:
            s.sendall(REQUEST)
            answer = b""
            while len(answer) < 65536:
                chunk = s.recv(65536)
                if not chunk:
                    break
                answer += chunk
    except ConnectionRefusedError:
        return None, "refused"
    except (ConnectionResetError, BrokenPipeError):
        return None, "reset"
    except socket.timeout:
        return None, "timeout"
    except OSError as e:
        return None, f"error {e.errno}"
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    lines = head.split("\r\n")
    if not lines[0]:
        return None, "closed without an answer"
    status = lines[0].split(" ", 2)[1] if lines[0].count(" ") else "?"
    if status != "200":
        return None, f"status {status}"
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "x-worker-pid":
            return int(value.strip()), None
    return None, "200 without X-Worker-Pid"


class Load:
    """Client threads sending `GET /` back to back on new connections while the `with` block runs. Keeps, per
    worker pid, the count of 200s and the monotonic time of its first; and every failure with its time."""

    def __init__(self, port: int, clients: int, request_timeout: float):
        self.port, self.request_timeout = port, request_timeout
        self.answers: collections.Counter = collections.Counter()
        self.first_200_at: dict[int, float] = {}
        self.failures: list[tuple[float, str]] = []
        self.started_at = self.stopped_at = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(clients)]

    def __enter__(self):
        self.started_at = time.monotonic()
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for t in self._threads:
            t.join()
        self.stopped_at = time.monotonic()

    def _run(self):
        while not self._stop.is_set():
            pid, failure = get_once(self.port, self.request_timeout)
            now = time.monotonic()
            with self._lock:
                if failure:
                    self.failures.append((now, failure))
                else:
                    self.answers[pid] += 1
                    self.first_200_at.setdefault(pid, now)

    def answered(self, pid: int) -> bool:
        with self._lock:
            return self.answers[pid] > 0

    def first_200(self, pid: int) -> float | None:
        with self._lock:
            return self.first_200_at.get(pid)

    def snapshot(self) -> tuple[collections.Counter, list[tuple[float, str]]]:
        with self._lock:
            return collections.Counter(self.answers), list(self.failures)


# ---------------------------------------------------------------- processes


def children(parent: int) -> dict[int, float]:
    """{pid: start time in seconds since boot} of the children of `parent`."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = c._stat_fields(int(entry))
            # Fields 4 (ppid) and 22 (starttime, clock ticks since boot) of /proc/PID/stat, counted from 1.
            if fields and int(fields[1]) == parent:
                found[int(entry)] = int(fields[19]) / c.CLK_TCK
    return found


def cpu_and_wait_seconds(pid: int) -> tuple[float | None, float | None]:
    """CPU time (user + system, all threads, ended ones too) of a process, and how long its live threads have
    been ready to run but waited for a core."""
    fields = c._stat_fields(pid)
    if not fields:
        return None, None
    cpu = (int(fields[11]) + int(fields[12])) / c.CLK_TCK
    threads = c.thread_stats(pid)
    return cpu, (sum(wait for _, _, wait in threads.values()) if threads else None)


def boot_clock() -> float:
    """Seconds since boot on the clock /proc/PID/stat's start times use."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


class Server:
    """One server command with {port} for its port, started in bench/apps with its output in a log file."""

    def __init__(self, kind: str, app: str, argv: list):
        self.kind, self.app, self.argv = kind, app, argv
        self.name = f"{kind} {'--workers 2' if kind != 'gunicorn' else '-w 2'}, {app}"
        self.proc: c.Proc | None = None
        self.port = 0
        self.log_path: Path | None = None

    def start(self, log_dir: Path) -> None:
        self.port = c.free_port()
        self.log_path = log_dir / f"{self.kind}-{self.app}.log"
        cmd = [str(a).replace("{port}", str(self.port)) for a in self.argv]
        self.proc = c.Proc(self.name, cmd, cwd=c.APPS_DIR, env=c.child_env(), log_path=self.log_path)

    def command(self) -> str:
        return " ".join(Path(str(a)).name if i == 0 else str(a) for i, a in enumerate(self.argv))


def servers(apps: list[str], venv: Path) -> list[Server]:
    found = []
    for app in apps:
        target = APPS[app]
        found.append(Server("peregrine", app, [c.PEREGRINE, "--venv", venv, "--port", "{port}", "--workers", "2",
                                               "--log-level", "debug", target]))
        if app == "flask":
            found.append(Server("gunicorn", app, [venv / "bin" / "gunicorn", "-b", f"{c.HOST}:{{port}}", "-w", "2",
                                                  "--log-level", "info", target]))
        else:
            found.append(Server("uvicorn", app, [venv / "bin" / "uvicorn", target, "--host", c.HOST, "--port",
                                                 "{port}", "--workers", "2", "--no-access-log", "--log-level", "info"]))
    return found


# ---------------------------------------------------------------- one round


def choose_victim(server: Server, load: Load, min_age: float, timeout: float) -> tuple[int, dict[int, float]]:
    """The oldest child of the server's main process that has answered, once it is at least min_age old;
    with the children of that moment."""
    deadline = time.monotonic() + timeout
    while True:
        kids = children(server.proc.pid)
        serving = [pid for pid in kids if load.answered(pid)]
        if serving:
            victim = min(serving, key=kids.get)
            wait = min_age - (boot_clock() - kids[victim])
            if wait <= 0:
                return victim, kids
            time.sleep(min(wait, 1.0))
        else:
            time.sleep(0.1)
        if time.monotonic() > deadline:
            raise RuntimeError(f"{server.name}: no worker has answered within {timeout:.0f} s")


def one_round(server: Server, args) -> dict:
    """Load, kill the victim, wait for its successor to start and to answer, load a little longer; the times,
    the failures and, for Peregrine, what its log says about the successor."""
    result: dict = {}
    with Load(server.port, args.clients, args.request_timeout) as load:
        time.sleep(args.warmup)
        victim, before = choose_victim(server, load, args.min_age, args.timeout)
        log_offset = server.log_path.stat().st_size
        result["loadavg_1m"] = os.getloadavg()[0]
        result["victim_age_s"] = boot_clock() - before[victim]
        result["victim_answers"] = load.snapshot()[0][victim]
        killed_wall, killed_boot, killed_at = time.time(), boot_clock(), time.monotonic()
        os.kill(victim, signal.SIGKILL)

        successor = None
        while successor is None and time.monotonic() - killed_at < args.timeout:
            time.sleep(0.01)
            new = {pid: start for pid, start in children(server.proc.pid).items()
                   if pid not in before and pid != victim}
            if new:
                successor = min(new, key=new.get)
                result["started_s"] = new[successor] - killed_boot
        serving_at = None
        while successor and serving_at is None and time.monotonic() - killed_at < args.timeout:
            time.sleep(0.005)
            serving_at = load.first_200(successor)
        if serving_at is not None:
            result["serving_s"] = serving_at - killed_at
            result["successor_cpu_s"], result["successor_wait_s"] = cpu_and_wait_seconds(successor)
            time.sleep(args.tail)
        else:
            result["serving_s"] = None
            c.log(f"bench: {server.name}: no answer from a successor within {args.timeout:.0f} s "
                  f"(new child: {successor})")
    answers, failures = load.snapshot()
    result["requests_ok"] = sum(answers.values())
    result["successor_answers"] = answers[successor] if successor else 0
    result.update(victim=victim, successor=successor, seconds=load.stopped_at - load.started_at)
    result["failed"] = len(failures)
    result["failed_by_kind"] = dict(collections.Counter(kind for _, kind in failures))
    result["failed_before_kill"] = sum(1 for t, _ in failures if t < killed_at)
    if server.kind == "peregrine" and successor:
        text = server.log_path.read_bytes()[log_offset:].decode(errors="replace")
        result.update(peregrine_log_facts(text, victim, successor, killed_wall))
    return result


def log_clock_after(line: str, killed_wall: float) -> float | None:
    """Seconds from the kill to the time a log line starts with (HH:MM:SS.mmm, local time)."""
    m = LOG_CLOCK.match(line)
    if not m:
        return None
    h, mi, s, ms = (int(g) for g in m.groups())
    killed = datetime.datetime.fromtimestamp(killed_wall)
    killed_of_day = killed.hour * 3600 + killed.minute * 60 + killed.second + killed.microsecond / 1e6
    # The log shows the time of day only: a line just past midnight follows a kill just before it.
    return (h * 3600 + mi * 60 + s + ms / 1000 - killed_of_day + 43200) % 86400 - 43200


def peregrine_log_facts(text: str, victim: int, successor: int, killed_wall: float) -> dict:
    """From the supervisor's and the successor's log lines after the kill: when the death was seen, when the
    successor started, logged its start-up split and reported ready (s after the kill), and the split (ms)."""
    facts: dict = {}
    split = split_logged = None
    for line in text.splitlines():
        m = STARTUP_SPLIT.search(line)
        if m:
            # The split line names no pid; the successor's "serving" line follows it from the same process.
            split = {k: int(v) for k, v in m.groupdict().items()}
            split_logged = log_clock_after(line, killed_wall)
        elif f"(pid {victim}) exited unexpectedly" in line:
            facts["supervisor_saw_death_s"] = log_clock_after(line, killed_wall)
        elif "Started worker" in line and f"(pid {successor})" in line:
            facts["supervisor_started_s"] = log_clock_after(line, killed_wall)
        elif re.search(rf"Worker \d+ \(pid {successor}\) serving", line):
            facts["startup_split_ms"], facts["startup_logged_s"] = split, split_logged
        elif re.search(rf"worker \d+ \(pid {successor}\) ready", line):
            facts["ready_s"] = log_clock_after(line, killed_wall)
    return facts


# ---------------------------------------------------------------- run, summary, report


def describe(args) -> dict | None:
    try:
        version = c.build_peregrine()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        c.log(f"bench: {e}")
        return None
    peregrine_root = c.PEREGRINE.resolve().parent.parent
    return {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "started_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(), "cpu_model": c.cpu_model(), "kernel": os.uname().release, "os": c._os_release(),
        "memory_gib": round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30, 1),
        "loadavg_at_start": os.getloadavg(),
        "peregrine": version, "peregrine_bin": str(c.PEREGRINE),
        "peregrine_commit": c._run_text(["git", "-C", str(peregrine_root), "rev-parse", "--short", "HEAD"]),
        "bench_commit": c._run_text(["git", "-C", str(c.ROOT), "rev-parse", "--short", "HEAD"]),
        "driver_python": sys.version.split()[0],
        "venv": str(args.venv),
        "packages": c.package_versions(("flask", "werkzeug", "fastapi", "starlette", "gunicorn", "uvicorn",
                                        "uvloop", "httptools")),
    }


def summarize(results: list[dict]) -> dict:
    def spread(key: str) -> dict:
        values = [r[key] for r in results if r.get(key) is not None]
        if not values:
            return {"median": None, "min": None, "max": None, "n": 0}
        return {"median": c.median(values), "min": min(values), "max": max(values), "n": len(values)}

    failed_by_kind: collections.Counter = collections.Counter()
    for r in results:
        failed_by_kind.update(r["failed_by_kind"])
    summary = {"rounds": len(results), "started_s": spread("started_s"), "serving_s": spread("serving_s"),
               "successor_cpu_s": spread("successor_cpu_s"), "successor_wait_s": spread("successor_wait_s"),
               "failed": spread("failed"), "failed_total": sum(r["failed"] for r in results),
               "failed_by_kind": dict(failed_by_kind), "loadavg_1m": spread("loadavg_1m"),
               "rps": c.median([r["requests_ok"] / r["seconds"] for r in results if r["seconds"]])}
    for key in ("supervisor_saw_death_s", "supervisor_started_s", "startup_logged_s", "ready_s"):
        if any(key in r for r in results):
            summary[key] = spread(key)
    splits = [r["startup_split_ms"] for r in results if r.get("startup_split_ms")]
    if splits:
        summary["startup_split_ms"] = {part: c.median([s[part] for s in splits]) for part in SPLIT_PARTS}
        # The worker's total counts from the start time the JVM reports, which it builds on the boot time that
        # Linux gives in whole seconds: set against the start time from /proc and the line's own time stamp,
        # how far off that is (the same for every process until the machine reboots).
        summary["startup_total_error_ms"] = c.median(
            [r["started_s"] * 1000 + r["startup_split_ms"]["total"] - r["startup_logged_s"] * 1000
             for r in results if r.get("startup_split_ms") and r.get("startup_logged_s") is not None
             and r.get("started_s") is not None])
    return summary


def main(argv=None) -> int:
    args = parse_args(argv)
    apps = [a.strip() for a in args.apps.split(",") if a.strip()]
    unknown = [a for a in apps if a not in APPS]
    if unknown or not apps:
        c.log(f"bench: unknown app(s) {unknown}: choose among {', '.join(APPS)}")
        return 2
    needed = ["flask", "gunicorn"] * ("flask" in apps) + ["fastapi", "uvicorn"] * ("fastapi" in apps)
    check = subprocess.run([str(args.venv / "bin" / "python"), "-c", f"import {', '.join(needed)}"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        c.log(f"bench: the venv {args.venv} lacks {', '.join(needed)} (see --venv):\n{check.stderr[-1000:]}")
        return 1
    c.VENV, c.VENV_PY = args.venv, args.venv / "bin" / "python"
    c.install_cleanup()
    c.raise_nofile()
    stamp = c.timestamp()
    log_dir = args.out / f"respawn-{stamp}-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    machine = describe(args)
    if machine is None:
        return 1
    data: dict = {"machine": machine, "target_s": TARGET_S,
                  "command": "bench/respawn " + " ".join(argv if argv is not None else sys.argv[1:]),
                  "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                  "servers": {}, "rounds": {}, "summary": {}}
    measured = servers(apps, args.venv)
    try:
        for server in measured:
            server.start(log_dir)
        for server in measured:
            c.wait_ready(server.proc, server.port, timeout=120)
            data["servers"][server.name] = server.command()
            data["rounds"][server.name] = []
            c.log(f"bench: {server.name} serving on port {server.port}")
        machine["java"] = c.java_version_of(measured[0].proc.pid)
        for round_ in range(args.rounds):
            for server in measured:
                r = one_round(server, args)
                data["rounds"][server.name].append(r)
                serving = f"{r['serving_s']:.2f} s" if r.get("serving_s") is not None else "never"
                c.log(f"bench: round {round_ + 1}/{args.rounds} {server.name}: successor started after "
                      f"{r.get('started_s', float('nan')):.2f} s, serving after {serving}, {r['failed']} failed "
                      f"requests, load {r['loadavg_1m']:.2f}")
    except KeyboardInterrupt:
        c.log("bench: interrupted")
    except RuntimeError as e:
        c.log(f"bench: {e}")
    finally:
        c.stop_all()
    machine["loadavg_at_end"] = os.getloadavg()
    for name, results in data["rounds"].items():
        if results:
            data["summary"][name] = summarize(results)
    c.write_results(args.out, f"respawn-{stamp}", data, markdown(data), f"Logs: {log_dir}")
    return 0


def seconds(s: dict) -> str:
    if s.get("median") is None:
        return "-"
    return f"{s['median']:.2f} s ({s['min']:.2f}-{s['max']:.2f})"


def markdown(data: dict) -> str:
    m, summary = data["machine"], data["summary"]
    p = m["packages"]
    load = lambda values: ", ".join(f"{x:.2f}" for x in values)  # noqa: E731
    lines = [f"### A killed worker's successor ({m['started_utc']})", "",
             f"Command: `{data['command'].strip()}`.  ",
             f"Machine: {m['nproc']} CPUs ({m['cpu_model']}), {m['memory_gib']} GiB, {m['os']}, Linux {m['kernel']}; "
             f"load average {load(m['loadavg_at_start'])} at the start, {load(m.get('loadavg_at_end', ()))} at the end.  ",
             f"Software: {m['peregrine']} (`{m['peregrine_bin']}`, commit {m['peregrine_commit']}; {m.get('java', 'java ?')}), "
             f"CPython {p.get('python')}, Flask {p.get('flask')} (Werkzeug {p.get('werkzeug')}), gunicorn {p.get('gunicorn')}, "
             f"FastAPI {p.get('fastapi')} (Starlette {p.get('starlette')}), uvicorn {p.get('uvicorn')} (uvloop "
             f"{p.get('uvloop')}, httptools {p.get('httptools')}); script at commit {m['bench_commit']}.", "",
             f"Each round: {data['settings']['clients']} client threads send `GET /` back to back, a new connection "
             f"each; after {data['settings']['warmup']:g} s (and once the worker is {data['settings']['min_age']:g} s "
             "old) the oldest worker that has answered gets `kill -9`. *Started*: kill to the start time of a new "
             "child of the server's main process; *serving*: kill to the first 200 that names the new child's pid "
             "(X-Worker-Pid); the successor's CPU time (all its threads) by then, and the time its threads had been "
             "ready to run but waited for a core. Failed requests: refused, reset, closed without an answer, timed "
             "out or not 200, over the whole round. Median (fastest-slowest) of the interleaved rounds.", "",
             "| server, app | rounds | successor started | successor serving | its CPU by then | its threads waiting "
             "for a core | failed requests per round | failures by kind, all rounds | req/s of the load | "
             "1-min load at the kill |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |"]
    for name, s in summary.items():
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(s["failed_by_kind"].items())) or "none"
        f = s["failed"]
        lines.append(f"| {name} | {s['rounds']} | {seconds(s['started_s'])} | {seconds(s['serving_s'])} | "
                     f"{seconds(s['successor_cpu_s'])} | {seconds(s['successor_wait_s'])} | "
                     f"{f['median']:g} ({f['min']}-{f['max']}) | {kinds} | {s['rps']:.0f} | "
                     f"{s['loadavg_1m']['median']:.2f} |")
    lines.append("")
    for name, s in summary.items():
        if not name.startswith("peregrine"):
            continue
        serving = s["serving_s"]
        if serving["median"] is None:
            lines.append(f"- {name}: no successor served: **FAIL** (target: serving within {TARGET_S:g} s)")
            continue
        ok = serving["median"] <= TARGET_S and serving["n"] == s["rounds"]
        lines.append(f"- {name}: serving {serving['median']:.2f} s after the kill (median; slowest "
                     f"{serving['max']:.2f} s, {sum(1 for r in data['rounds'][name] if (r.get('serving_s') or 1e9) <= TARGET_S)}"
                     f" of {s['rounds']} rounds within {TARGET_S:g} s): **{'PASS' if ok else 'FAIL'}** "
                     f"(target: serving within {TARGET_S:g} s)")
    lines += ["", "Where Peregrine's successor spends the time, per round: events in seconds after the kill (the "
              "supervisor's and the worker's log lines, millisecond clock; *started* from /proc), the successor's "
              "own start-up in ms from its log line `Start-up took N ms from the process's start` (`--log-level debug`), "
              "and when that line was logged.",
              "", "| server, app | round | load | death seen | started | JVM and settings | Python | import | app startup | "
              "sockets | start-up total | logged | ready | first 200 by it | failed |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def s_or_dash(v):
        return f"{v:.2f}" if v is not None else "-"

    for name, results in data["rounds"].items():
        if not name.startswith("peregrine"):
            continue
        for i, r in enumerate(results, 1):
            split = r.get("startup_split_ms") or {}
            lines.append(f"| {name} | {i} | {r['loadavg_1m']:.2f} | {s_or_dash(r.get('supervisor_saw_death_s'))} | "
                         f"{s_or_dash(r.get('started_s'))} | "
                         + " | ".join(str(split.get(part, "-")) for part in SPLIT_PARTS)
                         + f" | {s_or_dash(r.get('startup_logged_s'))} | {s_or_dash(r.get('ready_s'))} | "
                         f"{s_or_dash(r.get('serving_s'))} | {r['failed']} |")
        s = summary.get(name, {})
        split = s.get("startup_split_ms") or {}
        med = lambda key: s_or_dash((s.get(key) or {}).get("median"))  # noqa: E731
        lines.append(f"| {name} | median | {s['loadavg_1m']['median']:.2f} | {med('supervisor_saw_death_s')} | "
                     f"{med('started_s')} | " + " | ".join(f"{split[part]:g}" if part in split else "-" for part in SPLIT_PARTS)
                     + f" | {med('startup_logged_s')} | {med('ready_s')} | {med('serving_s')} | {s['failed']['median']:g} |")
    errors = [s["startup_total_error_ms"] for name, s in summary.items() if s.get("startup_total_error_ms") is not None]
    if errors:
        lines += ["", "The start-up total (and so its JVM and settings part) counts from the start time the JVM reports, "
                  "built on the boot time Linux gives in whole seconds: *started* plus the total came out "
                  f"{', '.join(f'{e:+.0f}' for e in errors)} ms (median per app) from when the line was logged."]
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
