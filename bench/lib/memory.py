"""bench/memory: the memory of one Peregrine worker serving the FastAPI app, idle and with 10,000 idle connections.

(a) Idle: the RSS of the process tree after 300 requests and a rest, and how it splits between the JVM and
    Python. The split comes from a second run started with -XX:NativeMemoryTracking=summary (passed through
    PEREGRINE_JAVA_OPTS): `jcmd PID VM.native_memory summary` gives the JVM's committed heap / non-heap and its
    malloc total, `jcmd PID System.map` the resident size of every mapping with the JVM's category of its own;
    what no JVM category claims is libpython and extension modules (files) and untracked anonymous memory
    (CPython's pymalloc arenas and malloc, plus the JVM's malloc, which NMT counts and is subtracted). For
    comparison: the RSS of a plain `python -c "import fastapi_app"` in the same venv.
(b) 10,000 idle keep-alive connections: RSS before, open the connections from this process (non-blocking
    sockets and selectors; each sends one `GET / HTTP/1.1` and reads the answer, then stays idle), RSS after:
    bytes per idle connection (target: at most 5 KiB). Then closes them, and opens them again on the same
    server (the cost once pools and the heap have grown). Peregrine runs with --max-connections 20000
    --keep-alive 600000 for this (defaults: 4096 and 5000 ms), uvicorn with --timeout-keep-alive 600. A second
    Peregrine run with NMT shows where the growth goes (heap, JVM malloc, Python, ...).
(c) Workers: `--workers N` (default 4) of Peregrine against uvicorn's (FastAPI) and gunicorn's (Flask), RSS and
    PSS of every process of the tree after 300 requests and a rest. PSS divides each resident page by the
    processes that map it, so what workers share (libjvm.so, the AOT cache, libpython, extension modules)
    counts once in the total, where RSS counts it once per process.
uvicorn (httptools, uvloop) is measured the same way as a reference. `--wheel` measures the pip package's
`peregrine` (the newest wheel of target/wheels, installed into the benchmark venv) instead of bin/peregrine.
"""
from __future__ import annotations

import argparse
import errno
import os
import re
import selectors
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as c  # noqa: E402

MIB = 1024 * 1024
TARGET_BYTES_PER_CONN = 5 * 1024


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bench/memory",
        description="RSS of one idle Peregrine worker serving the FastAPI app and its JVM/Python split, and the "
                    "bytes each of 10,000 idle keep-alive connections adds; uvicorn as a reference. Writes "
                    "bench/results/memory-<timestamp>.json and .md. Takes about 2-3 minutes.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--connections", type=int, default=10000, help="idle connections to open")
    p.add_argument("--concurrency", type=int, default=200, help="connections being opened at once")
    p.add_argument("--settle", type=float, default=5, help="seconds of rest before each RSS reading")
    p.add_argument("--no-uvicorn", action="store_true", help="skip the uvicorn and gunicorn references")
    p.add_argument("--workers", type=int, default=4, help="workers of the (c) measurement; 0 skips it")
    p.add_argument("--wheel", action="store_true",
                   help="measure the pip package (the newest wheel of target/wheels) instead of bin/peregrine")
    p.add_argument("--no-attribution", action="store_true",
                   help="skip the second Peregrine connection run with NMT that shows where the growth goes")
    p.add_argument("--out", type=Path, default=c.RESULTS_DIR, help="directory for the JSON and Markdown results")
    return p.parse_args(argv)


# ---------------------------------------------------------------- servers and readings


def start_server(kind: str, log_dir: Path, extra: list[str] = (), java_opts: str = "") -> tuple[c.Proc, int]:
    port = c.free_port()
    if kind == "peregrine":
        cmd = [c.PEREGRINE, "--venv", c.VENV, "--port", port, "--log-level", "warning", *extra, "fastapi_app:app"]
    else:
        cmd = [c.VENV / "bin" / "uvicorn", "fastapi_app:app", "--host", c.HOST, "--port", port, "--workers", "1",
               "--http", "httptools", "--loop", "uvloop", "--no-access-log", "--log-level", "warning", *extra]
    env = c.child_env(PEREGRINE_JAVA_OPTS=java_opts) if java_opts else c.child_env()
    name = f"{kind}{'-nmt' if java_opts else ''}{'-conns' if extra else ''}"
    c.log(f"bench: starting {name}: {' '.join(map(str, cmd))}" + (f"  (PEREGRINE_JAVA_OPTS={java_opts})"
                                                                  if java_opts else ""))
    proc = c.Proc(name, cmd, cwd=c.APPS_DIR, env=env, log_path=log_dir / f"{name}.log")
    c.wait_ready(proc, port, timeout=60)
    for i in range(300):  # the app's code paths loaded and run a few times: "idle after some use"
        c.http_get(port, "/user/0" if i % 2 else "/")
    return proc, port


