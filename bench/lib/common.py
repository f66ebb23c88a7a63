"""Shared helpers of the benchmark scripts in bench/ (Python 3.11 standard library only).

- starting servers in their own process group and stopping every one of them on exit, failure,
  Ctrl-C or SIGTERM (TERM to the group, then KILL);
- reading the RSS and CPU time of a process tree from /proc;
- waiting for a server to answer GET / with 200, over HTTP or HTTPS;
- one load with wrk (HTTP/1.1, plain or TLS) or h2load (HTTP/2), measured with the server's CPU and RSS;
- describing the machine and the software versions.

PEREGRINE_BIN names the Peregrine command to measure (default: this checkout's bin/peregrine), for
instance another checkout's or a published snapshot's; use_wheel() measures the pip package instead.
"""
from __future__ import annotations

import atexit
import datetime
import http.client
import json
import os
import platform
import re
import resource
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

BENCH_DIR = Path(os.environ.get("BENCH_DIR") or Path(__file__).resolve().parent.parent)
ROOT = Path(os.environ.get("BENCH_ROOT") or BENCH_DIR.parent)
APPS_DIR = BENCH_DIR / "apps"
RESULTS_DIR = BENCH_DIR / "results"
VENV = Path(os.environ.get("BENCH_VENV") or ROOT / "target" / "bench-venv")
VENV_PY = VENV / "bin" / "python"
PEREGRINE = Path(os.environ.get("PEREGRINE_BIN") or ROOT / "bin" / "peregrine")
WRK_LUA = BENCH_DIR / "lib" / "wrk_report.lua"
CLK_TCK = os.sysconf("SC_CLK_TCK")
HOST = "127.0.0.1"


