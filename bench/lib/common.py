"""Shared helpers of bench/run, bench/floor and bench/memory (Python 3.11 standard library only).

- starting servers in their own process group and stopping every one of them on exit, failure,
  Ctrl-C or SIGTERM (TERM to the group, then KILL);
- reading the RSS and CPU time of a process tree from /proc;
- waiting for a server to answer GET / with 200;
- describing the machine and the software versions.
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
PEREGRINE = ROOT / "bin" / "peregrine"
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


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


def rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


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


def tree_cpu_seconds(root: int) -> float:
    """utime+stime of the tree, plus the children they have reaped (cutime+cstime)."""
    ticks = 0
    for pid in tree_pids(root):
        fields = _stat_fields(pid)
        if fields:
            # Fields 14-17 of /proc/PID/stat (utime stime cutime cstime), counted from 1 with pid and comm.
            ticks += sum(int(x) for x in fields[11:15])
    return ticks / CLK_TCK


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


def http_get(port: int, path: str = "/", timeout: float = 2.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def wait_ready(proc: Proc, port: int, timeout: float = 60.0) -> float:
    """Polls GET / until it answers 200; returns the seconds it took. Raises if the process exits or on timeout."""
    started = time.monotonic()
    while True:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited with status {proc.popen.returncode} before it was ready:\n"
                               + proc.log_tail())
        try:
            status, _ = http_get(port, "/", timeout=1.0)
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
    log("bench: bin/peregrine --version (builds the server with Maven when the jar is missing or stale)")
    out = subprocess.run([str(PEREGRINE), "--version"], capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"bin/peregrine --version failed:\n{out.stderr[-3000:]}")
    return out.stdout.strip().splitlines()[-1]


def child_env(**extra: str) -> dict:
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    env["PATH"] = f"{VENV / 'bin'}:{env.get('PATH', '')}"
    env.update(extra)
    return env


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
        "wrk": " ".join(wrk[0].split()[:2]) if wrk else "unknown",
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
