"""bench/cache: Peregrine's response cache on a FastAPI route, against the route uncached and against nginx's
proxy_cache in front of uvicorn; and the rate limit's 429 answers.

Servers, one worker each, all running at once on ports of their own:

- peregrine   --cache-size 64, the FastAPI app of bench/apps/cache_app.py: /cached/item says max-age=300 and is
              answered from the cache, /uncached/item says no-store and goes to the application every time;
- peregrine-br     the same with --compress --compress-min-size 0 (the JSON body is under the default 1 KiB),
              so that a client taking br is answered from the cache's stored br variant;
- peregrine-limited  --rate-limit 1/h --rate-limit-burst 1: readiness spends the budget, every request of
              the load is then a 429 from the I/O thread;
- nginx       Debian's package, worker_processes 1, proxy_cache (keys_zone 10m, max_size 64m) in front of
- uvicorn     the same app (httptools, uvloop, one worker), which nginx calls once per cached entry.

Loads: peregrine-hit (/cached/item), peregrine-uncached (/uncached/item), nginx-hit (/cached/item through
proxy_cache), peregrine-br-hit (/cached/item with Accept-Encoding: br), peregrine-429 (/uncached/item, all
refused). Each runs once for warm-up (discarded, which also fills the caches), then the loads take turns
round by round; the figures are medians over the rounds. For Peregrine the Python thread's CPU over each
load is read from /proc/PID/task/*/stat (the thread named "python"): on hits and 429s it should stay idle.
Targets (issue 17): hits at least 5x the uncached rate, and at least 1.0x nginx plus uvicorn on hits.
"""
from __future__ import annotations

import argparse
import http.client
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as c  # noqa: E402

# load: (server, path, request headers, what a good answer is)
LOADS = {"peregrine-hit": ("peregrine", "/cached/item", (), 200),
         "peregrine-uncached": ("peregrine", "/uncached/item", (), 200),
         "nginx-hit": ("nginx", "/cached/item", (), 200),
         "peregrine-br-hit": ("peregrine-br", "/cached/item", ("Accept-Encoding: br",), 200),
         "peregrine-429": ("peregrine-limited", "/uncached/item", (), 429)}
PEREGRINE_SERVERS = {"peregrine": ["--cache-size", "64"],
                     "peregrine-br": ["--cache-size", "64", "--compress", "--compress-min-size", "0"],
                     "peregrine-limited": ["--rate-limit", "1/h", "--rate-limit-burst", "1"]}
TARGETS = [("peregrine-hit", "peregrine-uncached", 5.0), ("peregrine-hit", "nginx-hit", 1.0)]

