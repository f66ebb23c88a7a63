"""bench/shared-store: what --shared-store costs on the request path, side by side in one run.

Servers, one worker each, on ports of their own, in two phases (the rate limit's pair, then the cache's three), with the FastAPI app of
bench/apps/cache_app.py and Debian's redis-server (persistence off) on loopback:

- limit-local   --rate-limit 1000000/s: every request is counted (in shared memory) and none refused;
- limit-store   the same with --shared-store: every request is counted in Redis, one script per request;
- cache-local   --cache-size 64: /cached/item is a hit in the host's memory, /uncached/item a miss;
- cache-store   --cache-size 1 --cache-max-object 64 --shared-store: its local layer holds 256 entries, so a load cycling through
                20,000 URLs (/cached/many/N, stored beforehand through a third server, cache-filler) is
                answered from Redis (and copied into the local layer, evicting);
- cache-filler  --cache-size 64 --shared-store: stores the 20,000 entries in Redis before the loads.

Loads: limit-local and limit-store on / (the application answers each), cache-local-hit, cache-store-hit,
cache-miss (/uncached/item on cache-local). Each runs once for warm-up (discarded), then the loads take
turns round by round; the figures are medians over the rounds. Targets (issue 34): the shared limit costs
at most 10 % (limit-store / limit-local >= 0.90); the store's hits are reported against local hits and
against misses.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as c  # noqa: E402

PATHS = 20_000
MANY_SCRIPT = c.BENCH_DIR / "lib" / "wrk_many_paths.lua"
# load: (server, path or None for the many-paths script)
LOADS = {"limit-local": ("limit-local", "/"),
         "limit-store": ("limit-store", "/"),
         "cache-local-hit": ("cache-local", "/cached/item"),
         "cache-store-hit": ("cache-store", None),
         "cache-miss": ("cache-local", "/uncached/item")}
PHASES = [("limit-local", "limit-store"), ("cache-local", "cache-store", "cache-filler")]
TARGETS = [("limit-store", "limit-local", 0.90), ("cache-store-hit", "cache-miss", None), ("cache-store-hit", "cache-local-hit", None)]


def servers(store: str) -> dict[str, list[str]]:
    return {"limit-local": ["--rate-limit", "1000000/s"],
            "limit-store": ["--rate-limit", "1000000/s", "--shared-store", store],
            "cache-local": ["--cache-size", "64"],
            "cache-store": ["--cache-size", "1", "--cache-max-object", "64", "--shared-store", store],
            "cache-filler": ["--cache-size", "64", "--shared-store", store]}


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/shared-store", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a smoke run: 3 rounds of 2 s, 1 s of warm-up")
    p.add_argument("--rounds", type=int, default=5, help="rounds; the figures are the medians")
    p.add_argument("--duration", type=float, default=6, help="measured seconds of each load")
    p.add_argument("--warmup", type=float, default=8, help="seconds of discarded load per load")
    p.add_argument("--conns", type=int, default=64, help="wrk connections")
    p.add_argument("--timeout", type=float, default=10, help="wrk's per-request timeout in seconds")
    p.add_argument("--out", type=Path, default=c.RESULTS_DIR, help="directory for the JSON and Markdown results")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.duration, args.warmup = 3, 2, 1
    return args


def fill(port: int) -> None:
    """Stores /cached/many/0 .. PATHS-1 through the filler, 8 connections at a time."""
    def part(start: int) -> None:
        conn = http.client.HTTPConnection(c.HOST, port, timeout=10)
        for n in range(start, PATHS, 8):
            conn.request("GET", f"/cached/many/{n}")
            answer = conn.getresponse()
            answer.read()
            if answer.status != 200:
                raise RuntimeError(f"/cached/many/{n} answered {answer.status}")
        conn.close()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(part, range(8)))


def main(argv=None) -> int:
    args = parse_args(argv)
    c.install_cleanup()
    c.raise_nofile()
    for tool in ("wrk", "redis-server"):
        if not shutil.which(tool):
            c.log(f"bench: {tool} is not installed (Debian: apt-get install {tool})")
            return 1
    stamp = c.timestamp()
    args.out.mkdir(parents=True, exist_ok=True)
    log_dir = args.out / f"shared-store-{stamp}-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    machine = c.describe_run(build=True)
    if machine is None:
        return 1
    machine["redis"] = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="bench-shared-store-"))
    redis_port = c.free_port()
    store = f"redis://{c.HOST}:{redis_port}"
    options = servers(store)
    ports = {name: c.free_port() for name in options}
    procs: dict[str, c.Proc] = {}
    results: dict = {}
    complete = False
    os.environ["BENCH_PATHS"] = str(PATHS)
    os.environ["BENCH_WRK_REPORT"] = str(c.WRK_LUA)
    try:
        procs["redis"] = c.Proc("redis", ["redis-server", "--port", str(redis_port), "--bind", c.HOST, "--save", "",
                                          "--appendonly", "no", "--dir", str(work)], log_path=log_dir / "redis.log")
        deadline = time.monotonic() + 10
        while subprocess.run(["redis-cli", "-p", str(redis_port), "ping"], capture_output=True, text=True).stdout.strip() != "PONG":
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not answer")
            time.sleep(0.1)
        def measure(load: str, duration: float) -> dict:
            server, path = LOADS[load]
            root = procs[server].pid
            url = f"http://{c.HOST}:{ports[server]}{path or '/'}"
            return c.measure_wrk(root, url, args.conns, duration, args.timeout, (), None if path else MANY_SCRIPT)

        # Two phases, each with only its own servers running: on 2 cores, three more idle servers and the
        # cache loads between the rate limit's cost the rate limit's pair unevenly (0.85x with all five
        # running, about 1.0x with the pair alone, both measured on 2026-12-07).
        for phase in PHASES:
            for name in phase:
                procs[name] = c.start_logged(name, [str(c.PEREGRINE), "--venv", str(c.VENV), "--port", str(ports[name]),
                                                    "--log-level", "warning", *options[name], "cache_app:app"], ports[name], log_dir)
            if "cache-filler" in phase:
                began = time.monotonic()
                fill(ports["cache-filler"])
                c.log(f"bench: stored {PATHS} entries in Redis through cache-filler in {time.monotonic() - began:.1f} s")
            loads = [load for load, (server, _) in LOADS.items() if server in phase]
            for load in loads:
                c.log(f"bench: warming up {load}: {args.warmup:g} s, discarded")
                measure(load, args.warmup)
            for rnd in range(1, args.rounds + 1):
                for load in loads:
                    time.sleep(0.5)
                    m = measure(load, args.duration)
                    m["round"] = rnd
                    results.setdefault(load, []).append(m)
                    c.log(f"round {rnd}/{args.rounds}  {load:<16} {m['rps']:>9.0f} req/s  p99 {m['p99_ms']:7.2f} ms  "
                          f"errors {m['error_total']}  CPU {c.fmt(m['cpu_s_per_1k'], 3)} s/1k")
            for name in phase:
                procs.pop(name).stop()
        hits = subprocess.run(["redis-cli", "-p", str(redis_port), "info", "stats"], capture_output=True, text=True).stdout
        machine["redis_stats"] = {k: v for k, v in (line.split(":", 1) for line in hits.splitlines() if ":" in line)
                                  if k in ("total_commands_processed", "keyspace_hits", "keyspace_misses")}
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
            ratios.append({"candidate": cand, "baseline": base, "ratio": ratio, "target": minimum,
                           "met": None if minimum is None else ratio >= minimum})
    lines = [f"### The shared store, one worker each ({machine['started']})", ""]
    if not complete:
        lines += ["**Interrupted: partial results.**", ""]
    lines += [c.machine_markdown(machine), f"{machine['redis']}.", "",
              f"`wrk -t1 -c{args.conns}`, {args.rounds} interleaved rounds of {args.duration:g} s after {args.warmup:g} s "
              "of warm-up; medians. CPU is the server's process tree (the application included), not Redis's.", "",
              "| Load | Req/s | p99 (ms) | Errors | CPU s / 1k req | Python thread busy | Peak RSS (MiB) |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for load in LOADS:
        r = summary.get(load)
        if not r:
            lines.append(f"| {load} | no results | | | | | |")
            continue
        busy = "—" if r["py_busy"] is None else f"{r['py_busy'] * 100:.1f} %"
        lines.append(f"| {load} | {r['rps']:,.0f} | {c.fmt(r['p99_ms'], 2)} | {r['errors']:g} | {c.fmt(r['cpu_s_per_1k'], 3)} | "
                     f"{busy} | {r['peak_rss_mib']:.0f} |")
    lines += ["", "| Ratio | Req/s | Target |", "| --- | ---: | --- |"]
    for r in ratios:
        target = "—" if r["target"] is None else f">= {r['target']:g}: {'met' if r['met'] else 'not met'}"
        lines.append(f"| {r['candidate']} / {r['baseline']} | {r['ratio']:.2f}x | {target} |")
    result = {"machine": machine, "complete": complete, "settings": {k: str(v) for k, v in vars(args).items()},
              "rounds": results, "summary": summary, "ratios": ratios}
    c.write_results(args.out, f"shared-store-{stamp}", result, "\n".join(lines) + "\n", f"Server logs: {log_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
