"""bench/free-threaded: the four numbers of issue 33 in one run, side by side, on a free-threaded CPython (3.13t).

The application is bench/apps/cpu_app.py (Starlette): `GET /` says hello, `GET /cpu` spends about 20 ms of pure
Python in a loop over local variables.

1. Memory: total PSS (/proc/PID/smaps_rollup) of every process of the server, idle, of
   `peregrine --free-threaded --workers 4`, `uvicorn --workers 4` and `peregrine --workers 4` (processes), all on
   3.13t. After the first 200 the tree's PSS is sampled every second until it is stable (the last --stable-samples
   within 1 %, at least --min-idle s after the first 200). Rounds interleaved; medians. Target: free-threaded at most
   1.1 times uvicorn.
2. Parallelism: `wrk -t1 -c8` on /cpu against `--free-threaded --workers 2`, `--free-threaded --workers 1` and
   `--workers 2` (processes), all running at once, in interleaved rounds after a warm-up; medians of req/s. For
   each load also the cores the server's tree used, the share of the time its Python threads ran and the share
   they were ready to run but waited for a core (/proc/PID/task/TID/schedstat), and the cores the rest of the
   machine took (/proc/stat minus the server and wrk): on a shared 2-core machine, what tells a server that cannot
   run in parallel from one that has no second core to run on. Targets: 2 threads at least 1.6 times 1 thread and
   at least 0.9 times 2 processes.
3. Start: launch to first 200 of `--free-threaded --workers 4` against `--workers 1` (one worker, no
   supervisor), interleaved starts; medians. Target: at most 1.5 times.
4. Overhead: `wrk -t1 -c64` on / against `--free-threaded --workers 1` on 3.13t and `--workers 1` on 3.13 with the
   GIL (both running at once, interleaved rounds), with the Python thread's CPU per request; and the floor: the app
   called with no server (a loop awaiting app(scope, receive, send) in asyncio, as bench/floor does) on each
   interpreter, in alternating runs, in CPU µs (the thread's) per call.

Writes bench/results/free-threaded-<timestamp>.json and .md. Standard library only: it runs under any CPython >= 3.9;
the floors run in the measured interpreters themselves (this file with --floor-child).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


# ---------------------------------------------------------------- the floor, run inside the measured interpreter

def floor_child(calls: int, runs: int) -> None:
    """Prints {"us_per_call": [{"cpu_us", "wall_us"}...], "python", "gil"}: `runs` timings of `calls` awaits of the app
    on GET /, in CPU time of the thread (what a loaded machine inflates least) and wall time."""
    sys.path.insert(0, str(HERE.parent / "apps"))
    from cpu_app import app  # noqa: E402

    base = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
            "method": "GET", "scheme": "http", "path": "/", "raw_path": b"/", "query_string": b"", "root_path": "",
            "headers": [(b"host", b"127.0.0.1:8000"), (b"user-agent", b"bench-free-threaded"), (b"accept", b"*/*")],
            "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000), "state": {}}
    request = {"type": "http.request", "body": b"", "more_body": False}
    sent = []

    async def receive():
        return request

    async def send(message):
        sent.append(message)

    async def main():
        for _ in range(2000):  # warm-up
            await app(dict(base), receive, send)
        if sent[0].get("status") != 200 or sent[1].get("body") != b"hello, world":
            raise RuntimeError(f"unexpected answer {sent[:2]}")
        out = []
        for _ in range(runs):
            sent.clear()
            started, cpu = time.perf_counter(), time.thread_time()
            for _ in range(calls):
                await app(dict(base), receive, send)
            out.append({"cpu_us": (time.thread_time() - cpu) / calls * 1e6,
                        "wall_us": (time.perf_counter() - started) / calls * 1e6})
        return out

    us = asyncio.run(main())
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(json.dumps({"us_per_call": us, "python": sys.version.split()[0], "gil": gil}))


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--floor-child":
    floor_child(int(sys.argv[2]), int(sys.argv[3]))
    sys.exit(0)


sys.path.insert(0, str(HERE))
import common as c  # noqa: E402
import startup  # noqa: E402

APP = "cpu_app:app"


def main_checkout_target() -> Path | None:
    """target/ of the main checkout when this is a git worktree (the venvs live there)."""
    out = subprocess.run(["git", "-C", str(c.ROOT), "rev-parse", "--path-format=absolute", "--git-common-dir"],
                         capture_output=True, text=True)
    return Path(out.stdout.strip()).parent / "target" if out.returncode == 0 and out.stdout.strip() else None


def default_venv(name: str) -> Path:
    candidates = [c.ROOT / "target" / name]
    main_target = main_checkout_target()
    if main_target:
        candidates.append(main_target / name)
    return next((p for p in candidates if (p / "bin" / "python").exists()), candidates[0])


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bench/free-threaded",
        description="Issue 33's four numbers for --free-threaded on CPython 3.13t: idle PSS of 4 workers against "
                    "uvicorn, /cpu req/s of 2 threads against 1 thread and 2 processes, start to first 200, and the "
                    "hello route against 3.13 with the GIL. Writes bench/results/free-threaded-<timestamp>.json and .md.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--ft-venv", type=Path, default=default_venv("venv-3.13t"),
                   help="venv of a free-threaded CPython with starlette and uvicorn")
    p.add_argument("--gil-venv", type=Path, default=default_venv("venv-3.13"),
                   help="venv of the same CPython version with the GIL, with starlette")
    p.add_argument("--memory-rounds", type=int, default=3, help="starts of each server for the memory")
    p.add_argument("--stable-samples", type=int, default=5, help="PSS samples (1 s apart) within 1 %% to call it idle")
    p.add_argument("--min-idle", type=float, default=5.0, help="seconds after the first 200 before PSS may be taken")
    p.add_argument("--load-rounds", type=int, default=3, help="rounds of each load")
    p.add_argument("--duration", type=float, default=10.0, help="seconds of each load")
    p.add_argument("--warmup", type=float, default=5.0, help="seconds of discarded load per server before the rounds")
    p.add_argument("--starts", type=int, default=5, help="starts of each server for the start time")
    p.add_argument("--floor-calls", type=int, default=20000, help="calls of the app per floor run")
    p.add_argument("--floor-runs", type=int, default=5, help="floor runs per interpreter")
    p.add_argument("--only", choices=("memory", "parallel", "start", "overhead"), action="append",
                   help="measure only this part (repeatable)")
    p.add_argument("--out", type=Path, default=c.RESULTS_DIR, help="directory for the JSON and Markdown results")
    return p.parse_args(argv)


def peregrine(venv: Path, *extra: str) -> list:
    return [c.PEREGRINE, "--venv", venv, "--port", "{port}", "--log-level", "warning", *extra, APP]


def start(name: str, argv: list, log_dir: Path, tag: str) -> tuple[c.Proc, int]:
    port = c.free_port()
    cmd = [str(a).replace("{port}", str(port)) for a in argv]
    slug = "".join(ch if ch.isalnum() else "_" for ch in name).strip("_")
    proc = c.Proc(name, cmd, cwd=c.APPS_DIR, env=c.child_env(), log_path=log_dir / f"{slug}-{tag}.log")
    return proc, port


# ---------------------------------------------------------------- /proc: threads and the whole machine

def is_python_thread(name: str) -> bool:
    """The threads that run the application: `python` (a worker process) or `python-N` (--free-threaded)."""
    return name == "python" or name.startswith("python-")


def machine_busy_seconds() -> float:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / c.CLK_TCK


def load(proc: c.Proc, port: int, path: str, conns: int, duration: float) -> dict:
    """One wrk load with the server's cores, its Python threads' busy and waiting shares, and the machine's."""
    before, cpu_before = c.thread_stats(proc.pid), c.tree_cpu_seconds(proc.pid)
    client_before, machine_before, wall_before = c.reaped_children_cpu_seconds(), machine_busy_seconds(), time.monotonic()
    r = c.wrk_summary(f"http://{c.HOST}:{port}{path}", conns, duration, timeout=10)
    wall = time.monotonic() - wall_before
    after, cpu_after = c.thread_stats(proc.pid), c.tree_cpu_seconds(proc.pid)
    client = c.reaped_children_cpu_seconds() - client_before
    machine = machine_busy_seconds() - machine_before
    server = cpu_after - cpu_before
    threads = []
    for key, (name, cpu, wait) in after.items():
        name0, cpu0, wait0 = before.get(key, (name, 0.0, 0.0))
        threads.append({"thread": name, "tid": key, "busy": (cpu - cpu0) / wall, "waiting": (wait - wait0) / wall})
    threads.sort(key=lambda t: -t["busy"])
    py = [t for t in threads if is_python_thread(t["thread"])]
    seconds = r["duration_us"] / 1e6
    errors = r["connect"] + r["read"] + r["write"] + r["timeout"] + r["status"]
    return {
        "requests": r["requests"], "rps": r["requests"] / seconds if seconds else 0.0,
        "p50_ms": r["p50_us"] / 1000, "p99_ms": r["p99_us"] / 1000, "errors": errors,
        "server_cores": server / wall, "client_cores": client / wall,
        "other_cores": max(0.0, (machine - server - client) / wall),
        "py_threads": len(py),
        "py_busy": sum(t["busy"] for t in py), "py_waiting": sum(t["waiting"] for t in py),
        "py_cpu_us_per_req": sum(t["busy"] for t in py) * wall / r["requests"] * 1e6 if r["requests"] else None,
        "busiest_threads": threads[:6], "loadavg_1m": os.getloadavg()[0],
    }