NGINX_CONF = """\
worker_processes 1;
daemon off;
master_process on;
{user}
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    proxy_cache_path {dir}/cache keys_zone=bench:10m max_size=64m;
    upstream app {{ server {host}:{upstream}; keepalive 32; }}
    server {{
        listen {host}:{port};
        location / {{
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache bench;
            proxy_cache_lock on;
            add_header X-Cache-Status $upstream_cache_status;
        }}
    }}
}}
"""


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/cache", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a smoke run: 3 rounds of 2 s, 1 s of warm-up")
    p.add_argument("--rounds", type=int, default=5, help="rounds; the figures are the medians")
    p.add_argument("--duration", type=float, default=6, help="measured seconds of each load")
    p.add_argument("--warmup", type=float, default=10, help="seconds of discarded load per load (the JIT compiles the hit path meanwhile)")
    p.add_argument("--conns", type=int, default=64, help="wrk connections")
    p.add_argument("--timeout", type=float, default=10, help="wrk's per-request timeout in seconds")
    p.add_argument("--out", type=Path, default=c.RESULTS_DIR, help="directory for the JSON and Markdown results")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.duration, args.warmup = 3, 2, 1
    return args


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
    log_dir = args.out / f"cache-{stamp}-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    machine = c.describe_run(build=True)
    if machine is None:
        return 1
    machine["nginx"] = subprocess.run([shutil.which("nginx") or "/usr/sbin/nginx", "-v"], capture_output=True, text=True).stderr.strip()
    work = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    ports = {name: c.free_port() for name in (*PEREGRINE_SERVERS, "uvicorn", "nginx")}
    procs: dict[str, c.Proc] = {}
    results: dict = {}
    complete = False
    try:
        for name, options in PEREGRINE_SERVERS.items():
            procs[name] = c.start_logged(name, [str(c.PEREGRINE), "--venv", str(c.VENV), "--port", str(ports[name]),
                                       "--log-level", "warning", *options, "cache_app:app"], ports[name], log_dir)
        procs["uvicorn"] = c.start_logged("uvicorn", [str(c.VENV / "bin" / "uvicorn"), "cache_app:app", "--host", c.HOST, "--port",
                                             str(ports["uvicorn"]), "--workers", "1", "--http", "httptools", "--loop", "uvloop",
                                             "--no-access-log", "--log-level", "warning"], ports["uvicorn"], log_dir)
        conf = work / "nginx.conf"
        user = "user root;" if os.geteuid() == 0 else ""
        conf.write_text(NGINX_CONF.format(user=user, dir=work, host=c.HOST, port=ports["nginx"], upstream=ports["uvicorn"]))
        procs["nginx"] = c.start_logged("nginx", [shutil.which("nginx") or "/usr/sbin/nginx", "-c", str(conf), "-p", str(work)],
                               ports["nginx"], log_dir)

        def measure(load: str, duration: float) -> dict:
            server, path, headers, expected = LOADS[load]
            root = procs[server].pid
            m = c.measure_wrk(root, f"http://{c.HOST}:{ports[server]}{path}", args.conns, duration, args.timeout, headers)
            if expected >= 400:
                # wrk counts every answer >= 400 as an error: here those are the point, and any other answer is the error.
                refused = m["errors"]["status_ge_400"]
                m["error_total"] += m["requests"] - 2 * refused
            return m

        # Two requests of each load before it runs, logged: the second shows what the load gets (a hit, a 429).
        for load, (server, path, headers, expected) in LOADS.items():
            for _ in range(2):
                conn = http.client.HTTPConnection(c.HOST, ports[server], timeout=5)
                conn.request("GET", path, headers=dict(h.split(": ", 1) for h in headers))
                answer = conn.getresponse()
                answer.read()
                conn.close()
                c.log(f"bench: {load}: {answer.status}, Content-Encoding {answer.getheader('content-encoding', '-')}, "
                      f"Cache-Status {answer.getheader('cache-status', '-')}, X-Cache-Status {answer.getheader('x-cache-status', '-')}")
            if answer.status != expected:
                raise RuntimeError(f"{load} answered {answer.status}, not {expected}")

        for load in LOADS:
            c.log(f"bench: warming up {load}: {args.warmup:g} s, discarded")
            measure(load, args.warmup)
        for rnd in range(1, args.rounds + 1):
            for load in LOADS:
                time.sleep(0.5)
                m = measure(load, args.duration)
                m["round"] = rnd
                results.setdefault(load, []).append(m)
                py = "" if m["py_busy"] is None else f"  python thread {m['py_busy'] * 100:4.1f} %"
                c.log(f"round {rnd}/{args.rounds}  {load:<20} {m['rps']:>9.0f} req/s  p99 {m['p99_ms']:7.2f} ms  "
                      f"errors {m['error_total']}  RSS {m['peak_rss_mib']:5.0f} MiB{py}")
        complete = True
    except KeyboardInterrupt:
        c.log("bench: interrupted: writing the partial results")
    finally:
        c.stop_all()
        shutil.rmtree(work, ignore_errors=True)

    summary = {load: c.summarize_rounds(rounds, ("py_busy", "py_cpu_us_per_req")) for load, rounds in results.items()}
    ratios = []
    for cand, base, minimum in TARGETS:
        a, b = summary.get(cand), summary.get(base)
        if a and b and b["rps"]:
            ratio = a["rps"] / b["rps"]
            ratios.append({"candidate": cand, "baseline": base, "ratio": ratio, "target": minimum, "met": ratio >= minimum})
    lines = [f"### Response cache, one worker each ({machine['started']})", ""]
    if not complete:
        lines += ["**Interrupted: partial results.**", ""]
    lines += [c.machine_markdown(machine), f"{machine['nginx']}.", "",
              f"`wrk -t1 -c{args.conns}`, {args.rounds} interleaved rounds of {args.duration:g} s after {args.warmup:g} s "
              "of warm-up; medians. The uncached load and nginx's figures include the application's CPU (the process "
              "tree of the server measured). Errors are answers other than the load's expected status (wrk counts "
              "every status >= 400, so a 429 load's refusals are subtracted) and socket errors. Python thread: its "
              "CPU over the load's wall time, and per request.", "",
              "| Load | Req/s | p99 (ms) | Errors | CPU s / 1k req | Python thread busy | Python µs / req | Peak RSS (MiB) |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for load in LOADS:
        r = summary.get(load)
        if not r:
            lines.append(f"| {load} | no results | | | | | | |")
            continue
        busy = "—" if r["py_busy"] is None else f"{r['py_busy'] * 100:.1f} %"
        lines.append(f"| {load} | {r['rps']:,.0f} | {c.fmt(r['p99_ms'], 2)} | {r['errors']:g} | {c.fmt(r['cpu_s_per_1k'], 3)} | "
                     f"{busy} | {c.fmt(r['py_cpu_us_per_req'], 2)} | {r['peak_rss_mib']:.0f} |")
    lines += ["", "| Ratio | Req/s | Target |", "| --- | ---: | --- |"]
    for r in ratios:
        lines.append(f"| {r['candidate']} / {r['baseline']} | {r['ratio']:.2f}x | >= {r['target']:g}: "
                     f"{'met' if r['met'] else 'not met'} |")
    result = {"machine": machine, "complete": complete, "settings": {k: str(v) for k, v in vars(args).items()},
              "rounds": results, "summary": summary, "ratios": ratios}
    c.write_results(args.out, f"cache-{stamp}", result, "\n".join(lines) + "\n", f"Server logs: {log_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