def settled_rss_kib(root: int, settle: float) -> int:
    """The median of five readings of the tree's RSS taken over a second, after `settle` seconds of rest."""
    time.sleep(settle)
    readings = []
    for _ in range(5):
        readings.append(c.tree_rss_kib(root))
        time.sleep(0.25)
    return int(c.median(readings))


def settled_pss_kib(root: int) -> int:
    """The tree's PSS, read right after settled_rss_kib (which has done the resting)."""
    return c.tree_pss_kib(root)


def workers_test(args, log_dir: Path) -> list[dict]:
    """RSS and PSS of each process of a --workers N tree, for Peregrine and the references, after 300
    requests over new connections (spread over the workers) and a rest."""
    n = args.workers
    trees = [("peregrine", "fastapi_app:app", [c.PEREGRINE, "--venv", c.VENV, "--port", "{port}", "--log-level",
                                               "warning", "--workers", n, "fastapi_app:app"]),
             ("peregrine", "flask_app:app", [c.PEREGRINE, "--venv", c.VENV, "--port", "{port}", "--log-level",
                                             "warning", "--workers", n, "flask_app:app"])]
    if not args.no_uvicorn:
        trees.insert(1, ("uvicorn", "fastapi_app:app", [
            c.VENV / "bin" / "uvicorn", "fastapi_app:app", "--host", c.HOST, "--port", "{port}", "--workers", n,
            "--http", "httptools", "--loop", "uvloop", "--no-access-log", "--log-level", "warning"]))
        trees.append(("gunicorn", "flask_app:app", [c.VENV / "bin" / "gunicorn", "-b", f"{c.HOST}:{{port}}", "-w", n,
                                                    "--log-level", "warning", "flask_app:app"]))
    results = []
    for server, app, template in trees:
        port = c.free_port()
        cmd = [str(a).replace("{port}", str(port)) for a in template]
        name = f"{server}-{app.split('_')[0]}-workers{n}"
        c.log(f"bench: starting {name}: {' '.join(cmd)}")
        proc = c.Proc(name, cmd, cwd=c.APPS_DIR, env=c.child_env(), log_path=log_dir / f"{name}.log")
        try:
            c.wait_ready(proc, port, timeout=120)
            deadline = time.monotonic() + 120
            while len(c.tree_pids(proc.pid)) < n + 1 and time.monotonic() < deadline:
                time.sleep(0.2)
            for i in range(300):
                c.http_get(port, "/user/0" if i % 2 and "fastapi" in app else "/")
            rss = settled_rss_kib(proc.pid, args.settle)
            pss = settled_pss_kib(proc.pid)
            processes = [{"pid": pid, "role": "supervisor" if pid == proc.pid else "worker",
                          "rss_kib": c.rss_kib(pid), "pss_kib": c.pss_kib(pid)} for pid in c.tree_pids(proc.pid)]
            results.append({"server": server, "app": app, "workers": n, "rss_kib": rss, "pss_kib": pss,
                            "processes": processes})
            c.log(f"bench: {name}: RSS {rss / 1024:.1f} MiB, PSS {pss / 1024:.1f} MiB over {len(processes)} processes")
        finally:
            proc.stop()
    return results


def jcmd(pid: int, *command: str) -> str:
    """Runs jcmd of the JDK the process runs on, or of a JDK 25 when that is the wheel's runtime, which has
    no tools."""
    tool = Path(os.readlink(f"/proc/{pid}/exe")).with_name("jcmd")
    if not tool.exists():
        tool = next(iter(sorted(Path("/usr/lib/jvm").glob("*25*/bin/jcmd"))), Path("jcmd"))
    out = subprocess.run([str(tool), str(pid), *command], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"jcmd {' '.join(command)} failed: {out.stdout[-2000:]}{out.stderr[-2000:]}")
    return out.stdout