# ---------------------------------------------------------------- 1. memory

def idle_pss(proc: c.Proc, port: int, stable: int, min_idle: float, timeout: float = 90.0) -> dict:
    ready_s = c.wait_ready(proc, port, timeout=120)
    ready_at = time.monotonic()
    samples: list[int] = []
    while True:
        pids = c.tree_pids(proc.pid)
        samples.append(c.tree_pss_kib(proc.pid, pids))
        last = samples[-stable:]
        waited = time.monotonic() - ready_at
        if len(last) == stable and waited >= min_idle and max(last) - min(last) <= 0.01 * max(last):
            break
        if waited > timeout:
            c.log(f"bench: {proc.name}: PSS not stable after {timeout:.0f} s, taking the last sample")
            break
        time.sleep(1.0)
    status = c.http_get(port, "/")[0]
    return {"ready_s": ready_s, "idle_s": time.monotonic() - ready_at, "pss_kib": samples[-1],
            "rss_kib": c.tree_rss_kib(proc.pid, pids), "processes": len(pids),
            "threads": sum(c.status_fields(p).get("Threads", 0) for p in pids), "still_answers": status == 200}


def measure_memory(args, log_dir: Path) -> dict:
    servers = {
        "peregrine --free-threaded --workers 4": peregrine(args.ft_venv, "--free-threaded", "--workers", "4"),
        "uvicorn --workers 4": [args.ft_venv / "bin" / "uvicorn", APP, "--host", c.HOST, "--port", "{port}",
                                "--workers", "4", "--no-access-log", "--log-level", "warning"],
        "peregrine --workers 4 (processes)": peregrine(args.ft_venv, "--workers", "4"),
    }
    rounds: dict[str, list] = {name: [] for name in servers}
    for round_ in range(args.memory_rounds):
        for name, argv in servers.items():
            proc, port = start(name, argv, log_dir, f"memory-{round_}")
            try:
                r = idle_pss(proc, port, args.stable_samples, args.min_idle)
            finally:
                proc.stop()
            rounds[name].append(r)
            c.log(f"bench: memory {round_ + 1}/{args.memory_rounds} {name}: PSS {r['pss_kib'] / 1024:.1f} MiB "
                  f"({r['processes']} processes, RSS {r['rss_kib'] / 1024:.1f} MiB, stable {r['idle_s']:.0f} s after the first 200)")
    summary = {name: {"pss_mib": c.median([r["pss_kib"] for r in rs]) / 1024,
                      "pss_min_mib": min(r["pss_kib"] for r in rs) / 1024,
                      "pss_max_mib": max(r["pss_kib"] for r in rs) / 1024,
                      "rss_mib": c.median([r["rss_kib"] for r in rs]) / 1024,
                      "processes": rs[-1]["processes"], "threads": rs[-1]["threads"]}
               for name, rs in rounds.items()}
    return {"rounds": rounds, "summary": summary}


