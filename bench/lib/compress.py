"""bench/compress: what --compress costs Peregrine, and Peregrine's compression against Starlette's GZipMiddleware.

Four servers at once, one worker each, on bench/apps/compress_app.py (GET /json: 100 KiB of JSON):

- peregrine           Peregrine, no compression;
- peregrine-compress  Peregrine --compress (in the server's I/O threads);
- uvicorn             uvicorn (httptools, uvloop), no compression;
- uvicorn-gzip        uvicorn with the app under GZipMiddleware (gzip in the Python thread).

Loads are wrk -t1 -c64 with an Accept-Encoding header; every load runs once for warm-up, then the loads take
turns round by round, and the figures are medians over the rounds. The issue's target: with compression on,
Peregrine's requests per second stay within 10 % of its own figure with compression off.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as c  # noqa: E402

TARGET = 0.90


@dataclass
class Server:
    name: str
    port: int = 0
    proc: c.Proc | None = None

    def command(self) -> list[str]:
        p = str(self.port)
        if self.name.startswith("peregrine"):
            cmd = [str(c.PEREGRINE), "--venv", str(c.VENV), "--port", p, "--log-level", "warning"]
            return cmd + (["--compress"] if self.name == "peregrine-compress" else []) + ["compress_app:app"]
        target = "compress_app:gzip_app" if self.name == "uvicorn-gzip" else "compress_app:app"
        return [str(c.VENV / "bin" / "uvicorn"), target, "--host", c.HOST, "--port", p, "--workers", "1",
                "--http", "httptools", "--loop", "uvloop", "--no-access-log", "--log-level", "warning"]


@dataclass(frozen=True)
class Load:
    key: str
    server: str
    accept: str
    label: str


LOADS = [
    Load("plain", "peregrine", "gzip", "Peregrine, no --compress"),
    Load("gzip", "peregrine-compress", "gzip", "Peregrine --compress, gzip"),
    Load("br", "peregrine-compress", "br", "Peregrine --compress, br"),
    Load("zstd", "peregrine-compress", "zstd", "Peregrine --compress, zstd"),
    Load("uvicorn", "uvicorn", "gzip", "uvicorn, no compression"),
    Load("uvicorn-gzip", "uvicorn-gzip", "gzip", "uvicorn + GZipMiddleware, gzip"),
]

# (numerator, denominator, what it says, minimum or None)
RATIOS = [
    ("gzip", "plain", "Peregrine gzip / Peregrine uncompressed", TARGET),
    ("br", "plain", "Peregrine br / Peregrine uncompressed", TARGET),
    ("zstd", "plain", "Peregrine zstd / Peregrine uncompressed", TARGET),
    ("gzip", "uvicorn-gzip", "Peregrine gzip / uvicorn + GZipMiddleware", None),
    ("uvicorn-gzip", "uvicorn", "uvicorn + GZipMiddleware / uvicorn uncompressed", None),
]


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/compress", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a smoke run: 3 rounds of 2 s, 2 s of warm-up")
    p.add_argument("--rounds", type=int, default=5, help="rounds; the figures are the medians (default 5)")
    p.add_argument("--duration", type=float, default=8, help="measured seconds of each load (default 8)")
    p.add_argument("--warmup", type=float, default=5, help="seconds of discarded load per load before round 1")
    p.add_argument("--conns", type=int, default=64, help="wrk -c (default 64)")
    p.add_argument("--pause", type=float, default=1, help="seconds of rest between two loads")
    p.add_argument("--out", type=Path, default=c.RESULTS_DIR, help="directory for the JSON and Markdown results")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.duration, args.warmup = 3, 2, 2
    return args


def compressed_size(server: Server, accept: str) -> tuple[str | None, int]:
    """(Content-Encoding, body bytes) of one GET /json with that Accept-Encoding: what the load really gets."""
    import http.client
    conn = http.client.HTTPConnection(c.HOST, server.port, timeout=10)
    try:
        conn.request("GET", "/json", headers={"Accept-Encoding": accept})
        r = conn.getresponse()
        return r.getheader("content-encoding"), len(r.read())
    finally:
        conn.close()


def fmt(v, digits=1):
    return "-" if v is None else f"{v:,.{digits}f}"


def main(argv=None) -> int:
    args = parse_args(argv)
    c.install_cleanup()
    c.raise_nofile()
    machine = c.describe_run()
    if machine is None:
        return 1
    servers = {name: Server(name) for name in ("peregrine", "peregrine-compress", "uvicorn", "uvicorn-gzip")}
    log_dir = Path(tempfile.mkdtemp(prefix="bench-compress-"))
    for s in servers.values():
        s.port = c.free_port()
        s.proc = c.Proc(s.name, s.command(), cwd=c.APPS_DIR, env=c.child_env(), log_path=log_dir / f"{s.name}.log")
        c.wait_ready(s.proc, s.port, timeout=60)
    sizes = {load.key: compressed_size(servers[load.server], load.accept) for load in LOADS}
    for load in LOADS:
        c.log(f"bench: {load.label}: Content-Encoding {sizes[load.key][0]}, {sizes[load.key][1]:,} bytes")
    headers = {load.key: (f"Accept-Encoding: {load.accept}",) for load in LOADS}
    url = {load.key: f"http://{c.HOST}:{servers[load.server].port}/json" for load in LOADS}
    for load in LOADS:
        c.wrk_summary(url[load.key], args.conns, args.warmup, 2, headers[load.key])
    rounds = {load.key: [] for load in LOADS}
    for n in range(args.rounds):
        for load in LOADS:
            time.sleep(args.pause)
            m = c.measure_wrk(servers[load.server].proc.pid, url[load.key], args.conns, args.duration, 2, headers[load.key])
            m.pop("rss_samples", None)
            rounds[load.key].append(m)
            c.log(f"bench: round {n + 1} {load.label}: {m['rps']:,.0f} req/s, p99 {m['p99_ms']:.1f} ms")
    summary = {key: c.summarize_rounds(ok) for key, ok in rounds.items()}
    # Compressing must cost the Python thread nothing: its CPU per request, with and without --compress.
    for key, ok in rounds.items():
        per_request = [m["py_cpu_us_per_req"] for m in ok if m.get("py_cpu_us_per_req") is not None]
        summary[key]["py_cpu_us_per_req"] = statistics.median(per_request) if per_request else None
    lines = ["# bench/compress", "", c.machine_markdown(machine), "",
             f"GET /json, 100 KiB of JSON; wrk -t1 -c{args.conns}, {args.rounds} rounds of {args.duration:g} s, medians.", "",
             "| load | encoding | body bytes | req/s | p50 ms | p99 ms | CPU s / 1k req | Python thread µs / req | errors |",
             "|---|---|---|---|---|---|---|---|---|"]
    for load in LOADS:
        s, (coding, size) = summary[load.key], sizes[load.key]
        lines.append(f"| {load.label} | {coding or 'identity'} | {size:,} | {fmt(s['rps'], 0)} | {fmt(s['p50_ms'])} | "
                     f"{fmt(s['p99_ms'])} | {fmt(s['cpu_s_per_1k'], 2)} | {fmt(s['py_cpu_us_per_req'])} | {fmt(s['errors'], 0)} |")
    lines += ["", "| ratio | value | target |", "|---|---|---|"]
    comparisons = []
    for num, den, what, minimum in RATIOS:
        a, b = summary[num]["rps"], summary[den]["rps"]
        ratio = a / b if a and b else None
        verdict = "" if minimum is None else ("PASS" if ratio is not None and ratio >= minimum else "FAIL")
        comparisons.append({"what": what, "ratio": ratio, "minimum": minimum, "verdict": verdict})
        lines.append(f"| {what} | {fmt(ratio, 2)} | {'' if minimum is None else f'>= {minimum:.2f} {verdict}'} |")
    data = {"machine": machine, "args": {k: str(v) for k, v in vars(args).items()}, "sizes": sizes,
            "rounds": rounds, "summary": summary, "ratios": comparisons}
    c.write_results(args.out, "compress-" + c.timestamp(), data, "\n".join(lines) + "\n")
    for s in servers.values():
        s.proc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