def resident_split(pid: int, nmt: dict, python_prefixes: list[str]) -> dict:
    """Splits the resident memory of a JVM run with NMT between the JVM and Python, in KiB.

    `jcmd PID System.map` lists every mapping with its resident size and, for the JVM's own mappings, the NMT
    category (JAVAHEAP, META, CLASS, CODE, GC, CDS, STACK-..., ...). Anonymous mappings without a category
    hold malloc'd memory (the JVM's, whose total NMT knows, and CPython's) and CPython's pymalloc arenas: the
    Python share of them is estimated as their total minus the JVM's malloc.
    """
    java_home = str(Path(os.readlink(f"/proc/{pid}/exe")).parent.parent)
    parts = {"jvm_heap": 0, "jvm_non_heap_mmap": 0, "jvm_files": 0, "python_files": 0, "other_files": 0,
             "anonymous_untracked": 0}
    for line in jcmd(pid, "System.map").splitlines():
        if not line.startswith("0x"):
            continue
        fields = line.split(None, 8)
        if len(fields) < 9:
            continue
        rss_kib, info, path = int(fields[3]) // 1024, fields[7], fields[8].strip()
        if info == "JAVAHEAP":
            parts["jvm_heap"] += rss_kib
        elif info != "-":
            parts["jvm_non_heap_mmap"] += rss_kib  # metaspace, class space, code, GC, CDS, thread stacks, ...
        elif path == "-" or path.startswith("["):
            parts["anonymous_untracked"] += rss_kib
        elif (path.startswith(java_home) or path.endswith((".jar", ".jsa")) or "quarkus-app" in path
              or "libnetty" in path):
            parts["jvm_files"] += rss_kib
        elif "libpython" in path or any(path.startswith(p) for p in python_prefixes) or ".cpython-" in path:
            parts["python_files"] += rss_kib
        else:
            parts["other_files"] += rss_kib
    parts["jvm_malloc"] = nmt["malloc_kib"]
    parts["python_anonymous_estimate"] = parts["anonymous_untracked"] - nmt["malloc_kib"]
    parts["jvm_total"] = parts["jvm_heap"] + parts["jvm_non_heap_mmap"] + parts["jvm_malloc"] + parts["jvm_files"]
    parts["python_total"] = parts["python_files"] + parts["python_anonymous_estimate"]
    parts["total"] = parts["jvm_total"] + parts["python_total"] + parts["other_files"]
    return parts


def python_prefixes() -> list[str]:
    out = subprocess.run([str(c.VENV_PY), "-c", "import sys; print(sys.base_prefix); print(sys.prefix)"],
                         capture_output=True, text=True, timeout=30)
    return [p for p in out.stdout.split() if p]


def nmt_summary(pid: int) -> dict:
    text = jcmd(pid, "VM.native_memory", "summary")
    total = re.search(r"^Total: reserved=(\d+)KB, committed=(\d+)KB", text, re.M)
    malloc = re.search(r"^\s+malloc: (\d+)KB", text, re.M)
    if not total or not malloc:
        raise RuntimeError(f"jcmd VM.native_memory summary gave no totals:\n{text[-2000:]}")
    categories = {m.group(1).strip(): {"reserved_kib": int(m.group(2)), "committed_kib": int(m.group(3))}
                  for m in re.finditer(r"^-\s+(.+?) \(reserved=(\d+)KB, committed=(\d+)KB\)", text, re.M)}
    heap = categories.get("Java Heap", {}).get("committed_kib", 0)
    committed = int(total.group(2))
    return {"total_committed_kib": committed, "total_reserved_kib": int(total.group(1)),
            "heap_committed_kib": heap, "non_heap_committed_kib": committed - heap,
            "malloc_kib": int(malloc.group(1)), "categories": categories, "raw": text}


def plain_python_rss_kib(code_import: str, log_dir: Path, settle: float) -> int:
    code = f"{code_import}\nimport sys, time\nprint('ready', flush=True)\ntime.sleep(600)"
    proc = c.Proc("plain-python", [c.VENV_PY, "-c", code], cwd=c.APPS_DIR, env=c.child_env(),
                  stdout=subprocess.PIPE)
    try:
        line = proc.popen.stdout.readline()
        if b"ready" not in line:
            raise RuntimeError(f"plain python did not start: {line!r}")
        return settled_rss_kib(proc.pid, settle)
    finally:
        proc.stop()
        proc.popen.stdout.close()


