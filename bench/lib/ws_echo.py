"""bench/ws-echo: WebSocket echo throughput, Peregrine against uvicorn (websockets implementation).

Each of N client connections sends a 64-byte text message and waits for its echo, in a loop, for the
duration of a round; the figure is echoed messages per second over all connections. The servers run
the same plain ASGI app (apps/ws_echo_app.py), take turns round by round, and the medians are reported.

The load generator is a separate process written on asyncio + uvloop with the frames prebuilt (no
library in the loop): a WebSocket client library in Python would be slower than the servers it
measures. It shares the machine's two cores with the server, as wrk does in bench/run.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as c  # noqa: E402

HANDSHAKE = (b"GET /echo HTTP/1.1\r\nHost: bench\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")


def client_frame(payload: bytes) -> bytes:
    # A zero masking key leaves the payload as it is: legal (RFC 6455 only asks for a key), and it keeps
    # the client's cost out of the figures.
    assert len(payload) < 126
    return struct.pack("!BB", 0x81, 0x80 | len(payload)) + b"\0\0\0\0" + payload


async def one_connection(port: int, payload: bytes, stop_at: float, counts: list, index: int) -> None:
    reader, writer = await asyncio.open_connection(c.HOST, port)
    writer.write(HANDSHAKE)
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 101"):
        raise RuntimeError(f"handshake refused: {head[:80]!r}")
    frame = client_frame(payload)
    n = 0
    expected = 2 + len(payload)
    while time.monotonic() < stop_at:
        writer.write(frame)
        echo = await reader.readexactly(expected)
        if echo[2:] != payload:
            raise RuntimeError("wrong echo")
        n += 1
    counts[index] = n
    writer.write(b"\x88\x82\0\0\0\0\x03\xe8")  # close 1000
    writer.close()


async def drive(port: int, connections: int, seconds: float) -> float:
    payload = b"m" * 64
    counts = [0] * connections
    start = time.monotonic()
    stop_at = start + seconds
    await asyncio.gather(*[one_connection(port, payload, stop_at, counts, i) for i in range(connections)])
    return sum(counts) / (time.monotonic() - start)


def client_main(args) -> None:
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    rate = asyncio.run(drive(args.port, args.connections, args.seconds))
    print(json.dumps({"messages_per_second": rate}))


def run_client(port: int, connections: int, seconds: float) -> float:
    out = subprocess.run([sys.executable, __file__, "--client", "--port", str(port), "--connections", str(connections),
                          "--seconds", str(seconds)], capture_output=True, text=True, timeout=seconds + 120)
    if out.returncode != 0:
        raise RuntimeError(f"load generator failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["messages_per_second"]


SHARE_CORE = "peregrine --share-core"


def server_command(name: str, port: int) -> list[str]:
    if name.startswith("peregrine"):
        return [str(c.PEREGRINE), "--venv", str(c.VENV), "--port", str(port), "--log-level", "warning",
                *(["--share-core"] if name == SHARE_CORE else []), "ws_echo_app:app"]
    return [str(c.VENV / "bin" / "uvicorn"), "ws_echo_app:app", "--host", c.HOST, "--port", str(port), "--workers", "1",
            "--http", "httptools", "--loop", "uvloop", "--ws", "websockets", "--ws-per-message-deflate", "false",
            "--no-access-log", "--log-level", "warning"]


def main() -> None:
    parser = argparse.ArgumentParser(description="WebSocket echo: Peregrine against uvicorn (websockets), one worker each.")
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--connections", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each round (default 8)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per connection count (default 5)")
    parser.add_argument("--conns", default="1,64,256", help="connection counts (default 1,64,256)")
    parser.add_argument("--quick", action="store_true", help="2 rounds of 3 s")
    parser.add_argument("--share-core", action="store_true",
                        help="also a Peregrine with --share-core, in the same rounds (its two threads on one core at few connections)")
    args = parser.parse_args()
    if args.client:
        client_main(args)
        return
    if args.quick:
        args.rounds, args.seconds = 2, 3.0
    c.install_cleanup()
    c.raise_nofile()
    version = c.build_peregrine()
    log_dir = c.RESULTS_DIR / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    servers = {}
    for name in ("peregrine", *([SHARE_CORE] if args.share_core else []), "uvicorn"):
        port = c.free_port()
        proc = c.Proc(name, server_command(name, port), cwd=c.APPS_DIR, env=c.child_env(),
                      log_path=log_dir / f"ws-echo-{name}.log")
        c.wait_ready(proc, port)
        servers[name] = (proc, port)
    conn_counts = [int(x) for x in args.conns.split(",")]
    for name, (proc, port) in servers.items():
        c.log(f"bench: warming up {name}")
        run_client(port, 16, 3.0)
    results = {name: {n: [] for n in conn_counts} for name in servers}
    for n in conn_counts:
        for r in range(args.rounds):
            for name, (proc, port) in servers.items():
                rate = run_client(port, n, args.seconds)
                results[name][n].append(rate)
                c.log(f"bench: {name} {n} connections round {r + 1}: {rate:,.0f} msg/s")
    machine = c.machine_info(version)
    machine["websockets"] = c.package_versions(("websockets",)).get("websockets")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [f"### WebSocket echo, Peregrine vs uvicorn {machine.get('uvicorn')} --ws websockets "
             f"(websockets {machine['websockets']}), one worker ({started})", "",
             "| Server | Conns | Messages/s (median) | Rounds |", "| --- | ---: | ---: | --- |"]
    for n in conn_counts:
        for name in servers:
            rates = results[name][n]
            lines.append(f"| {name} | {n} | {c.median(rates):,.0f} | {', '.join(f'{x:,.0f}' for x in rates)} |")
    variants = [name for name in servers if name != "uvicorn"]
    lines += ["", "| Conns | " + " | ".join(f"{v} / uvicorn" for v in variants) + " |",
              "| ---: | " + " | ".join("---:" for _ in variants) + " |"]
    for n in conn_counts:
        ratios = [c.median(results[v][n]) / c.median(results["uvicorn"][n]) for v in variants]
        lines.append(f"| {n} | " + " | ".join(f"{r:.2f}x" for r in ratios) + " |")
    md = "\n".join(lines) + "\n\n" + c.machine_markdown(machine) + "\n"
    data = {"machine": machine, "seconds": args.seconds, "rounds": args.rounds,
            "results": {name: {str(n): v for n, v in per.items()} for name, per in results.items()}}
    c.write_results(c.RESULTS_DIR, "ws-echo-" + c.timestamp(), data, md)


if __name__ == "__main__":
    main()