def log(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


def timestamp() -> str:
    return datetime.datetime.now().strftime("%Y%m%d-%H%M%S")


# ---------------------------------------------------------------- processes we start, and stopping them

_started: list["Proc"] = []
_lock = threading.Lock()


class Proc:
    """A child started in a new session (so its process group id is its pid) with output to a log file."""

    def __init__(self, name: str, cmd: list[str], cwd: Path | None = None, env: dict | None = None,
                 log_path: Path | None = None, stdout=None):
        self.name = name
        self.cmd = [str(c) for c in cmd]
        self.log_path = log_path
        self._log = open(log_path, "wb") if log_path else None
        sink = self._log or subprocess.DEVNULL
        self.popen = subprocess.Popen(self.cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                      stdout=stdout if stdout is not None else sink, stderr=sink,
                                      start_new_session=True)
        self.pid = self.popen.pid
        with _lock:
            _started.append(self)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, grace: float = 8.0) -> None:
        """SIGTERM to the whole process group, SIGKILL to it after `grace` seconds if anything is left."""
        try:
            os.killpg(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if self.popen.poll() is not None and not _group_alive(self.pid):
                break
            time.sleep(0.05)
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            log(f"bench: {self.name} (pid {self.pid}) did not exit after SIGKILL")
        if self._log:
            self._log.close()
            self._log = None
        with _lock:
            if self in _started:
                _started.remove(self)

    def log_tail(self, lines: int = 20) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def stop_all() -> None:
    with _lock:
        procs = list(reversed(_started))
    for p in procs:
        try:
            p.stop()
        except Exception as e:  # keep stopping the others
            log(f"bench: stopping {p.name}: {e}")


def _on_signal(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def install_cleanup() -> None:
    """Every process started through Proc is stopped at exit, on SIGTERM/SIGHUP and on Ctrl-C."""
    atexit.register(stop_all)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGHUP, _on_signal)


def raise_nofile(want: int = 65536) -> int:
    """Raises this process's open-file limit (inherited by the servers it starts); returns the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for target_hard in (max(hard, want), hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, target_hard), target_hard))
            break
        except (ValueError, OSError):
            continue
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


_ports_handed_out: set[int] = set()


def free_port() -> int:
    """A port nothing listens on, never one handed out before in this run: the kernel may give a port
    just probed and released to the next probe, and some benchmarks take several ports before they
    start the servers (bench/lib/cache.py)."""
    while True:
        with socket.socket() as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        if port not in _ports_handed_out:
            _ports_handed_out.add(port)
            return port


# ---------------------------------------------------------------- /proc: process trees, RSS, CPU


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    # The command name may contain spaces and parentheses: the fields start after the last ')'.
    return data[data.rindex(")") + 2:].split()


def tree_pids(root: int) -> list[int]:
    """The root, its descendants and the members of its process group (the root leads its own group)."""
    children: dict[int, list[int]] = {}
    group: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if not fields:
            continue
        pid, ppid, pgid = int(entry), int(fields[1]), int(fields[2])
        children.setdefault(ppid, []).append(pid)
        if pgid == root:
            group.append(pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo.extend(children.get(pid, ()))
    found.update(group)
    return sorted(p for p in found if os.path.exists(f"/proc/{p}"))


def _kib_line(path: str, key: str) -> int:
    """The number of the line `key: N kB` of a /proc file, 0 when the process is gone."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_kib(pid: int) -> int:
    return _kib_line(f"/proc/{pid}/status", "VmRSS:")


def status_fields(pid: int, names=("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM", "Threads")) -> dict:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in names:
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def tree_rss_kib(root: int, pids: list[int] | None = None) -> int:
    return sum(rss_kib(p) for p in (pids if pids is not None else tree_pids(root)))


def pss_kib(pid: int) -> int:
    """Proportional set size: each resident page divided by the number of processes mapping it, so that
    the pages workers share (libjvm.so, the AOT cache, libpython, the jars) count once over a tree."""
    return _kib_line(f"/proc/{pid}/smaps_rollup", "Pss:")


def tree_pss_kib(root: int, pids: list[int] | None = None) -> int:
    return sum(pss_kib(p) for p in (pids if pids is not None else tree_pids(root)))


def tree_cpu_seconds(root: int) -> float:
    """utime+stime of the tree, plus the children they have reaped (cutime+cstime)."""
    ticks = 0
    for pid in tree_pids(root):
        fields = _stat_fields(pid)
        if fields:
            # Fields 14-17 of /proc/PID/stat (utime stime cutime cstime), counted from 1 with pid and comm.
            ticks += sum(int(x) for x in fields[11:15])
    return ticks / CLK_TCK


def _tree_threads(root: int):
    """(pid, tid, /proc/PID/task/TID, thread name) of every thread of the tree that still exists."""
    for pid in tree_pids(root):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            task = f"/proc/{pid}/task/{tid}"
            try:
                with open(f"{task}/comm") as f:
                    name = f.read().strip()
            except OSError:
                continue
            yield pid, tid, task, name


def _python_threads(root: int):
    """/proc/PID/task/TID of the threads of the tree that run the application in Peregrine: the ASGI thread
    ("python") and the WSGI threads ("wsgi-N")."""
    for _, _, task, name in _tree_threads(root):
        if name == "python" or name.startswith("wsgi-"):
            yield task


def python_thread_seconds(root: int) -> float | None:
    """utime+stime of the threads that run the application in Peregrine; None for a server without such threads."""
    ticks, found = 0, False
    for task in _python_threads(root):
        try:
            with open(f"{task}/stat") as f:
                data = f.read()
        except OSError:
            continue
        found = True
        ticks += sum(int(x) for x in data[data.rindex(")") + 2:].split()[11:13])
    return ticks / CLK_TCK if found else None


def python_thread_wait_seconds(root: int) -> float | None:
    """How long the threads that run the application in Peregrine have been ready to run but waited for a core
    (the second field of /proc/PID/task/TID/schedstat): on a 2-core machine shared with the load generator,
    what separates "busy" from "had work"; None without such threads or without schedstat."""
    total, found = 0, False
    for task in _python_threads(root):
        try:
            with open(f"{task}/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        found = True
    return total / 1e9 if found else None


def jit_thread_seconds(root: int) -> tuple[float, int] | None:
    """utime+stime of the JVMs' compiler threads in the tree ("C1 CompilerThre", "C2 CompilerThre"), and how many
    processes have them (one per JVM); None for a server without a JIT."""
    ticks, jvms = 0, set()
    for pid, _, task, name in _tree_threads(root):
        if not (name.startswith("C1 Compiler") or name.startswith("C2 Compiler")):
            continue
        try:
            with open(f"{task}/stat") as f:
                data = f.read()
        except OSError:
            continue
        jvms.add(pid)
        ticks += sum(int(x) for x in data[data.rindex(")") + 2:].split()[11:13])
    return (ticks / CLK_TCK, len(jvms)) if jvms else None


def thread_stats(root: int) -> dict[str, tuple[str, float, float]]:
    """{"pid/tid": (name, cpu seconds, seconds waiting for a core)} of every thread of the tree."""
    out = {}
    for pid, tid, task, name in _tree_threads(root):
        try:
            with open(f"{task}/stat") as f:
                data = f.read()
            with open(f"{task}/schedstat") as f:
                wait = int(f.read().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            continue
        cpu = sum(int(x) for x in data[data.rindex(")") + 2:].split()[11:13]) / CLK_TCK
        out[f"{pid}/{tid}"] = (name, cpu, wait)
    return out


class RssSampler:
    """Samples the tree's total RSS every `period` seconds in a thread; `peak_kib` is the largest sum seen."""

    def __init__(self, root: int, period: float = 0.1, rescan: float = 1.0):
        self.root, self.period, self.rescan = root, period, rescan
        self.peak_kib = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self):
        pids, scanned = tree_pids(self.root), time.monotonic()
        while True:
            now = time.monotonic()
            if now - scanned >= self.rescan:
                pids, scanned = tree_pids(self.root), now
            self.peak_kib = max(self.peak_kib, tree_rss_kib(self.root, pids))
            self.samples += 1
            if self._stop.wait(self.period):
                break


# ---------------------------------------------------------------- servers


def client_tls_context(alpn: list[str] | None = None) -> ssl.SSLContext:
    """A client context that accepts any certificate: the benchmarks' certificates are throwaway self-signed ones."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if alpn:
        context.set_alpn_protocols(alpn)
    return context


def http_get(port: int, path: str = "/", timeout: float = 2.0, tls: bool = False) -> tuple[int, bytes]:
    conn = (http.client.HTTPSConnection(HOST, port, timeout=timeout, context=client_tls_context()) if tls
            else http.client.HTTPConnection(HOST, port, timeout=timeout))
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def wait_ready(proc: Proc, port: int, timeout: float = 60.0, tls: bool = False) -> float:
    """Polls GET / until it answers 200; returns the seconds it took. Raises if the process exits or on timeout."""
    started = time.monotonic()
    while True:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited with status {proc.popen.returncode} before it was ready:\n"
                               + proc.log_tail())
        try:
            status, _ = http_get(port, "/", timeout=1.0, tls=tls)
            if status == 200:
                return time.monotonic() - started
        except (OSError, http.client.HTTPException):
            pass
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"{proc.name} did not answer GET / with 200 within {timeout:.0f} s:\n"
                               + proc.log_tail())
        time.sleep(0.1)


def build_peregrine() -> str:
    """`bin/peregrine --version` builds the jar when needed and prints the version."""
    log(f"bench: {PEREGRINE} --version (builds the server with Maven when the jar is missing or stale)")
    out = subprocess.run([str(PEREGRINE), "--version"], capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{PEREGRINE} --version failed:\n{out.stderr[-3000:]}")
    return out.stdout.strip().splitlines()[-1]


def newest_wheel() -> Path | None:
    wheels = sorted((ROOT / "target" / "wheels").glob("peregrine_server-*.whl"), key=lambda w: w.stat().st_mtime)
    return wheels[-1] if wheels else None


def use_wheel(wheel: Path | None) -> Path:
    """Installs the pip package into the benchmark venv, as a user would beside the application, and makes
    its `peregrine` command the one measured. Without a wheel given, the newest of target/wheels, which
    bin/build-wheel makes when there is none."""
    global PEREGRINE
    if wheel is None:
        wheel = newest_wheel()
    if wheel is None:
        log("bench: no wheel in target/wheels: running bin/build-wheel")
        built = subprocess.run([str(ROOT / "bin" / "build-wheel")], stdout=subprocess.PIPE, text=True, timeout=1800)
        if built.returncode != 0:
            raise RuntimeError("bin/build-wheel failed")
        wheel = Path(built.stdout.strip().splitlines()[-1])
    log(f"bench: installing {wheel.name} into {VENV}")
    out = subprocess.run([str(VENV_PY), "-m", "pip", "install", "-q", "--retries", "0", "--force-reinstall",
                          "--no-deps", str(wheel)], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"pip install {wheel} failed:\n{out.stderr[-3000:]}")
    PEREGRINE = VENV / "bin" / "peregrine"
    return wheel


def child_env(**extra: str) -> dict:
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    env["PATH"] = f"{VENV / 'bin'}:{env.get('PATH', '')}"
    env.update(extra)
    return env


# ---------------------------------------------------------------- one load: wrk (HTTP/1.1) and h2load (HTTP/2)


def start_logged(name: str, cmd: list[str], port: int, log_dir: Path) -> Proc:
    """Starts a server from APPS_DIR, its output in log_dir/NAME.log, and waits until it answers on port."""
    log(f"bench: starting {name} on port {port}: {' '.join(cmd)}")
    proc = Proc(name, cmd, cwd=APPS_DIR, env=child_env(), log_path=log_dir / f"{name}.log")
    wait_ready(proc, port)
    return proc


def fmt(v, digits=1, suffix=""):
    """A figure for the results' tables: thousands separated, or a dash when there is none."""
    return "—" if v is None else f"{v:,.{digits}f}{suffix}"


def wrk_summary(url: str, conns: int, duration: float, timeout: float, headers: tuple[str, ...] = (),
                script: Path | None = None) -> dict:
    """One `wrk -t1` load on url (http:// or https://), with `headers` ("Name: value") on every request; the
    summary lib/wrk_report.lua prints, in microseconds. `script`: a wrk script of the load's own, which must
    end by loading wrk_report.lua (dofile) for the summary."""
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{max(1, round(duration))}s", f"--timeout={max(1, round(timeout))}s",
           "-s", str(script or WRK_LUA), *(arg for h in headers for arg in ("-H", h)), url]
    proc = Proc("wrk", cmd, stdout=subprocess.PIPE)
    try:
        out, _ = proc.popen.communicate(timeout=duration + 60)
    finally:
        proc.stop(grace=2)
    text = out.decode(errors="replace")
    for line in text.splitlines():
        if line.startswith("BENCH_JSON "):
            return json.loads(line[len("BENCH_JSON "):])
    raise RuntimeError(f"wrk printed no summary (exit {proc.popen.returncode}):\n{text[-2000:]}")


def reaped_children_cpu_seconds() -> float:
    """User+system time of this process's children that have exited and been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure_wrk(root: int, url: str, conns: int, duration: float, timeout: float, headers: tuple[str, ...] = (),
                script: Path | None = None) -> dict:
    """One wrk load with the CPU time and peak RSS of the process tree under `root` while it ran, and the
    cores wrk itself kept busy (on a small machine the load generator competes with the server)."""
    cpu_before, client_before, wall_before = tree_cpu_seconds(root), reaped_children_cpu_seconds(), time.monotonic()
    py_before, py_wait_before = python_thread_seconds(root), python_thread_wait_seconds(root)
    with RssSampler(root) as sampler:
        r = wrk_summary(url, conns, duration, timeout, headers, script)
    cpu_used = tree_cpu_seconds(root) - cpu_before
    py_after, py_wait_after = python_thread_seconds(root), python_thread_wait_seconds(root)
    wall = time.monotonic() - wall_before
    client_cores = (reaped_children_cpu_seconds() - client_before) / wall
    seconds = r["duration_us"] / 1e6
    socket_errors = r["connect"] + r["read"] + r["write"] + r["timeout"]
    return {
        "requests": r["requests"],
        "rps": r["requests"] / seconds if seconds else 0.0,
        "bytes_per_s": r["bytes"] / seconds if seconds else 0.0,
        "p50_ms": r["p50_us"] / 1000, "p75_ms": r["p75_us"] / 1000, "p90_ms": r["p90_us"] / 1000,
        "p99_ms": r["p99_us"] / 1000, "max_ms": r["max_us"] / 1000, "mean_ms": r["mean_us"] / 1000,
        "sd_ms": r.get("stdev_us", 0) / 1000,
        "errors": {"connect": r["connect"], "read": r["read"], "write": r["write"], "timeout": r["timeout"],
                   "status_ge_400": r["status"]},
        "error_total": socket_errors + r["status"],
        "peak_rss_mib": sampler.peak_kib / 1024,
        "cpu_s": cpu_used,
        "cpu_s_per_1k": cpu_used / r["requests"] * 1000 if r["requests"] else None,
        "client_cores": client_cores,
        "rss_samples": sampler.samples,
        # The application thread's share of the wall time, and its CPU per request (Peregrine only).
        "py_busy": (py_after - py_before) / wall if py_before is not None and py_after is not None else None,
        "py_cpu_us_per_req": ((py_after - py_before) / r["requests"] * 1e6
                              if py_before is not None and py_after is not None and r["requests"] else None),
        # Its share of the wall time ready to run but without a core (the machine's other threads, wrk included, had them).
        "py_waiting_for_core": ((py_wait_after - py_wait_before) / wall
                                if py_wait_before is not None and py_wait_after is not None else None),
    }


_H2LOAD_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def _h2load_ms(text: str) -> float:
    m = re.fullmatch(r"([0-9.]+)(us|ms|s)", text)
    if not m:
        raise ValueError(f"unexpected h2load duration {text!r}")
    return float(m.group(1)) * _H2LOAD_UNITS[m.group(2)]


def parse_h2load(text: str) -> dict:
    """The summary h2load prints at the end of a run. Its latency is min/max/mean/sd: it gives no percentiles."""
    out: dict = {}
    for line in text.splitlines():
        if m := re.match(r"finished in ([0-9.]+)s, ([0-9.]+) req/s", line):
            out["rps"] = float(m.group(2))
        elif m := re.match(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
                           r"(\d+) errored, (\d+) timeout", line):
            for key, value in zip(("total", "started", "done", "succeeded", "failed", "errored", "timeout"), m.groups()):
                out[key] = int(value)
        elif m := re.match(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", line):
            out["status"] = dict(zip(("2xx", "3xx", "4xx", "5xx"), map(int, m.groups())))
        elif line.startswith("time for request:"):
            fields = line.split(":", 1)[1].split()
            out["min_ms"], out["max_ms"], out["mean_ms"], out["sd_ms"] = (_h2load_ms(f) for f in fields[:4])
        elif line.startswith("Application protocol:"):
            out["protocol"] = line.split(":", 1)[1].strip()
        elif line.startswith("TLS Protocol:"):
            out["tls_version"] = line.split(":", 1)[1].strip()
        elif line.startswith("Cipher:"):
            out["tls_cipher"] = line.split(":", 1)[1].strip()
    missing = [k for k in ("rps", "succeeded", "failed", "status", "mean_ms") if k not in out]
    if missing:
        raise RuntimeError(f"h2load printed no {', '.join(missing)}:\n{text[-2000:]}")
    return out


def measure_h2load(root: int, url: str, clients: int, streams: int, duration: float, warmup: float,
                   protocol: str) -> dict:
    """One `h2load -t1 -c<clients> -m<streams> -D <duration> --warm-up-time <warmup>` load on url, with the CPU
    time and peak RSS of the process tree under `root`. h2load announces on stdout, as they happen, the start and
    the end of its measured period (after the warm-up): the server's CPU time is read at those two moments, so
    CPU per request counts the same requests as req/s. Raises unless h2load negotiated `protocol` (h2c or h2)."""
    cmd = ["h2load", "-t1", f"-c{clients}", f"-m{streams}", "-D", str(max(1, round(duration))),
           "--warm-up-time", str(max(0, round(warmup))), url]
    client_before, wall_before = reaped_children_cpu_seconds(), time.monotonic()
    proc = Proc("h2load", cmd, stdout=subprocess.PIPE)
    killer = threading.Timer(duration + warmup + 60, lambda: proc.stop(grace=2))
    killer.start()
    lines: list[str] = []
    cpu_start = cpu_end = wall_start = wall_end = None
    try:
        with RssSampler(root) as sampler:
            for raw in proc.popen.stdout:
                line = raw.decode(errors="replace").rstrip("\n")
                if line.startswith("progress:"):
                    continue
                lines.append(line)
                if line.startswith("Main benchmark duration is started") and cpu_start is None:
                    cpu_start, wall_start = tree_cpu_seconds(root), time.monotonic()
                elif line.startswith("Main benchmark duration is over"):
                    cpu_end, wall_end = tree_cpu_seconds(root), time.monotonic()
            proc.popen.wait()
    finally:
        killer.cancel()
        proc.stop(grace=2)
    client_cores = (reaped_children_cpu_seconds() - client_before) / (time.monotonic() - wall_before)
    text = "\n".join(lines)
    r = parse_h2load(text)
    if r.get("protocol") != protocol:
        raise RuntimeError(f"h2load negotiated {r.get('protocol', 'no protocol')!r}, not {protocol!r}:\n{text[-2000:]}")
    cpu_used = cpu_end - cpu_start if cpu_start is not None and cpu_end is not None else None
    window = wall_end - wall_start if wall_start is not None and wall_end is not None else None
    cpu_per_1k = (cpu_used / window / r["rps"] * 1000) if cpu_used is not None and window and r["rps"] else None
    return {
        "requests": r["succeeded"],
        "rps": r["rps"],
        "p50_ms": None, "p99_ms": None,
        "min_ms": r["min_ms"], "max_ms": r["max_ms"], "mean_ms": r["mean_ms"], "sd_ms": r["sd_ms"],
        "errors": {"failed": r["failed"], "errored": r["errored"], "timeout": r["timeout"], "status": r["status"]},
        # h2load's "failed" already counts the errored, the timed-out and the responses other than 2xx/3xx.
        "error_total": r["failed"],
        "protocol": r.get("protocol"), "tls_version": r.get("tls_version"), "tls_cipher": r.get("tls_cipher"),
        "peak_rss_mib": sampler.peak_kib / 1024,
        "cpu_s": cpu_used, "cpu_window_s": window,
        "cpu_s_per_1k": cpu_per_1k,
        "client_cores": client_cores,
        "rss_samples": sampler.samples,
        # The application thread's share of the wall time, and its CPU per request (Peregrine only).
        "py_busy": (py_after - py_before) / wall if py_before is not None and py_after is not None else None,
        "py_cpu_us_per_req": ((py_after - py_before) / r["requests"] * 1e6
                              if py_before is not None and py_after is not None and r["requests"] else None),
    }


# ---------------------------------------------------------------- the machine


def _run_text(cmd: list[str], timeout: float = 30) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return (out.stdout + out.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unavailable ({e})"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def java_version_of(pid: int) -> str:
    try:
        java = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return "unknown"
    text = _run_text([java, "-version"])
    return text.splitlines()[0] if text else "unknown"


def package_versions(names=("fastapi", "starlette", "pydantic", "flask", "werkzeug", "uvicorn", "gunicorn",
                            "uvloop", "httptools")) -> dict:
    code = ("import importlib.metadata as m, json, sys\n"
            "out = {'python': sys.version.split()[0]}\n"
            f"for n in {list(names)!r}:\n"
            "    try: out[n] = m.version(n)\n"
            "    except m.PackageNotFoundError: out[n] = None\n"
            "print(json.dumps(out))")
    import json
    text = _run_text([str(VENV_PY), "-c", code])
    try:
        return json.loads(text.splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": text}


def machine_info(peregrine_version: str | None = None) -> dict:
    wrk = _run_text(["wrk", "-v"]).splitlines()
    info = {
        "hostname": platform.node(),
        "nproc": os.cpu_count(),
        "cpu_model": cpu_model(),
        "kernel": platform.release(),
        "os": _os_release(),
        "memory_gib": round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30, 1),
        "loadavg_at_start": os.getloadavg(),
        "wrk": "not installed" if not wrk or wrk[0].startswith("unavailable") else " ".join(wrk[0].split()[:2]),
        "peregrine": peregrine_version,
        "git_commit": _run_text(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
        "PEREGRINE_JAVA_OPTS": os.environ.get("PEREGRINE_JAVA_OPTS", ""),
    }
    info.update(package_versions())
    return info


def _os_release() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.platform()


def machine_markdown(m: dict) -> str:
    return (f"Machine: {m['nproc']} CPUs ({m['cpu_model']}), {m['memory_gib']} GiB, {m['os']}, Linux {m['kernel']}; "
            f"load average at start {', '.join(f'{x:.2f}' for x in m['loadavg_at_start'])}.  \n"
            f"Software: {m.get('peregrine')} ({m.get('java', 'java ?')}), CPython {m.get('python')}, "
            f"uvicorn {m.get('uvicorn')} (httptools {m.get('httptools')}, uvloop {m.get('uvloop')}), "
            f"gunicorn {m.get('gunicorn')}, FastAPI {m.get('fastapi')} (Starlette {m.get('starlette')}, "
            f"pydantic {m.get('pydantic')}), Flask {m.get('flask')} (Werkzeug {m.get('werkzeug')}), {m['wrk']}; "
            f"commit {m['git_commit']}.")


def write_results(out_dir: Path, name: str, data: dict, md: str, *extra_lines: str) -> None:
    """Writes NAME.json and NAME.md under out_dir, prints the Markdown and where both went."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / f"{name}.json", out_dir / f"{name}.md"
    json_path.write_text(json.dumps(data, indent=2) + "\n")
    md_path.write_text(md)
    print()
    print(md)
    print("\n".join([f"Results: {json_path}", f"         {md_path}", *extra_lines]))


def median(values: list[float]) -> float | None:
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def summarize_rounds(ok: list[dict], extra: tuple[str, ...] = ()) -> dict:
    """Medians over the successful rounds of one load (peak RSS: the largest; errors also summed);
    `extra` names further per-round figures to take the median of."""
    summary = {
        "rounds": len(ok),
        "rps": median([m["rps"] for m in ok]),
        "rps_min": min(m["rps"] for m in ok), "rps_max": max(m["rps"] for m in ok),
        "p50_ms": median([m["p50_ms"] for m in ok]),
        "p99_ms": median([m["p99_ms"] for m in ok]),
        "errors": median([m["error_total"] for m in ok]),
        "errors_total_all_rounds": sum(m["error_total"] for m in ok),
        "peak_rss_mib": max(m["peak_rss_mib"] for m in ok),
        "cpu_s_per_1k": median([m["cpu_s_per_1k"] for m in ok]),
    }
    for key in extra:
        summary[key] = median([m.get(key) for m in ok])
    return summary


def describe_run(build: bool = True) -> dict | None:
    """Builds the server when needed (build=False: Peregrine is not measured) and describes the machine and
    the software for the results file, with the start time; None, after saying why, when the build fails."""
    try:
        version = build_peregrine() if build else None
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        log(f"bench: {e}")
        return None
    machine = machine_info(version)
    machine["started"] = time.strftime("%Y-%m-%d %H:%M:%S %z")
    return machine