# ---------------------------------------------------------------- the idle connections


class IdleConnections:
    """Opens connections that each send one keep-alive GET / and read the answer, then stay open, idle."""

    REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: bench-memory\r\nConnection: keep-alive\r\n\r\n"

    def __init__(self, port: int):
        self.port = port
        self.idle: list[socket.socket] = []
        self.failures: list[str] = []

    def open(self, count: int, concurrency: int, time_limit: float = 180.0) -> float:
        sel = selectors.DefaultSelector()
        started, in_flight, begin = 0, 0, time.monotonic()
        try:
            while len(self.idle) + len(self.failures) < count:
                if time.monotonic() - begin > time_limit:
                    self.failures.append(f"time limit: {count - len(self.idle) - len(self.failures)} not opened")
                    break
                while in_flight < concurrency and started < count:
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    s.setblocking(False)
                    err = s.connect_ex((c.HOST, self.port))
                    if err not in (0, errno.EINPROGRESS):
                        s.close()
                        self.failures.append(f"connect: {os.strerror(err)}")
                    else:
                        sel.register(s, selectors.EVENT_WRITE, {"buf": b""})
                        in_flight += 1
                    started += 1
                for key, events in sel.select(timeout=1.0):
                    s, state = key.fileobj, key.data
                    done = self._step(s, state, events, sel)
                    if done is not None:
                        sel.unregister(s)
                        in_flight -= 1
                        if done == "ok":
                            self.idle.append(s)
                        else:
                            self.failures.append(done)
                            s.close()
        finally:
            for key in list(sel.get_map().values()):
                key.fileobj.close()
            sel.close()
        return time.monotonic() - begin

    def _step(self, s, state, events, sel):
        if events & selectors.EVENT_WRITE:
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                return f"connect: {os.strerror(err)}"
            try:
                s.send(self.REQUEST)  # small enough for one send on a fresh socket
            except OSError as e:
                return f"send: {e}"
            sel.modify(s, selectors.EVENT_READ, state)
            return None
        try:
            data = s.recv(65536)
        except BlockingIOError:
            return None
        except OSError as e:
            return f"recv: {e}"
        if not data:
            return "closed by the server before the answer"
        state["buf"] += data
        buf = state["buf"]
        head_end = buf.find(b"\r\n\r\n")
        if head_end < 0:
            return None
        head = buf[:head_end].decode("latin-1")
        if not head.startswith("HTTP/1.1 200"):
            return f"answer: {head.splitlines()[0]}"
        length = re.search(r"(?im)^content-length:\s*(\d+)", head)
        if length:
            return "ok" if len(buf) - head_end - 4 >= int(length.group(1)) else None
        if re.search(r"(?im)^transfer-encoding:\s*chunked", head):
            return "ok" if buf.endswith(b"0\r\n\r\n") else None
        return f"answer without a length: {head!r}"

    def still_open(self) -> int:
        """Idle sockets the server has not closed (a readable idle socket means EOF or stray data)."""
        sel = selectors.DefaultSelector()
        for s in self.idle:
            sel.register(s, selectors.EVENT_READ)
        readable = len(sel.select(timeout=0.5))
        sel.close()
        return len(self.idle) - readable

    def close(self):
        for s in self.idle:
            s.close()
        self.idle = []


