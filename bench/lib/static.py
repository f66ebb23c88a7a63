"""bench/static: Peregrine's --static-dir against nginx, Starlette's StaticFiles under uvicorn and Flask's static
route under gunicorn, on a 1 KiB file, a 64 KiB file and a 100 MiB file.

All four servers run at once, each on its own port, serving one directory made in a temporary folder:

- peregrine   --static-dir /static=DIR in front of the FastAPI app of bench/apps (sendfile on plain HTTP/1.1);
- nginx       Debian's package, worker_processes 1, sendfile on, tcp_nopush on, access_log off: the reference;
- uvicorn     Starlette's StaticFiles mounted at /static (httptools, uvloop), as a FastAPI user without a proxy;
- gunicorn    Flask's static route (sync worker), as a Flask user without a proxy. whitenoise, the usual choice
              for Django and Flask, is not on this machine's package mirror.

Each load runs once for warm-up (discarded), then the loads take turns round by round (A B C ... A B C ...);
the figures are medians over the rounds. Small files are measured in requests per second, the large one in
bytes per second. See bench/README.md.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as c  # noqa: E402

FILES = {"1k": ("small.css", 1024), "64k": ("medium.js", 64 * 1024), "100m": ("large.bin", 100 * 1024 * 1024)}
SERVER_NAMES = ("peregrine", "nginx", "uvicorn", "gunicorn")
# (file, candidate, baseline, figure, minimum): issue 16's targets.
TARGETS = [
    ("1k", "peregrine", "nginx", "rps", 0.8), ("64k", "peregrine", "nginx", "rps", 0.8),
    ("100m", "peregrine", "nginx", "bytes_per_s", 0.9),
] + [(f, "peregrine", base, "rps" if f != "100m" else "bytes_per_s", 5.0)
     for f in FILES for base in ("uvicorn", "gunicorn")]

NGINX_CONF = """\
worker_processes 1;
daemon off;
master_process on;
{user}
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    sendfile on;
    tcp_nopush on;
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    types {{ text/css css; application/javascript js; application/octet-stream bin; }}
    server {{
        listen {host}:{port};
        location = / {{ return 200 ""; }}
        location /static/ {{ alias {files}/; }}
    }}
}}
"""


@dataclass
class Server:
    name: str
    port: int = 0
    proc: c.Proc | None = None
    error: str | None = None

    def command(self, files: Path, work: Path) -> list[str]:
        p = str(self.port)
        if self.name == "peregrine":
            return [str(c.PEREGRINE), "--venv", str(c.VENV), "--port", p, "--log-level", "warning",
                    "--static-dir", f"/static={files}", "fastapi_app:app"]
        if self.name == "nginx":
            conf = work / "nginx.conf"
            # As root, nginx's worker would run as nobody, who cannot read the temporary directory.
            user = "user root;" if os.geteuid() == 0 else ""
            conf.write_text(NGINX_CONF.format(user=user, dir=work, host=c.HOST, port=p, files=files))
            return [shutil.which("nginx") or "/usr/sbin/nginx", "-c", str(conf), "-p", str(work)]
        if self.name == "uvicorn":
            return [str(c.VENV / "bin" / "uvicorn"), "static_app:asgi", "--host", c.HOST, "--port", p, "--workers", "1",
                    "--http", "httptools", "--loop", "uvloop", "--no-access-log", "--log-level", "warning"]
        if self.name == "gunicorn":
            return [str(c.VENV / "bin" / "gunicorn"), "-w", "1", "-k", "sync", "-b", f"{c.HOST}:{p}",
                    "--log-level", "warning", "static_app:wsgi"]
        raise ValueError(self.name)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bench/static",
        description="Static files: Peregrine --static-dir against nginx (sendfile on, one worker process), "
                    "Starlette StaticFiles under uvicorn and Flask's static route under gunicorn, on a 1 KiB, a 64 KiB "
                    "and a 100 MiB file, wrk -t1; interleaved rounds, medians of req/s and bytes/s, ratios against "
                    "issue 16's targets. Writes bench/results/static-<timestamp>.json and .md.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a smoke run: 3 rounds of 2 s, 1 s of warm-up")
    p.add_argument("--rounds", type=int, default=5, help="rounds; the figures are the medians")
    p.add_argument("--duration", type=float, default=6, help="measured seconds of each load")
    p.add_argument("--warmup", type=float, default=3, help="seconds of discarded load per server and file")
    p.add_argument("--conns", type=int, default=64, help="wrk connections for the small files")
    p.add_argument("--large-conns", type=int, default=4, help="wrk connections for the 100 MiB file")
    p.add_argument("--timeout", type=float, default=10, help="wrk's per-request timeout in seconds")
    p.add_argument("--servers", default=",".join(SERVER_NAMES), help="comma-separated, among " + ", ".join(SERVER_NAMES))
    p.add_argument("--out", type=Path, default=c.RESULTS_DIR, help="directory for the JSON and Markdown results")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.duration, args.warmup = 3, 2, 1
    args.servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    unknown = [s for s in args.servers if s not in SERVER_NAMES]
    if unknown:
        p.error(f"unknown server {unknown[0]!r}")
    return args


def make_files(directory: Path) -> None:
    for name, size in FILES.values():
        with open(directory / name, "wb") as f:
            block = os.urandom(min(size, 1 << 20))
            written = 0
            while written < size:
                f.write(block[: size - written])
                written += len(block)


def start(server: Server, files: Path, work: Path, log_dir: Path) -> None:
    server.port = c.free_port()
    cmd = server.command(files, work)
    c.log(f"bench: starting {server.name} on port {server.port}: {' '.join(cmd)}")
    try:
        server.proc = c.Proc(server.name, cmd, cwd=c.APPS_DIR, env=c.child_env(BENCH_STATIC_DIR=str(files)),
                             log_path=log_dir / f"{server.name}.log")
        c.wait_ready(server.proc, server.port)
        for key, (name, size) in FILES.items():
            status, body = c.http_get(server.port, f"/static/{name}", timeout=30)
            if status != 200 or len(body) != size:
                raise RuntimeError(f"GET /static/{name} answered {status} with {len(body)} bytes, not 200 with {size}")
    except Exception as e:  # report it and go on with the others
        server.error = f"failed to start: {e}"
        c.log(f"bench: {server.name} {server.error}")
        if server.proc:
            server.proc.stop()


def measure(server: Server, key: str, args, duration: float) -> dict:
    name, _ = FILES[key]
    conns = args.large_conns if key == "100m" else args.conns
    return c.measure_wrk(server.proc.pid, f"http://{c.HOST}:{server.port}/static/{name}", conns, duration, args.timeout)


def fmt(v, digits=1, suffix=""):
    return "—" if v is None else f"{v:,.{digits}f}{suffix}"


def main(argv=None) -> int:
    args = parse_args(argv)
    c.install_cleanup()
    c.raise_nofile()
    for tool in ("wrk", "nginx"):
        if not shutil.which(tool) and not (tool == "nginx" and Path("/usr/sbin/nginx").exists()):
            c.log(f"bench: {tool} is not installed (Debian: apt-get install {tool})")
            return 1
    stamp = c.timestamp()
    args.out.mkdir(parents=True, exist_ok=True)
    log_dir = args.out / f"static-{stamp}-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    machine = c.describe_run(build="peregrine" in args.servers)
    if machine is None:
        return 1
    machine["nginx"] = subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip()
    work = Path(tempfile.mkdtemp(prefix="bench-static-"))
    files = work / "files"
    files.mkdir()
    make_files(files)
    servers = [Server(name) for name in args.servers]
    results: dict = {}
    complete = False
    try:
        for s in servers:
            start(s, files, work, log_dir)
        live = [s for s in servers if not s.error]
        for key in FILES:
            for s in live:
                c.log(f"bench: warming up {s.name} on {key}: {args.warmup:g} s, discarded")
                measure(s, key, args, args.warmup)
        for rnd in range(1, args.rounds + 1):
            for key in FILES:
                for s in live:
                    if not s.proc.alive():
                        s.error = f"exited with status {s.proc.popen.returncode}"
                        continue
                    time.sleep(0.5)
                    m = measure(s, key, args, args.duration)
                    m["round"] = rnd
                    results.setdefault(f"{s.name}/{key}", []).append(m)
                    c.log(f"round {rnd}/{args.rounds}  {s.name:<10} {key:<5} {m['rps']:>9.0f} req/s  "
                          f"{m['bytes_per_s'] / 2**20:>9.1f} MiB/s  p99 {m['p99_ms']:7.2f} ms  errors {m['error_total']}  "
                          f"RSS {m['peak_rss_mib']:5.0f} MiB")
        complete = True
    except KeyboardInterrupt:
        c.log("bench: interrupted: writing the partial results")
    finally:
        c.stop_all()
        shutil.rmtree(work, ignore_errors=True)

    summary = {}
    for key, rounds in results.items():
        summary[key] = c.summarize_rounds(rounds, extra=("bytes_per_s",))
    ratios = []
    for f, cand, base, figure, minimum in TARGETS:
        a, b = summary.get(f"{cand}/{f}"), summary.get(f"{base}/{f}")
        if a and b and b[figure]:
            ratio = a[figure] / b[figure]
            ratios.append({"file": f, "candidate": cand, "baseline": base, "figure": figure, "ratio": ratio,
                           "target": minimum, "met": ratio >= minimum})
    lines = [f"### Static files, one worker each ({machine['started']})", ""]
    if not complete:
        lines += ["**Interrupted: partial results.**", ""]
    lines += [c.machine_markdown(machine), f"{machine['nginx']}.", "",
              f"`wrk -t1 -c{args.conns}` on the 1 KiB and 64 KiB files, `wrk -t1 -c{args.large_conns}` on the 100 MiB "
              f"file, {args.rounds} interleaved rounds of {args.duration:g} s after {args.warmup:g} s of warm-up; medians.", "",
              "| Server | File | Req/s | MiB/s | p99 (ms) | Errors | CPU s / 1k req | Peak RSS (MiB) |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for key in FILES:
        for s in servers:
            r = summary.get(f"{s.name}/{key}")
            if not r:
                lines.append(f"| {s.name} | {key} | {(s.error or 'no results').splitlines()[0]} | | | | | |")
                continue
            lines.append(f"| {s.name} | {key} | {r['rps']:,.0f} | {r['bytes_per_s'] / 2**20:,.1f} | {fmt(r['p99_ms'], 2)} | "
                         f"{r['errors']:g} | {fmt(r['cpu_s_per_1k'], 3)} | {r['peak_rss_mib']:.0f} |")
    lines += ["", "| File | Ratio | Figure | Ratio | Target |", "| --- | --- | --- | ---: | --- |"]
    for r in ratios:
        lines.append(f"| {r['file']} | {r['candidate']} / {r['baseline']} | {r['figure']} | {r['ratio']:.2f}x | "
                     f">= {r['target']:g}: {'met' if r['met'] else 'not met'} |")
    result = {"machine": machine, "complete": complete, "settings": {k: str(v) for k, v in vars(args).items()},
              "servers": {s.name: {"port": s.port, "error": s.error} for s in servers},
              "rounds": results, "summary": summary, "ratios": ratios}
    c.write_results(args.out, f"static-{stamp}", result, "\n".join(lines) + "\n", f"Server logs: {log_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
