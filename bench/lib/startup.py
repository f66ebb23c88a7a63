"""bench/startup: how long a server takes from its start to its first 200, against uvicorn and gunicorn.

For each server and application: the wall time from spawning the command to the first `GET /` answered
with 200 (polled every 5 ms on fresh connections) and the CPU time its process tree had used by then,
then the RSS of the tree once it has served that one request and rested a second. Rounds are interleaved (A B C A B C ...) so that drift on the
machine hits every server alike; the figures are the median, the fastest and the slowest round.

Servers: the pip package's `peregrine` (the newest wheel of target/wheels, installed into the benchmark
venv, with its AOT cache; `--no-wheel` skips it), `bin/peregrine` of the checkout (the JDK, no AOT
cache; `--no-checkout` skips it), uvicorn (httptools, uvloop) for FastAPI, gunicorn (sync worker) for
Flask. Also the time of `peregrine --version`, which is the JVM and Quarkus starting without Python.
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as c  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bench/startup",
        description="Start to first 200 of Peregrine (the wheel and the checkout) against uvicorn and gunicorn, "
                    "FastAPI and Flask hello apps. Writes bench/results/startup-<timestamp>.json and .md.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--rounds", type=int, default=7, help="starts of each server")
    p.add_argument("--wheel", type=Path, help="the wheel to measure (default: the newest in target/wheels)")
    p.add_argument("--no-wheel", action="store_true", help="do not measure the pip package")
    p.add_argument("--no-checkout", action="store_true", help="do not measure bin/peregrine of the checkout")
    p.add_argument("--out", type=Path, default=c.RESULTS_DIR, help="directory for the JSON and Markdown results")
    return p.parse_args(argv)


def first_200(port: int, proc: c.Proc, started: float, timeout: float = 60.0) -> tuple[float, float]:
    """Seconds to the first 200, and the CPU seconds the process tree had used by then."""
    request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    while True:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.log_tail()}")
        try:
            with socket.create_connection((c.HOST, port), timeout=5) as s:
                s.sendall(request)
                if s.recv(12) == b"HTTP/1.1 200":
                    return time.monotonic() - started, c.tree_cpu_seconds(proc.pid)
        except OSError:
            pass
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"{proc.name} gave no 200 within {timeout:.0f} s:\n{proc.log_tail()}")
        time.sleep(0.005)


def commands(args, wheel_command: Path | None) -> dict[str, tuple[list, str]]:
    """{name: (argv with {port} for the port, application)}."""
    checkout = c.ROOT / "bin" / "peregrine"
    found: dict[str, tuple[list, str]] = {}
    for app in ("fastapi_app:app", "flask_app:app"):
        label = app.split("_")[0]
        if wheel_command:
            found[f"peregrine (wheel), {label}"] = ([wheel_command, "--port", "{port}", "--log-level", "warning", app], app)
        if not args.no_checkout:
            found[f"bin/peregrine (JDK, no AOT cache), {label}"] = (
                [checkout, "--venv", c.VENV, "--port", "{port}", "--log-level", "warning", app], app)
    found["uvicorn, fastapi"] = ([c.VENV / "bin" / "uvicorn", "fastapi_app:app", "--host", c.HOST, "--port", "{port}",
                                  "--http", "httptools", "--loop", "uvloop", "--no-access-log", "--log-level",
                                  "warning"], "fastapi_app:app")
    found["gunicorn, flask"] = ([c.VENV / "bin" / "gunicorn", "-b", f"{c.HOST}:{{port}}", "-w", "1", "--log-level",
                                 "warning", "flask_app:app"], "flask_app:app")
    return found


def one_start(name: str, argv: list, log_dir: Path, round_: int) -> dict:
    port = c.free_port()
    cmd = [str(a).replace("{port}", str(port)) for a in argv]
    slug = name.replace(" ", "_").replace("/", "_").replace(",", "").replace("(", "").replace(")", "")
    started = time.monotonic()
    proc = c.Proc(name, cmd, cwd=c.APPS_DIR, env=c.child_env(), log_path=log_dir / f"{slug}-{round_}.log")
    try:
        seconds, cpu = first_200(port, proc, started)
        time.sleep(1.0)
        pids = c.tree_pids(proc.pid)
        return {"first_200_s": seconds, "cpu_s": cpu, "rss_kib": c.tree_rss_kib(proc.pid, pids),
                "pss_kib": c.tree_pss_kib(proc.pid, pids)}
    finally:
        proc.stop()


def version_seconds(command: Path, rounds: int) -> float | None:
    times = []
    for _ in range(rounds):
        started = time.monotonic()
        out = subprocess.run([str(command), "--version"], capture_output=True, timeout=120, env=c.child_env())
        if out.returncode != 0:
            return None
        times.append(time.monotonic() - started)
    return c.median(times)


def main(argv=None) -> int:
    args = parse_args(argv)
    c.install_cleanup()
    stamp = c.timestamp()
    log_dir = args.out / f"startup-{stamp}-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    wheel = None if args.no_wheel else c.use_wheel(args.wheel)
    wheel_command = c.PEREGRINE if wheel else None
    machine = c.describe_run(build=not args.no_checkout or wheel is not None)
    if machine is None:
        return 1
    machine["wheel"] = wheel.name if wheel else None
    if wheel_command:
        java = subprocess.run([str(c.VENV_PY), "-c", "import peregrine._launcher as l; print(l.JAVA)"],
                              capture_output=True, text=True).stdout.strip()
        machine["java"] = c._run_text([java, "-version"]).splitlines()[0]
    servers = commands(args, wheel_command)
    rounds: dict[str, list[dict]] = {name: [] for name in servers}
    try:
        for round_ in range(args.rounds):
            for name, (cmd, _app) in servers.items():
                result = one_start(name, cmd, log_dir, round_)
                rounds[name].append(result)
                c.log(f"bench: round {round_ + 1}/{args.rounds} {name}: first 200 after {result['first_200_s']:.3f} s, "
                      f"RSS {result['rss_kib'] / 1024:.1f} MiB")
        versions = {}
        if wheel_command:
            versions["peregrine (wheel) --version"] = version_seconds(wheel_command, args.rounds)
        if not args.no_checkout:
            versions["bin/peregrine --version"] = version_seconds(c.ROOT / "bin" / "peregrine", args.rounds)
    except KeyboardInterrupt:
        c.log("bench: interrupted")
        versions = {}
    finally:
        c.stop_all()
    machine["loadavg_at_end"] = os.getloadavg()
    summary = {}
    for name, results in rounds.items():
        if results:
            times = [r["first_200_s"] for r in results]
            summary[name] = {"median_s": c.median(times), "min_s": min(times), "max_s": max(times),
                             "cpu_s": c.median([r["cpu_s"] for r in results]),
                             "rounds": len(times), "rss_mib": c.median([r["rss_kib"] for r in results]) / 1024}
    data = {"machine": machine, "rounds": rounds, "summary": summary, "version_s": versions}
    c.write_results(args.out, f"startup-{stamp}", data, markdown(data), f"Logs: {log_dir}")
    return 0


def markdown(data: dict) -> str:
    m = data["machine"]
    lines = [f"### Start to first 200 ({m['started']})", "", c.machine_markdown(m),
             f"Load average at the end: {', '.join(f'{x:.2f}' for x in m['loadavg_at_end'])}. "
             f"Wheel: {m.get('wheel') or 'not measured'}.", "",
             "| server, app | first 200: median | fastest | slowest | CPU used by then | RSS after it, MiB |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, s in data["summary"].items():
        lines.append(f"| {name} | {s['median_s']:.2f} s | {s['min_s']:.2f} s | {s['max_s']:.2f} s | "
                     f"{s['cpu_s']:.2f} s | {s['rss_mib']:.0f} |")
    for name, seconds in data["version_s"].items():
        if seconds is not None:
            lines.append(f"| `{name}` (no Python) | {seconds:.2f} s | | | | |")
    lines += ["", f"Median of {max(s['rounds'] for s in data['summary'].values())} interleaved starts each; the "
              "CPU time (user + system) of the process tree at the first 200, which a busy machine inflates less "
              "than the wall time; RSS of the tree one second later.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