def connections_test(kind: str, args, log_dir: Path, nmt: bool = False) -> dict:
    """RSS before and after opening the idle connections. With nmt (Peregrine only), the JVM runs with
    NativeMemoryTracking and the resident split (see resident_split) is taken before and after as well."""
    if kind == "peregrine":
        extra = ["--max-connections", "20000", "--keep-alive", "600000"]
    else:
        extra = ["--timeout-keep-alive", "600"]
    proc, port = start_server(kind, log_dir, extra=extra,
                              java_opts="-XX:NativeMemoryTracking=summary" if nmt else "")
    prefixes = python_prefixes() if nmt else []
    try:
        before = settled_rss_kib(proc.pid, args.settle)
        split_before = resident_split(proc.pid, nmt_summary(proc.pid), prefixes) if nmt else None
        conns = IdleConnections(port)
        c.log(f"bench: {kind}: RSS {before / 1024:.1f} MiB; opening {args.connections} idle connections")
        seconds = conns.open(args.connections, args.concurrency)
        opened = len(conns.idle)
        c.log(f"bench: {kind}: {len(conns.idle)} open in {seconds:.1f} s, {len(conns.failures)} failed")
        after = settled_rss_kib(proc.pid, args.settle)
        split_after = resident_split(proc.pid, nmt_summary(proc.pid), prefixes) if nmt else None
        still_open = conns.still_open()
        peak_hwm = sum(c.status_fields(p).get("VmHWM", 0) for p in c.tree_pids(proc.pid))
        conns.close()
        after_close = settled_rss_kib(proc.pid, args.settle)
        # A second wave on the same server: what the connections cost once pools and heap have grown.
        again = IdleConnections(port)
        again.open(args.connections, args.concurrency)
        after_again = settled_rss_kib(proc.pid, args.settle)
        split_again = resident_split(proc.pid, nmt_summary(proc.pid), prefixes) if nmt else None
        again_open = again.still_open()
        again.close()
        per_conn = (after - before) * 1024 / still_open if still_open else None
        failures = {}
        for f in conns.failures:
            failures[f] = failures.get(f, 0) + 1
        c.log(f"bench: {kind}: RSS {after / 1024:.1f} MiB with {still_open} idle connections: "
              f"{fmt_bytes(per_conn)} per connection")
        return {"server": kind, "nmt": nmt, "command_options": extra,
                "split_before_kib": split_before, "split_after_kib": split_after,
                "split_second_wave_kib": split_again, "rss_before_kib": before, "rss_after_kib": after,
                "rss_after_close_kib": after_close, "rss_second_wave_kib": after_again,
                "second_wave_open": again_open, "vm_hwm_kib": peak_hwm, "connections_requested": args.connections,
                "connections_open": still_open, "open_seconds": seconds, "failures": failures,
                "bytes_per_connection": per_conn, "opened": opened}
    finally:
        proc.stop()


def fmt_bytes(n) -> str:
    if n is None:
        return "n/a"
    return f"{n / 1024:.2f} KiB" if abs(n) >= 1024 else f"{n:.0f} B"


def mib(kib) -> str:
    return "n/a" if kib is None else f"{kib / 1024:.1f}"


# ---------------------------------------------------------------- main


def main(argv=None) -> int:
    args = parse_args(argv)
    c.install_cleanup()
    nofile = c.raise_nofile(65536)
    if nofile < args.connections + 100:
        c.log(f"bench: the open-file limit is {nofile}: fewer than {args.connections} connections can be opened")
    stamp = c.timestamp()
    args.out.mkdir(parents=True, exist_ok=True)
    log_dir = args.out / f"memory-{stamp}-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    if args.wheel:
        c.use_wheel(None)
    machine = c.describe_run()
    if machine is None:
        return 1
    machine["peregrine_bin"] = str(c.PEREGRINE)
    result: dict = {"machine": machine, "settings": {"connections": args.connections, "settle_s": args.settle,
                                                     "open_file_limit": nofile}}
    try:
        # (a) idle worker, default options
        proc, _ = start_server("peregrine", log_dir)
        machine["java"] = c.java_version_of(proc.pid)
        idle = {"rss_kib": settled_rss_kib(proc.pid, args.settle), "pss_kib": settled_pss_kib(proc.pid),
                "status": c.status_fields(proc.pid), "pids": c.tree_pids(proc.pid)}
        proc.stop()
        # the same with native memory tracking, for the JVM's own figures
        proc, _ = start_server("peregrine", log_dir, java_opts="-XX:NativeMemoryTracking=summary")
        nmt_rss = settled_rss_kib(proc.pid, args.settle)
        nmt = nmt_summary(proc.pid)
        split = resident_split(proc.pid, nmt, python_prefixes())
        proc.stop()
        (log_dir / "peregrine-nmt-summary.txt").write_text(nmt.pop("raw"))
        python_app = plain_python_rss_kib("import fastapi_app", log_dir, args.settle)
        python_bare = plain_python_rss_kib("pass", log_dir, args.settle)
        result["idle"] = {"peregrine": idle, "peregrine_nmt_rss_kib": nmt_rss, "nmt": nmt, "split_kib": split,
                          "plain_python_fastapi_app_rss_kib": python_app, "plain_python_bare_rss_kib": python_bare}
        if not args.no_uvicorn:
            proc, _ = start_server("uvicorn", log_dir)
            result["idle"]["uvicorn_rss_kib"] = settled_rss_kib(proc.pid, args.settle)
            result["idle"]["uvicorn_pss_kib"] = settled_pss_kib(proc.pid)
            proc.stop()
        # (c) several workers
        if args.workers:
            result["workers"] = workers_test(args, log_dir)
        # (b) idle connections
        result["connections"] = [connections_test("peregrine", args, log_dir)]
        if not args.no_attribution:
            result["connections_nmt"] = connections_test("peregrine", args, log_dir, nmt=True)
        if not args.no_uvicorn:
            result["connections"].append(connections_test("uvicorn", args, log_dir))
    except KeyboardInterrupt:
        c.log("bench: interrupted")
        result["interrupted"] = True
    finally:
        c.stop_all()

    md = markdown(result, args)
    c.write_results(args.out, f"memory-{stamp}", result, md, f"Logs and the NMT summary: {log_dir}")
    return 0