# ---------------------------------------------------------------- 2. and 4.: loads on servers running at once

def measure_loads(servers: dict, path: str, conns: int, args, log_dir: Path, tag: str) -> dict:
    procs = {}
    for name, argv in servers.items():  # one after the other: their starts do not compete
        proc, port = start(name, argv, log_dir, tag)
        c.wait_ready(proc, port, timeout=120)
        procs[name] = (proc, port)
    try:
        for name, (proc, port) in procs.items():
            status, body = c.http_get(port, path, timeout=10)
            if status != 200:
                raise RuntimeError(f"{name}: GET {path} answered {status}: {body[:200]!r}")
            c.wrk_summary(f"http://{c.HOST}:{port}{path}", conns, args.warmup, timeout=10)
        rounds: dict[str, list] = {name: [] for name in servers}
        for round_ in range(args.load_rounds):
            for name, (proc, port) in procs.items():
                r = load(proc, port, path, conns, args.duration)
                rounds[name].append(r)
                c.log(f"bench: {tag} {round_ + 1}/{args.load_rounds} {name}: {r['rps']:.1f} req/s, server "
                      f"{r['server_cores']:.2f} cores, Python threads busy {r['py_busy']:.2f} waiting "
                      f"{r['py_waiting']:.2f}, rest of the machine {r['other_cores']:.2f} cores, load {r['loadavg_1m']:.2f}")
    finally:
        for proc, _ in procs.values():
            proc.stop()
    keys = ("rps", "p50_ms", "p99_ms", "server_cores", "client_cores", "other_cores", "py_busy", "py_waiting",
            "py_cpu_us_per_req", "loadavg_1m")
    summary = {name: {**{k: c.median([r[k] for r in rs]) for k in keys},
                      "rps_min": min(r["rps"] for r in rs), "rps_max": max(r["rps"] for r in rs),
                      "errors": sum(r["errors"] for r in rs)}
               for name, rs in rounds.items()}
    return {"rounds": rounds, "summary": summary}


