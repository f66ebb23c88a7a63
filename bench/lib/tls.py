"""bench/tls: what TLS and HTTP/2 cost Peregrine, and Peregrine's HTTPS against uvicorn's, one worker each.

The FastAPI app of bench/apps (GET /user/0) runs under four servers at once, each on its own port:

- peregrine          plain port: HTTP/1.1 with wrk, h2c (prior knowledge) with h2load;
- peregrine-tls      --tls-cert/--tls-key, BoringSSL (netty-tcnative): HTTPS HTTP/1.1 with wrk, h2 with h2load;
- peregrine-tls-jdk  the same with the JDK's TLS (-Dperegrine.tls-provider=jdk), HTTPS HTTP/1.1;
- uvicorn-tls        uvicorn --ssl-certfile/--ssl-keyfile (httptools, uvloop), HTTPS HTTP/1.1: the baseline.

The certificate is a throwaway ECDSA P-256 one made with openssl in a temporary directory. Every load runs
once for warm-up (discarded), then the loads take turns round by round (A B C ... A B C ...) so that drift on
the shared machine hits all of them alike; the figures are medians over the rounds. See bench/README.md.

wrk speaks only HTTP/1.1 (it sends no ALPN, so a TLS server answers it in HTTP/1.1); h2load speaks only
HTTP/2 here. h2load reports latency as min/max/mean/sd and no percentiles, so the p50/p99 columns are wrk's only.
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as c  # noqa: E402

JDK_TLS_OPTION = "-Dperegrine.tls-provider=jdk"
HTTPS_TARGET = 0.85  # "HTTPS within 15 % of our own plain HTTP/1.1"


@dataclass
class Server:
    name: str
    tls: bool
    tls_by: str | None = None     # what Peregrine's startup line "TLS by X" must say
    port: int = 0
    proc: c.Proc | None = None
    error: str | None = None
    startup_s: float | None = None
    tls_session: dict = field(default_factory=dict)

    def command(self, cert: Path, key: Path) -> list[str]:
        p = str(self.port)
        if self.name.startswith("peregrine"):
            # info: the startup lines say which TLS implementation serves; nothing is logged per request.
            cmd = [str(c.PEREGRINE), "--venv", str(c.VENV), "--port", p, "--log-level", "info"]
            if self.tls:
                cmd += ["--tls-cert", str(cert), "--tls-key", str(key)]
            return cmd + ["fastapi_app:app"]
        return [str(c.VENV / "bin" / "uvicorn"), "fastapi_app:app", "--host", c.HOST, "--port", p, "--workers", "1",
                "--http", "httptools", "--loop", "uvloop", "--no-access-log", "--log-level", "warning",
                "--ssl-certfile", str(cert), "--ssl-keyfile", str(key)]

    def env(self) -> dict:
        if self.name != "peregrine-tls-jdk":
            return c.child_env()
        opts = " ".join(x for x in (os.environ.get("PEREGRINE_JAVA_OPTS", ""), JDK_TLS_OPTION) if x)
        return c.child_env(PEREGRINE_JAVA_OPTS=opts)


SERVERS = {
    "peregrine": Server("peregrine", tls=False),
    "peregrine-tls": Server("peregrine-tls", tls=True, tls_by="BoringSSL"),
    "peregrine-tls-jdk": Server("peregrine-tls-jdk", tls=True, tls_by="JDK"),
    "uvicorn-tls": Server("uvicorn-tls", tls=True),
}


@dataclass(frozen=True)
class Load:
    key: str
    server: str
    label: str
    h2: bool = False          # h2load (HTTP/2) rather than wrk (HTTP/1.1)
    multiplexed: bool = False  # h2load -c<N/8> -m8 rather than -c<N> -m1

    def clients_streams(self, conns: int) -> tuple[int, int]:
        if not self.h2:
            return conns, 1
        return (max(1, conns // 8), 8) if self.multiplexed else (conns, 1)

    def describe(self, conns: int) -> str:
        clients, streams = self.clients_streams(conns)
        return f"h2load -c{clients} -m{streams}" if self.h2 else f"wrk -c{clients}"


LOADS = [
    Load("h1", "peregrine", "Peregrine HTTP/1.1"),
    Load("https-h1", "peregrine-tls", "Peregrine HTTPS HTTP/1.1 (BoringSSL)"),
    Load("https-h1-jdk", "peregrine-tls-jdk", "Peregrine HTTPS HTTP/1.1 (JDK TLS)"),
    Load("uvicorn-https-h1", "uvicorn-tls", "uvicorn HTTPS HTTP/1.1"),
    Load("h2c", "peregrine", "Peregrine h2c", h2=True),
    Load("h2c-mux", "peregrine", "Peregrine h2c", h2=True, multiplexed=True),
    Load("h2", "peregrine-tls", "Peregrine h2 (BoringSSL)", h2=True),
    Load("h2-mux", "peregrine-tls", "Peregrine h2 (BoringSSL)", h2=True, multiplexed=True),
    Load("h2-jdk", "peregrine-tls-jdk", "Peregrine h2 (JDK TLS)", h2=True),
    Load("h2-jdk-mux", "peregrine-tls-jdk", "Peregrine h2 (JDK TLS)", h2=True, multiplexed=True),
]
LOADS_BY_KEY = {load.key: load for load in LOADS}
DEFAULT_LOADS = ["h1", "https-h1", "https-h1-jdk", "uvicorn-https-h1", "h2c", "h2c-mux", "h2", "h2-mux"]

# (numerator, denominator, what it says, minimum or None)
RATIOS = [
    ("https-h1", "h1", "Peregrine HTTPS / Peregrine plain HTTP/1.1", HTTPS_TARGET),
    ("https-h1", "uvicorn-https-h1", "Peregrine HTTPS / uvicorn HTTPS", None),
    ("https-h1", "https-h1-jdk", "BoringSSL / JDK TLS, HTTPS HTTP/1.1", None),
    ("h2", "h2-jdk", "BoringSSL / JDK TLS, h2", None),
    ("h2-mux", "h2-jdk-mux", "BoringSSL / JDK TLS, h2 multiplexed", None),
    ("h2c", "h1", "h2c -m1 / plain HTTP/1.1", None),
    ("h2c-mux", "h1", "h2c -m8 / plain HTTP/1.1", None),
    ("h2", "h1", "h2 over TLS -m1 / plain HTTP/1.1", None),
    ("h2-mux", "h1", "h2 over TLS -m8 / plain HTTP/1.1", None),
    ("h2", "https-h1", "h2 over TLS -m1 / HTTPS HTTP/1.1", None),
    ("h2-mux", "https-h1", "h2 over TLS -m8 / HTTPS HTTP/1.1", None),
]


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bench/tls",
        description="What TLS and HTTP/2 cost Peregrine, one worker, on GET /user/0 of the FastAPI app: plain "
                    "HTTP/1.1, HTTPS HTTP/1.1 with BoringSSL and with the JDK's TLS (wrk -t1), h2c and h2 over TLS "
                    "(h2load -t1, one stream per connection and 8 multiplexed), and uvicorn's HTTPS as the "
                    "baseline. A throwaway ECDSA P-256 certificate is made with openssl. Interleaved rounds, "
                    "medians of req/s, latency, errors and CPU seconds per 1,000 requests; prints a table and the "
                    "ratios and writes bench/results/tls-<timestamp>.json and .md. The Peregrine command is "
                    "$PEREGRINE_BIN (default: this checkout's bin/peregrine). A full run takes about 8 minutes.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="a smoke run of about 2 minutes: 3 rounds of 2 s, 2 s of warm-up per load")
    p.add_argument("--rounds", type=int, default=5, help="rounds; the figures are the medians (at least 3)")
    p.add_argument("--duration", type=float, default=8, help="measured seconds of each load")
    p.add_argument("--warmup", type=float, default=5,
                   help="seconds of discarded load of each kind per server before round 1 (the JIT needs several)")
    p.add_argument("--h2-warmup", type=float, default=2,
                   help="h2load's --warm-up-time in every round: seconds of load before it starts counting")
    p.add_argument("--conns", type=int, default=64,
                   help="concurrent requests: wrk -c<N>, h2load -c<N> -m1 and h2load -c<N/8> -m8")
    p.add_argument("--path", default="/user/0", help="request path loaded")
    p.add_argument("--timeout", type=float, default=2, help="wrk's per-request timeout in seconds")
    p.add_argument("--pause", type=float, default=1, help="seconds of rest between two loads")
    p.add_argument("--loads", default=",".join(DEFAULT_LOADS),
                   help="comma-separated loads, among: " + ", ".join(
                       f"{load.key} ({load.label}, {load.describe(64)})" for load in LOADS))
    p.add_argument("--out", type=Path, default=c.RESULTS_DIR, help="directory for the JSON and Markdown results")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.duration, args.warmup, args.h2_warmup = 3, 2, 2, 1
    if args.rounds < 1:
        p.error("--rounds must be at least 1 (3 or more for a meaningful median)")
    if args.conns < 8:
        p.error("--conns must be at least 8 (h2load -c<N/8> -m8)")
    keys = [k.strip() for k in args.loads.split(",") if k.strip()]
    unknown = [k for k in keys if k not in LOADS_BY_KEY]
    if unknown:
        p.error(f"unknown load {unknown[0]!r}; known: {', '.join(LOADS_BY_KEY)}")
    args.loads = [load for load in LOADS if load.key in keys]
    return args


def estimated_seconds(args) -> float:
    per_round = sum(args.duration + args.pause + (args.h2_warmup if load.h2 else 0) for load in args.loads)
    return per_round * args.rounds + len(args.loads) * (args.warmup + 1) + 30


# ---------------------------------------------------------------- certificate, servers, checks


def make_certificate(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    out = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                          "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
                          "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"openssl could not make the certificate:\n{out.stderr[-2000:]}")
    return cert, key


def tls_session(port: int, alpn: list[str] | None) -> dict:
    """What a client offering `alpn` (None: no ALPN, as wrk) gets: TLS version, cipher, protocol chosen."""
    context = c.client_tls_context(alpn)
    with socket.create_connection((c.HOST, port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        return {"version": tls.version(), "cipher": tls.cipher()[0], "alpn": tls.selected_alpn_protocol()}


def wait_for_log(server: Server, needle: str, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.log_path.exists() and needle in server.proc.log_path.read_text(errors="replace"):
            return True
        time.sleep(0.2)
    return False


def start_servers(servers: list[Server], cert: Path, key: Path, log_dir: Path) -> None:
    for s in servers:
        s.port = c.free_port()
        cmd = s.command(cert, key)
        extra = f" (PEREGRINE_JAVA_OPTS={s.env()['PEREGRINE_JAVA_OPTS']!r})" if s.name == "peregrine-tls-jdk" else ""
        c.log(f"bench: starting {s.name} on port {s.port}: {' '.join(cmd)}{extra}")
        try:
            s.proc = c.Proc(s.name, cmd, cwd=c.APPS_DIR, env=s.env(), log_path=log_dir / f"{s.name}.log")
            s.startup_s = c.wait_ready(s.proc, s.port, timeout=60, tls=s.tls)
            status, body = c.http_get(s.port, "/user/0", tls=s.tls)
            if status != 200 or body != b"0":
                raise RuntimeError(f"GET /user/0 answered {status} {body[:100]!r}, not 200 '0'")
            if s.tls_by:
                # The only way to be sure which TLS implementation serves (BoringSSL falls back to the JDK's
                # when netty-tcnative cannot load).
                if not wait_for_log(s, f"TLS by {s.tls_by}"):
                    raise RuntimeError(f"its log does not say 'TLS by {s.tls_by}':\n{s.proc.log_tail()}")
            if s.tls:
                s.tls_session = {"no_alpn": tls_session(s.port, None),
                                 "alpn_h2_http11": tls_session(s.port, ["h2", "http/1.1"])}
            c.log(f"bench: {s.name} ready in {s.startup_s:.1f} s"
                  + (f"; TLS by {s.tls_by}" if s.tls_by else "")
                  + (f"; {s.tls_session['no_alpn']['version']} {s.tls_session['no_alpn']['cipher']}, ALPN h2 offered: "
                     f"{s.tls_session['alpn_h2_http11']['alpn']}" if s.tls else ""))
        except Exception as e:  # report it and go on with the other servers
            s.error = f"failed to start: {e}"
            c.log(f"bench: {s.name} {s.error}")
            if s.proc:
                s.proc.stop()


# ---------------------------------------------------------------- loads


def url(server: Server, path: str) -> str:
    return f"{'https' if server.tls else 'http'}://{c.HOST}:{server.port}{path}"


def measure(load: Load, server: Server, args, duration: float, h2_warmup: float) -> dict:
    clients, streams = load.clients_streams(args.conns)
    if load.h2:
        return c.measure_h2load(server.proc.pid, url(server, args.path), clients, streams, duration, h2_warmup,
                                protocol="h2" if server.tls else "h2c")
    return c.measure_wrk(server.proc.pid, url(server, args.path), clients, duration, args.timeout)


def run_loads(servers: dict[str, Server], args, results: dict, failures: dict) -> bool:
    """Warm-up, then the interleaved rounds. Returns False when interrupted (partial results are kept)."""
    def usable(load: Load) -> bool:
        s = servers[load.server]
        if load.key in failures or s.error:
            return False
        if not s.proc.alive():
            s.error = f"exited with status {s.proc.popen.returncode}:\n{s.proc.log_tail()}"
            c.log(f"bench: {s.name} {s.error}")
            return False
        return True

    try:
        for load in args.loads:
            if not usable(load):
                continue
            c.log(f"bench: warming up {load.key} ({load.label}, {load.describe(args.conns)}): {args.warmup:g} s, discarded")
            try:
                measure(load, servers[load.server], args, args.warmup, 0)
            except Exception as e:
                failures[load.key] = f"warm-up failed: {e}"
                c.log(f"bench: {load.key} {failures[load.key]}")
        for rnd in range(1, args.rounds + 1):
            for load in args.loads:
                if not usable(load):
                    continue
                time.sleep(args.pause)
                try:
                    m = measure(load, servers[load.server], args, args.duration, args.h2_warmup)
                except Exception as e:
                    c.log(f"bench: round {rnd}, {load.key} failed: {e}")
                    m = {"failed": str(e)}
                m["round"] = rnd
                results.setdefault(load.key, []).append(m)
                if "failed" not in m:
                    latency = (f"mean {m['mean_ms']:7.2f} ms  sd {m['sd_ms']:6.2f}" if load.h2 else
                               f"p50 {m['p50_ms']:7.2f} ms  p99 {m['p99_ms']:7.2f}")
                    c.log(f"round {rnd}/{args.rounds}  {load.key:<17} {load.describe(args.conns):<18} {m['rps']:>8.0f} req/s  "
                          f"{latency} ms  errors {m['error_total']:<4} CPU {fmt(m['cpu_s_per_1k'], 3)} s/1k  "
                          f"RSS {m['peak_rss_mib']:5.0f} MiB  client {m['client_cores']:.2f} cores"
                          + ("  (no request completed)" if not m["requests"] else ""))
        return True
    except KeyboardInterrupt:
        c.log("bench: interrupted: stopping the servers and writing the partial results")
        return False


def fmt(v, digits=1, suffix=""):
    return "—" if v is None else f"{v:,.{digits}f}{suffix}"


def summarize(results: dict, args) -> dict:
    summary = {}
    for load in args.loads:
        ok = [m for m in results.get(load.key, []) if "failed" not in m]
        if not ok:
            continue
        summary[load.key] = c.summarize_rounds(ok, extra=("mean_ms", "sd_ms", "max_ms", "client_cores"))
    return summary


def compare(summary: dict, results: dict) -> list[dict]:
    """Each ratio of the medians, and the median of the same ratio taken round by round."""
    out = []
    for num, den, what, minimum in RATIOS:
        a, b = summary.get(num), summary.get(den)
        if not a or not b:
            continue
        per_round_a = {m["round"]: m["rps"] for m in results.get(num, []) if "rps" in m}
        per_round_b = {m["round"]: m["rps"] for m in results.get(den, []) if "rps" in m}
        ratio = a["rps"] / b["rps"] if b["rps"] else None
        out.append({
            "numerator": num, "denominator": den, "what": what,
            "rps_ratio": ratio,
            "rps_ratio_paired_median": c.median([per_round_a[r] / per_round_b[r] for r in per_round_a
                                                 if per_round_b.get(r)]),
            "cpu_per_req_ratio": (a["cpu_s_per_1k"] / b["cpu_s_per_1k"]
                                  if a["cpu_s_per_1k"] and b["cpu_s_per_1k"] else None),
            "target": minimum,
            "met": None if minimum is None or ratio is None else ratio >= minimum,
        })
    return out


def markdown(servers, summary, ratios, failures, machine, args, complete) -> str:
    lines = [f"### TLS and HTTP/2, one worker ({machine['started']})", ""]
    if not complete:
        lines += ["**Interrupted: partial results.**", ""]
    lines += [c.machine_markdown(machine), f"{machine['h2load']}; {machine['openssl']}.", "",
              f"Load on `GET {args.path}` of the FastAPI app, {args.conns} requests in flight: `wrk -t1 -c{args.conns} "
              f"-d{max(1, round(args.duration))}s` (HTTP/1.1; over TLS without ALPN), `h2load -t1 -c{args.conns} -m1` "
              f"and `h2load -t1 -c{max(1, args.conns // 8)} -m8` with `-D {max(1, round(args.duration))} --warm-up-time "
              f"{max(0, round(args.h2_warmup))}` (HTTP/2: h2c by prior knowledge, h2 by ALPN). Certificate: ECDSA P-256. "
              f"{args.rounds} interleaved rounds after {args.warmup:g} s of warm-up per load; medians over the rounds. "
              "h2load gives latency as mean, standard deviation and maximum only, no percentiles. CPU: user+system "
              "seconds of the server's process tree per 1,000 requests (for h2load, over its measured period only); "
              "client cores: CPU seconds of wrk or h2load per second of its run, taken from the machine's two cores. "
              "Errors: wrk's socket errors and responses >= 400; h2load's failed requests (errored, timed out or "
              "not 2xx/3xx).", "",
              "| Load | Client | Req/s | Range over the rounds | p50 (ms) | p99 (ms) | Mean (ms) | SD (ms) | "
              "Max (ms) | Errors | CPU s / 1k req | Peak RSS (MiB) | Client cores |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for load in args.loads:
        r = summary.get(load.key)
        client = f"`{load.describe(args.conns)}`"
        if not r:
            why = servers[load.server].error or failures.get(load.key) or "no results"
            lines.append(f"| {load.label} | {client} | {why.splitlines()[0]} | | | | | | | | | | |")
            continue
        lines.append(f"| {load.label} | {client} | {r['rps']:,.0f} | {r['rps_min']:,.0f}–{r['rps_max']:,.0f} | "
                     f"{fmt(r['p50_ms'], 2)} | {fmt(r['p99_ms'], 2)} | {fmt(r['mean_ms'], 2)} | {fmt(r['sd_ms'], 2)} | "
                     f"{fmt(r['max_ms'], 1)} | {r['errors']:g} | {fmt(r['cpu_s_per_1k'], 3)} | {r['peak_rss_mib']:.0f} | "
                     f"{fmt(r['client_cores'], 2)} |")
    lines += ["", "Ratios of req/s: of the medians above, and the median of the ratios taken round by round.", "",
              "| Ratio | Req/s ratio | Per round | CPU per request ratio | Target |",
              "| --- | ---: | ---: | ---: | --- |"]
    for r in ratios:
        target = "" if r["target"] is None else \
            f">= {r['target']:.2f}: {'met' if r['met'] else 'not met'}"
        lines.append(f"| {r['what']} | {fmt(r['rps_ratio'], 2, 'x')} | {fmt(r['rps_ratio_paired_median'], 2, 'x')} | "
                     f"{fmt(r['cpu_per_req_ratio'], 2)} | {target} |")
    sessions = [f"{s.name}: {s.tls_session['no_alpn']['version']} {s.tls_session['no_alpn']['cipher']}, "
                f"ALPN h2+http/1.1 offered -> {s.tls_session['alpn_h2_http11']['alpn'] or 'none'}"
                for s in servers.values() if s.tls_session]
    if sessions:
        lines += ["", "TLS sessions (a Python client, OpenSSL): " + "; ".join(sessions) + "."]
    return "\n".join(lines) + "\n"


def tool_version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (out.stdout + out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError) as e:
        return f"{cmd[0]} unavailable ({e})"


def main(argv=None) -> int:
    args = parse_args(argv)
    c.install_cleanup()
    c.raise_nofile()
    stamp = c.timestamp()
    args.out.mkdir(parents=True, exist_ok=True)
    log_dir = args.out / f"tls-{stamp}-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    c.log(f"bench: {len(args.loads)} loads, {args.rounds} rounds of {args.duration:g} s: "
          f"about {estimated_seconds(args) / 60:.0f} minutes")
    for tool in ("wrk", "h2load", "openssl"):
        if not shutil.which(tool):
            c.log(f"bench: {tool} is not installed (Debian: apt-get install {'nghttp2-client' if tool == 'h2load' else tool})")
            return 1

    machine = c.describe_run()
    if machine is None:
        return 1
    machine["peregrine_bin"] = str(c.PEREGRINE)
    machine["h2load"] = tool_version(["h2load", "--version"])
    machine["openssl"] = tool_version(["openssl", "version"])
    wanted = {load.server for load in args.loads}
    servers = {name: Server(s.name, s.tls, s.tls_by) for name, s in SERVERS.items() if name in wanted}
    results: dict = {}
    failures: dict = {}
    complete = False
    cert_dir = Path(tempfile.mkdtemp(prefix="bench-tls-"))
    try:
        cert, key = make_certificate(cert_dir)
        start_servers(list(servers.values()), cert, key, log_dir)
        for s in servers.values():
            if s.name.startswith("peregrine") and s.proc and not s.error:
                machine["java"] = c.java_version_of(s.proc.pid)
                break
        complete = run_loads(servers, args, results, failures)
    except KeyboardInterrupt:
        c.log("bench: interrupted")
    finally:
        c.stop_all()
        shutil.rmtree(cert_dir, ignore_errors=True)

    summary = summarize(results, args)
    ratios = compare(summary, results)
    md = markdown(servers, summary, ratios, failures, machine, args, complete)
    result = {
        "machine": machine, "complete": complete,
        "settings": {k: (str(v) if isinstance(v, Path) else [x.key for x in v] if k == "loads" else v)
                     for k, v in vars(args).items()},
        "servers": {s.name: {"command": s.command(cert_dir / "cert.pem", cert_dir / "key.pem"), "port": s.port,
                             "startup_s": s.startup_s, "error": s.error, "tls_by": s.tls_by,
                             "tls_session": s.tls_session, "log": str(log_dir / f"{s.name}.log")}
                    for s in servers.values()},
        "loads": {load.key: {"label": load.label, "server": load.server, "client": load.describe(args.conns),
                             "failure": failures.get(load.key), "rounds": results.get(load.key, [])}
                  for load in args.loads},
        "summary": summary, "ratios": ratios,
    }
    c.write_results(args.out, f"tls-{stamp}", result, md, f"Server logs: {log_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