def markdown(result: dict, args) -> str:
    m = result["machine"]
    lines = [f"### Memory of one Peregrine worker (FastAPI app) ({m['started']})", "", c.machine_markdown(m), ""]
    if result.get("interrupted"):
        lines += ["**Interrupted: partial results.**", ""]
    idle = result.get("idle")
    if idle:
        p, nmt, sp = idle["peregrine"], idle["nmt"], idle["split_kib"]
        lines += ["Idle, after 300 requests and a rest; RSS of the whole process tree.", "",
                  "| What | MiB |", "| --- | ---: |",
                  f"| **Peregrine worker serving the FastAPI app, idle RSS** | **{mib(p['rss_kib'])}** |",
                  f"| the same, PSS | {mib(p.get('pss_kib'))} |",
                  f"| plain `python -c \"import fastapi_app\"` in the same venv: estimate of Python + the app | "
                  f"{mib(idle['plain_python_fastapi_app_rss_kib'])} |",
                  f"| plain `python -c pass`: the interpreter alone | {mib(idle['plain_python_bare_rss_kib'])} |"]
        if "uvicorn_rss_kib" in idle:
            lines.append(f"| uvicorn (httptools, uvloop) serving the same app, idle RSS, for reference | "
                         f"{mib(idle['uvicorn_rss_kib'])} |")
        if "uvicorn_pss_kib" in idle:
            lines.append(f"| uvicorn, PSS | {mib(idle['uvicorn_pss_kib'])} |")
        lines += ["", "Split of the resident memory, from a second run with -XX:NativeMemoryTracking=summary "
                  f"(RSS {mib(idle['peregrine_nmt_rss_kib'])} MiB): `jcmd PID System.map` gives the resident size "
                  "of each mapping and the JVM's category of its own; NMT gives the JVM's malloc total. "
                  "Untracked anonymous memory minus the JVM's malloc is counted as Python's (pymalloc arenas, "
                  "CPython's malloc); memory the JVM freed but glibc kept lands there too, so it is an upper "
                  "estimate.", "",
                  "| Part | Resident MiB | NMT committed MiB |", "| --- | ---: | ---: |",
                  f"| JVM: Java heap | {mib(sp['jvm_heap'])} | {mib(nmt['heap_committed_kib'])} |",
                  f"| JVM: metaspace, class space, code cache, GC, CDS, thread stacks (mmap) | "
                  f"{mib(sp['jvm_non_heap_mmap'])} | |",
                  f"| JVM: malloc (NMT) | {mib(sp['jvm_malloc'])} | |",
                  f"| JVM: libjvm, JDK libraries, CDS archive, jars, Netty's native library | {mib(sp['jvm_files'])} | |",
                  f"| **JVM total** (NMT committed non-heap: {mib(nmt['non_heap_committed_kib'])}) | "
                  f"**{mib(sp['jvm_total'])}** | {mib(nmt['total_committed_kib'])} |",
                  f"| Python: libpython, the standard library's and the venv's extension modules | "
                  f"{mib(sp['python_files'])} | |",
                  f"| Python: anonymous memory not tracked by NMT, minus the JVM's malloc | "
                  f"{mib(sp['python_anonymous_estimate'])} | |",
                  f"| **Python total** | **{mib(sp['python_total'])}** | |",
                  f"| Other shared libraries (libc, ...) | {mib(sp['other_files'])} | |",
                  f"| Sum | {mib(sp['total'])} | |"]
        top = sorted(nmt["categories"].items(), key=lambda kv: -kv[1]["committed_kib"])[:8]
        lines += ["", "Largest JVM categories (NMT, committed MiB): "
                  + ", ".join(f"{k} {mib(v['committed_kib'])}" for k, v in top) + ".", ""]
    workers = result.get("workers")
    if workers:
        lines += [f"`--workers {workers[0]['workers']}`, after 300 requests over new connections and a rest. The "
                  "supervisor (uvicorn's and gunicorn's master) is the first process of the tree; PSS counts the "
                  "pages the processes share once over the tree.", "",
                  "| Server, app | supervisor RSS / PSS (MiB) | each worker RSS / PSS (MiB, median) | total RSS | "
                  "**total PSS** |", "| --- | ---: | ---: | ---: | ---: |"]
        for r in workers:
            head = [p for p in r["processes"] if p["role"] == "supervisor"]
            rest = [p for p in r["processes"] if p["role"] == "worker"]
            sup = f"{mib(head[0]['rss_kib'])} / {mib(head[0]['pss_kib'])}" if head else "n/a"
            each = (f"{mib(c.median([p['rss_kib'] for p in rest]))} / {mib(c.median([p['pss_kib'] for p in rest]))}"
                    if rest else "n/a")
            lines.append(f"| {r['server']}, {r['app'].split('_')[0]} | {sup} | {each} | {mib(r['rss_kib'])} | "
                         f"**{mib(r['pss_kib'])}** |")
        lines.append("")
    conns = result.get("connections")
    if conns:
        lines += [f"{args.connections:,} idle keep-alive connections (each sent one `GET /` and read the answer). "
                  "Peregrine ran with `--max-connections 20000 --keep-alive 600000` (defaults 4096 and 5000 ms), "
                  "uvicorn with `--timeout-keep-alive 600`.", "",
                  "| Server | RSS before (MiB) | RSS with the connections (MiB) | Connections open | Failed | "
                  "Per idle connection | After closing them (MiB) | Opened again (MiB) |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in conns:
            target = ""
            if r["server"] == "peregrine" and r["bytes_per_connection"] is not None:
                ok = r["bytes_per_connection"] <= TARGET_BYTES_PER_CONN
                target = f" ({'PASS' if ok else 'FAIL'}: target <= 5 KiB)"
            lines.append(f"| {r['server']} | {mib(r['rss_before_kib'])} | {mib(r['rss_after_kib'])} | "
                         f"{r['connections_open']:,} | {sum(r['failures'].values())} | "
                         f"{fmt_bytes(r['bytes_per_connection'])}{target} | {mib(r['rss_after_close_kib'])} | "
                         f"{mib(r['rss_second_wave_kib'])} |")
        attr = result.get("connections_nmt")
        if attr and attr["split_after_kib"] and attr["connections_open"]:
            b, a, n = attr["split_before_kib"], attr["split_after_kib"], attr["connections_open"]
            w = attr["split_second_wave_kib"]
            names = {"jvm_heap": "JVM: Java heap", "jvm_non_heap_mmap": "JVM: metaspace, code, GC, stacks (mmap)",
                     "jvm_malloc": "JVM: malloc (NMT; Netty's direct buffers among it)",
                     "python_anonymous_estimate": "Python / untracked anonymous memory",
                     "jvm_files": "JVM: files", "python_files": "Python: files", "other_files": "other files"}
            lines += ["", f"Where Peregrine's growth goes (a second run with -XX:NativeMemoryTracking=summary: "
                          f"{n:,} connections, {fmt_bytes((attr['rss_after_kib'] - attr['rss_before_kib']) * 1024 / n)} "
                          "per connection by RSS):", "",
                      "| Part | Before (MiB) | With the connections (MiB) | Per connection | "
                      "Closed and opened again (MiB) |",
                      "| --- | ---: | ---: | ---: | ---: |"]
            for k, label in names.items():
                lines.append(f"| {label} | {mib(b[k])} | {mib(a[k])} | {fmt_bytes((a[k] - b[k]) * 1024 / n)} | "
                             f"{mib(w[k])} |")
        for r in conns:
            if r["failures"]:
                lines.append(f"\n{r['server']} failures: " + "; ".join(f"{k} x{v}" for k, v in r["failures"].items()))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