def measure_parallel(args, log_dir: Path) -> dict:
    servers = {
        "peregrine --free-threaded --workers 2": peregrine(args.ft_venv, "--free-threaded", "--workers", "2"),
        "peregrine --free-threaded --workers 1": peregrine(args.ft_venv, "--free-threaded", "--workers", "1"),
        "peregrine --workers 2 (processes)": peregrine(args.ft_venv, "--workers", "2"),
    }
    return measure_loads(servers, "/cpu", 8, args, log_dir, "parallel")


def measure_overhead(args, log_dir: Path) -> dict:
    servers = {
        "peregrine --free-threaded --workers 1, 3.13t": peregrine(args.ft_venv, "--free-threaded", "--workers", "1"),
        "peregrine --workers 1, 3.13 (GIL)": peregrine(args.gil_venv, "--workers", "1"),
    }
    result = measure_loads(servers, "/", 64, args, log_dir, "overhead")
    floors: dict[str, list] = {"3.13t": [], "3.13 (GIL)": []}
    info = {}
    for _ in range(args.floor_runs):  # alternating, one timing per run
        for label, venv in (("3.13t", args.ft_venv), ("3.13 (GIL)", args.gil_venv)):
            out = subprocess.run([str(venv / "bin" / "python"), __file__, "--floor-child", str(args.floor_calls), "1"],
                                 capture_output=True, text=True, timeout=600, cwd=c.APPS_DIR)
            if out.returncode != 0:
                raise RuntimeError(f"floor on {venv} failed:\n{out.stderr[-2000:]}")
            r = json.loads(out.stdout.strip().splitlines()[-1])
            floors[label].append(r["us_per_call"][0]["cpu_us"])
            info[label] = {"python": r["python"], "gil": r["gil"]}
    for label, us in floors.items():
        c.log(f"bench: floor {label}: " + ", ".join(f"{u:.1f}" for u in us) + " CPU µs per call")
    result["floor"] = {label: {"us_per_call": c.median(us), "runs": us, **info[label]} for label, us in floors.items()}
    return result


# ---------------------------------------------------------------- 3. start

def measure_start(args, log_dir: Path) -> dict:
    servers = {
        "peregrine --free-threaded --workers 4": peregrine(args.ft_venv, "--free-threaded", "--workers", "4"),
        "peregrine --workers 1": peregrine(args.ft_venv, "--workers", "1"),
    }
    rounds: dict[str, list] = {name: [] for name in servers}
    for round_ in range(args.starts):
        for name, argv in servers.items():
            started = time.monotonic()
            proc, port = start(name, argv, log_dir, f"start-{round_}")
            try:
                seconds, cpu = startup.first_200(port, proc, started)
            finally:
                proc.stop()
            rounds[name].append({"first_200_s": seconds, "cpu_s": cpu})
            c.log(f"bench: start {round_ + 1}/{args.starts} {name}: first 200 after {seconds:.2f} s ({cpu:.2f} s CPU)")
    summary = {name: {"median_s": c.median([r["first_200_s"] for r in rs]),
                      "min_s": min(r["first_200_s"] for r in rs), "max_s": max(r["first_200_s"] for r in rs),
                      "cpu_s": c.median([r["cpu_s"] for r in rs])}
               for name, rs in rounds.items()}
    return {"rounds": rounds, "summary": summary}


# ---------------------------------------------------------------- the run

def versions(venv: Path) -> dict:
    code = ("import importlib.metadata as m, json, sys\n"
            "out = {'python': sys.version.split()[0], 'gil': getattr(sys, '_is_gil_enabled', lambda: True)()}\n"
            "for n in ('starlette', 'uvicorn', 'h11', 'uvloop', 'httptools'):\n"
            "    try: out[n] = m.version(n)\n"
            "    except m.PackageNotFoundError: out[n] = None\n"
            "print(json.dumps(out))")
    text = c._run_text([str(venv / "bin" / "python"), "-c", code])
    try:
        return json.loads(text.splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": text}


def main(argv=None) -> int:
    args = parse_args(argv)
    for venv in (args.ft_venv, args.gil_venv):
        if not (venv / "bin" / "python").exists():
            c.log(f"bench: no venv at {venv} (see --ft-venv / --gil-venv)")
            return 1
    c.install_cleanup()
    c.raise_nofile()
    stamp = c.timestamp()
    log_dir = args.out / f"free-threaded-{stamp}-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        version = c.build_peregrine()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        c.log(f"bench: {e}")
        return 1
    machine = {"nproc": os.cpu_count(), "cpu_model": c.cpu_model(), "kernel": os.uname().release,
               "memory_gib": round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30, 1),
               "loadavg_at_start": os.getloadavg(), "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
               "peregrine": version, "git_commit": c._run_text(["git", "-C", str(c.ROOT), "rev-parse", "--short", "HEAD"]),
               "wrk": " ".join((c._run_text(["wrk", "-v"]).splitlines() or ["?"])[0].split()[:2]),
               "ft_venv": str(args.ft_venv), "gil_venv": str(args.gil_venv),
               "ft": versions(args.ft_venv), "gil": versions(args.gil_venv)}
    if machine["ft"].get("gil") is not False:
        c.log(f"bench: {args.ft_venv} is not a free-threaded CPython (sys._is_gil_enabled() is not False)")
        return 1
    parts = args.only or ["memory", "parallel", "start", "overhead"]
    data: dict = {"machine": machine, "command": "bench/free-threaded " + " ".join(argv if argv is not None else sys.argv[1:])}
    measure = {"memory": measure_memory, "parallel": measure_parallel, "start": measure_start,
               "overhead": measure_overhead}
    try:
        for part in parts:
            c.log(f"bench: --- {part} (load average {os.getloadavg()[0]:.2f})")
            data[part] = measure[part](args, log_dir)
    except KeyboardInterrupt:
        c.log("bench: interrupted")
    finally:
        c.stop_all()
    machine["loadavg_at_end"] = os.getloadavg()
    c.write_results(args.out, f"free-threaded-{stamp}", data, markdown(data), f"Logs: {log_dir}")
    return 0


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def markdown(data: dict) -> str:
    m = data["machine"]
    ft, gil = m["ft"], m["gil"]
    lines = [f"### Free-threaded workers ({m['started']})", "",
             f"Machine: {m['nproc']} CPUs ({m['cpu_model']}), {m['memory_gib']} GiB, Linux {m['kernel']}; load average "
             f"{', '.join(f'{x:.2f}' for x in m['loadavg_at_start'])} at the start, "
             f"{', '.join(f'{x:.2f}' for x in m.get('loadavg_at_end', ()))} at the end.  ",
             f"Software: {m['peregrine']}, CPython {ft.get('python')} free-threaded and {gil.get('python')} with the GIL, "
             f"Starlette {ft.get('starlette')}, uvicorn {ft.get('uvicorn')} (h11 {ft.get('h11')}, asyncio: no uvloop or "
             f"httptools for 3.13t), {m['wrk']}; commit {m['git_commit']}.  ",
             f"Command: `{data['command'].strip()}`.", ""]
    targets = []
    if "memory" in data:
        s = data["memory"]["summary"]
        base = s["uvicorn --workers 4"]["pss_mib"]
        lines += ["**Memory**: idle, total PSS of every process of the server (Starlette app, 3.13t), median of "
                  f"{len(next(iter(data['memory']['rounds'].values())))} starts.", "",
                  "| server | processes | threads | PSS, MiB (min-max) | RSS, MiB | PSS / uvicorn |",
                  "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for name, v in s.items():
            lines.append(f"| {name} | {v['processes']} | {v['threads']} | {v['pss_mib']:.1f} ({v['pss_min_mib']:.1f}-"
                         f"{v['pss_max_mib']:.1f}) | {v['rss_mib']:.1f} | {v['pss_mib'] / base:.2f}x |")
        ratio = s["peregrine --free-threaded --workers 4"]["pss_mib"] / base
        targets.append(("free-threaded 4 workers PSS / uvicorn --workers 4", f"{ratio:.2f}x", "<= 1.1x", ratio <= 1.1))
        lines.append("")
    if "parallel" in data:
        s = data["parallel"]["summary"]
        one, procs = s["peregrine --free-threaded --workers 1"]["rps"], s["peregrine --workers 2 (processes)"]["rps"]
        lines += [f"**Parallelism**: `GET /cpu` (about 20 ms of pure Python), `wrk -t1 -c8`, "
                  f"{len(next(iter(data['parallel']['rounds'].values())))} interleaved rounds, medians.", "",
                  "| server | req/s (min-max) | p50 ms | Python CPU per request | server cores | Python threads busy | "
                  "... waiting for a core | rest of the machine, cores | load 1 min |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for name, v in s.items():
            lines.append(f"| {name} | {v['rps']:.1f} ({v['rps_min']:.1f}-{v['rps_max']:.1f}) | {v['p50_ms']:.0f} | "
                         f"{v['py_cpu_us_per_req'] / 1000:.1f} ms | {v['server_cores']:.2f} | {v['py_busy']:.2f} | {v['py_waiting']:.2f} | "
                         f"{v['other_cores']:.2f} | {v['loadavg_1m']:.2f} |")
        two = s["peregrine --free-threaded --workers 2"]["rps"]
        targets.append(("/cpu req/s, free-threaded 2 workers / 1 worker", f"{two / one:.2f}x", ">= 1.6x", two / one >= 1.6))
        targets.append(("/cpu req/s, free-threaded 2 workers / 2 processes", f"{two / procs:.2f}x", ">= 0.9x",
                        two / procs >= 0.9))
        lines += ["", "Busy and waiting are in cores (the sum over the Python threads of the share of the wall time "
                  "they ran, and were ready to run but had no core); the rest of the machine is /proc/stat's busy time "
                  "minus the server and wrk.", ""]
    if "start" in data:
        s = data["start"]["summary"]
        lines += [f"**Start**: launch to first 200, {len(next(iter(data['start']['rounds'].values())))} interleaved "
                  "starts each.", "", "| server | median | fastest | slowest | CPU by then |", "| --- | ---: | ---: | ---: | ---: |"]
        for name, v in s.items():
            lines.append(f"| {name} | {v['median_s']:.2f} s | {v['min_s']:.2f} s | {v['max_s']:.2f} s | {v['cpu_s']:.2f} s |")
        ratio = s["peregrine --free-threaded --workers 4"]["median_s"] / s["peregrine --workers 1"]["median_s"]
        targets.append(("first 200, free-threaded 4 workers / 1 worker", f"{ratio:.2f}x", "<= 1.5x", ratio <= 1.5))
        lines.append("")
    if "overhead" in data:
        s, fl = data["overhead"]["summary"], data["overhead"]["floor"]
        lines += ["**Overhead**: `GET /` (hello), `wrk -t1 -c64`, one worker thread, "
                  f"{len(next(iter(data['overhead']['rounds'].values())))} interleaved rounds, medians; the floor is "
                  "the app awaited in a loop with no server (asyncio), median of alternating runs.", "",
                  "| | req/s (min-max) | p99 ms | Python thread CPU per request | floor, CPU µs per call |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        ft_name, gil_name = "peregrine --free-threaded --workers 1, 3.13t", "peregrine --workers 1, 3.13 (GIL)"
        for name, label in ((ft_name, "3.13t"), (gil_name, "3.13 (GIL)")):
            v = s[name]
            lines.append(f"| {name} | {v['rps']:.0f} ({v['rps_min']:.0f}-{v['rps_max']:.0f}) | {v['p99_ms']:.1f} | "
                         f"{v['py_cpu_us_per_req']:.1f} µs | {fl[label]['us_per_call']:.1f} |")
        rps = s[ft_name]["rps"] / s[gil_name]["rps"]
        floor = fl["3.13t"]["us_per_call"] / fl["3.13 (GIL)"]["us_per_call"]
        targets.append(("hello req/s, free-threaded 3.13t / 3.13 with the GIL", f"{rps:.2f}x", "(reported)", None))
        py = s[ft_name]["py_cpu_us_per_req"] / s[gil_name]["py_cpu_us_per_req"]
        targets.append(("hello, Python thread CPU per request, 3.13t / 3.13 with the GIL", f"{py:.2f}x", "(reported)", None))
        targets.append(("app alone, CPU µs per call, 3.13t / 3.13 with the GIL", f"{floor:.2f}x", "(reported)", None))
        lines.append("")
    lines += ["| figure | value | target | |", "| --- | ---: | ---: | --- |"]
    for label, value, target, ok in targets:
        lines.append(f"| {label} | {value} | {target} | {'' if ok is None else verdict(ok)} |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
