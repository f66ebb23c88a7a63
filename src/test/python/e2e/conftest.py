"""Shared machinery for Peregrine's end-to-end tests.

* Starting a server: the ``start_server`` (per test) and ``start_module_server``
  (per module) fixtures are factories: ``server = start(target, *options,
  env=None, kind=None)``.  The command is ``bin/peregrine`` of this repository,
  or the shell-split value of ``PEREGRINE_CMD``; it runs with cwd =
  src/test/python/apps and always gets ``--venv sys.prefix`` and a free
  ``--port`` unless the test passes its own.
* Reference mode: ``E2E_REFERENCE=1`` runs uvicorn (ASGI targets) or gunicorn
  (WSGI targets) instead, translating the options that have an equivalent and
  dropping the rest; tests marked ``peregrine_only`` are deselected.
* Raw HTTP: ``RawConn`` sends bytes and reads responses with their framing
  (Content-Length, chunked, or delimited by close), and can check that the
  server closed the connection.
"""

import json
import math
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

E2E_DIR = Path(__file__).resolve().parent
PY_TEST_ROOT = E2E_DIR.parent  # src/test/python
APPS_DIR = PY_TEST_ROOT / "apps"
REPO_ROOT = PY_TEST_ROOT.parents[2]
REFERENCE = os.environ.get("E2E_REFERENCE") == "1"

# Targets served by gunicorn in reference mode; everything else is ASGI.
WSGI_MODULES = ("raw_wsgi", "flask_app", "django_app.wsgi")

# Peregrine options that take a value (everything else starting with -- is a flag).
VALUE_OPTIONS = {
    "--host", "--port", "--unix", "--workers", "--protocol", "--root-path", "--scheme",
    "--backlog", "--max-connections", "--max-body", "--max-header-size", "--keep-alive",
    "--request-timeout", "--graceful-timeout", "--drain-delay", "--wsgi-threads",
    "--forwarded-allow-ips", "--venv", "--python-path", "--python-home", "--lifespan-scope",
    "--tls-cert", "--tls-key", "--tls-ciphers", "--quic-port", "--ws-max-message",
    "--ws-ping-interval", "--ws-ping-timeout", "--ws-max-queue", "--ws-max-queue-bytes",
    "--static-dir", "--acme-domain", "--acme-email", "--acme-cache", "--acme-directory",
    "--acme-ca-bundle", "--redirect-http", "--hsts", "--rate-limit", "--rate-limit-burst",
    "--cache-size", "--cache-max-object", "--cache-ttl-max", "--compress-min-size",
    "--health-check-path", "--access-log-format", "--metrics-port", "--metrics-host",
    "--log-level",
}

READY_TIMEOUT = 60.0


def peregrine_cmd():
    cmd = os.environ.get("PEREGRINE_CMD")
    if cmd:
        return shlex.split(cmd)
    return [str(REPO_ROOT / "bin" / "peregrine")]


_ports_handed_out = set()


def free_port():
    """A port nothing listens on, never one this session handed out before.

    The kernel may give a port that was just probed and released to the very next probe: a test
    that takes one port for the server and then more for its peers (Pebble takes five) would then
    pass the same number to two listeners, and one of them fails with "Address already in use"."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _ports_handed_out:
            _ports_handed_out.add(port)
            return port


def kind_of(target):
    module = target.split(":", 1)[0]
    return "wsgi" if module in WSGI_MODULES else "asgi"


def parse_options(options):
    """[(name, value-or-None)] from a Peregrine option list."""
    parsed = []
    options = list(options)
    i = 0
    while i < len(options):
        opt = options[i]
        if "=" in opt and opt.startswith("--"):
            name, value = opt.split("=", 1)
            parsed.append((name, value))
        elif opt in VALUE_OPTIONS:
            parsed.append((opt, options[i + 1]))
            i += 1
        else:
            parsed.append((opt, None))
        i += 1
    return parsed


def option_value(options, name):
    value = None
    for opt, val in parse_options(options):
        if opt == name:
            value = val
    return value


def base_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEREGRINE_")}
    env.pop("E2E_REFERENCE", None)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if extra:
        env.update(extra)
    return env


def reference_command(target, options, kind, port):
    """The uvicorn / gunicorn command line equivalent to a Peregrine one.

    Options without an equivalent are dropped; tests whose point is such an
    option are marked peregrine_only.  Returns (argv, extra_env)."""
    extra_env = {}
    parsed = parse_options(options)
    host = "127.0.0.1"
    unix = None
    for opt, val in parsed:
        if opt == "--host":
            host = val
        elif opt == "--unix":
            unix = val
    if kind == "asgi":
        # --http h11: the same parser whatever else is installed in the venv
        # (uvicorn picks httptools when it is there, and the two differ on
        # several malformed requests)
        argv = [sys.executable, "-m", "uvicorn", "--http", "h11", "--lifespan", "auto"]
        argv += ["--uds", unix] if unix else ["--host", host, "--port", str(port)]
        lifespan_off = False
        for opt, val in parsed:
            if opt == "--root-path":
                argv += ["--root-path", val]
            elif opt == "--factory":
                argv += ["--factory"]
            elif opt == "--no-lifespan":
                lifespan_off = True
            elif opt == "--no-uvloop":
                argv += ["--loop", "asyncio"]
            elif opt == "--backlog":
                argv += ["--backlog", val]
            elif opt == "--keep-alive":
                argv += ["--timeout-keep-alive", str(max(1, math.ceil(int(val) / 1000)))]
            elif opt == "--log-level":
                argv += ["--log-level", "critical" if val == "silent" else val]
            elif opt == "--python-path":
                argv += ["--app-dir", val]
            elif opt == "--graceful-timeout":
                argv += ["--timeout-graceful-shutdown", str(max(1, math.ceil(int(val) / 1000)))]
            elif opt == "--workers":
                argv += ["--workers", val]
            elif opt == "--forwarded-allow-ips":
                argv += ["--forwarded-allow-ips", val]
            elif opt == "--ws-max-message":
                argv += ["--ws-max-size", val]
            elif opt == "--ws-max-queue":
                argv += ["--ws-max-queue", val]
            elif opt == "--ws-ping-interval":
                argv += ["--ws-ping-interval", str(int(val) / 1000)]
            elif opt == "--ws-ping-timeout":
                argv += ["--ws-ping-timeout", str(int(val) / 1000)]
            elif opt == "--no-websockets":
                argv += ["--ws", "none"]
        # The websockets implementation, whose permessage-deflate is on unless Peregrine's --ws-compress is off.
        if "--no-websockets" not in dict(parsed):
            argv += ["--ws", "websockets"]
        if "--ws-compress" not in dict(parsed):
            argv += ["--ws-per-message-deflate", "false"]
        if lifespan_off:
            argv[argv.index("auto")] = "off"
        argv.append(target)
    else:
        bind = "unix:" + unix if unix else "%s:%d" % (host, port)
        # gthread: the sync worker closes every connection after one response,
        # and Peregrine keeps WSGI connections alive like ASGI ones.
        argv = [sys.executable, "-m", "gunicorn", "-b", bind, "-k", "gthread", "--threads", "1"]
        argv += ["--error-logfile", "-", "--keep-alive", "5"]
        for opt, val in parsed:
            if opt == "--root-path":
                extra_env["SCRIPT_NAME"] = val
            elif opt == "--backlog":
                argv += ["--backlog", val]
            elif opt == "--keep-alive":
                argv += ["--keep-alive", str(max(1, math.ceil(int(val) / 1000)))]
            elif opt == "--log-level":
                argv += ["--log-level", "critical" if val == "silent" else val]
            elif opt == "--python-path":
                argv += ["--pythonpath", val]
            elif opt == "--access-log":
                argv += ["--access-logfile", "-"]
            elif opt == "--wsgi-threads":
                argv[argv.index("--threads") + 1] = val
            elif opt == "--graceful-timeout":
                argv += ["--graceful-timeout", str(max(1, math.ceil(int(val) / 1000)))]
            elif opt == "--workers":
                argv += ["--workers", val]
        if any(opt == "--factory" for opt, _ in parsed):
            target += "()"
        argv.append(target)
    return argv, extra_env


class ServerExited(Exception):
    pass


LIVE_SERVERS = []


class Server:
    """A server process started by a test: Peregrine, or the reference server."""

    def __init__(self, argv, env, kind, port, unix, log_path, target):
        self.argv = argv
        self.kind = kind
        self.port = port
        self.unix = unix
        self.target = target
        self.log_path = Path(log_path)
        self._log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(
                argv,
                cwd=str(APPS_DIR),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except FileNotFoundError:
            self._log.close()
            raise ServerExited("cannot run %r: no such file (set PEREGRINE_CMD to the server command)" % argv[0])
        self.returncode = None
        LIVE_SERVERS.append(self)

    # -- addresses -------------------------------------------------------
    @property
    def url(self):
        if self.unix:
            return "http://localhost"
        return "http://127.0.0.1:%d" % self.port

    def client(self, **kwargs):
        import httpx

        kwargs.setdefault("timeout", 15)
        if self.unix:
            kwargs.setdefault("transport", httpx.HTTPTransport(uds=self.unix))
        return httpx.Client(base_url=self.url, **kwargs)

    def request(self, method, path, **kwargs):
        with self.client() as c:
            return c.request(method, path, **kwargs)

    def get(self, path, **kwargs):
        return self.request("GET", path, **kwargs)

    def post(self, path, **kwargs):
        return self.request("POST", path, **kwargs)

    def raw(self, timeout=10):
        return RawConn(self.unix or self.port, timeout=timeout)

    # -- output ----------------------------------------------------------
    def output(self):
        if not self._log.closed:
            self._log.flush()
        try:
            return self.log_path.read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def complete_output(self):
        """The output up to its last newline: reading the file while the server writes a line to it
        can return the first part of that line, which a test must not take for the whole line."""
        out = self.output()
        return out[:out.rfind("\n") + 1]

    def lines(self):
        return self.complete_output().splitlines()

    def wait_for_output(self, predicate, timeout=10.0):
        """Wait until predicate(complete output) is true (a str predicate means 'contained')."""
        if isinstance(predicate, str):
            needle = predicate
            predicate = lambda out: needle in out  # noqa: E731
        deadline = time.monotonic() + timeout
        while True:
            out = self.complete_output()
            if predicate(out):
                return out
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)

    # -- lifecycle -------------------------------------------------------
    def _can_connect(self):
        try:
            if self.unix:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(1)
                s.connect(self.unix)
            else:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=1)
        except OSError:
            return False
        s.close()
        return True

    def wait_ready(self, timeout=READY_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerExited(
                    "server exited with %s before accepting connections\ncommand: %s\noutput:\n%s"
                    % (self.proc.returncode, shlex.join(self.argv), self.output()[-6000:])
                )
            if self._can_connect():
                return self
            time.sleep(0.05)
        raise ServerExited(
            "server did not accept connections within %.0f s\ncommand: %s\noutput:\n%s"
            % (timeout, shlex.join(self.argv), self.output()[-6000:])
        )

    def wait_exit(self, timeout=60):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def running(self):
        return self.proc.poll() is None

    def terminate(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout=30):
        """SIGTERM, wait for the exit, and return the exit code."""
        if self.returncode is not None:
            return self.returncode
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                # still running (so its process group is still its own)
                self._kill_group()
        self.returncode = self.proc.wait()
        self._log.close()
        if self in LIVE_SERVERS:
            LIVE_SERVERS.remove(self)
        return self.returncode

    def _kill_group(self):
        # The server was started in a session of its own: the process group
        # holds only it and what it started (workers, a JVM behind a wrapper
        # script).
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.proc.poll() is None:
            self.proc.kill()


def launch(target, *options, env=None, kind=None, log_dir, wait=True, ready_port=None):
    """Start Peregrine (or the reference server) for target.

    A free --port is added unless options has --port or --unix, or ready_port
    is given (the port the server is expected to listen on without --port)."""
    kind = kind or kind_of(target)
    options = [str(o) for o in options]
    unix = option_value(options, "--unix")
    port = option_value(options, "--port")
    if port is not None:
        port = int(port)
    elif ready_port is not None:
        port = ready_port
    elif unix is None:
        port = free_port()
        options = ["--port", str(port)] + options
    extra_env = dict(env or {})
    if REFERENCE:
        argv, ref_env = reference_command(target, options, kind, port)
        extra_env.update(ref_env)
    else:
        argv = peregrine_cmd() + options
        if "--venv" not in options:
            argv += ["--venv", sys.prefix]
        argv.append(target)
    log_path = Path(log_dir) / ("server-%d-%s.log" % (len(os.listdir(log_dir)), target.replace(":", "_")))
    server = Server(argv, base_env(extra_env), kind, port, unix, log_path, target)
    if wait:
        try:
            server.wait_ready()
        except ServerExited:
            server.stop()
            raise
    return server


def run_cli(*args, env=None, timeout=60):
    """Run the Peregrine command to completion: (exit code, combined output)."""
    proc = subprocess.run(
        peregrine_cmd() + [str(a) for a in args],
        cwd=str(APPS_DIR),
        env=base_env(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=timeout,
        start_new_session=True,
    )
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


# ---------------------------------------------------------------------------
# Raw HTTP/1.x over sockets


class IncompleteResponse(AssertionError):
    def __init__(self, message, data=b""):
        super().__init__(message)
        self.data = data


class Response:
    def __init__(self, version, status, reason, headers, raw_head):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers  # [(name, value)] as received
        self.raw_head = raw_head
        self.body = None
        self.framing = None  # "content-length", "chunked", "close" or "none"
        self.chunks = None  # chunk sizes when chunked
        self.interim = []  # 1xx responses that preceded this one

    def header(self, name):
        values = self.header_all(name)
        return ", ".join(values) if values else None

    def header_all(self, name):
        name = name.lower()
        return [v for n, v in self.headers if n.lower() == name]

    def has_token(self, name, token):
        value = self.header(name) or ""
        return token.lower() in [t.strip().lower() for t in value.split(",")]

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<Response %s %d %r framing=%s body=%r>" % (
            self.version, self.status, self.reason, self.framing, (self.body or b"")[:200])


class RawConn:
    """One client connection speaking raw HTTP/1.x bytes."""

    def __init__(self, addr, timeout=10):
        self.timeout = timeout
        if isinstance(addr, str):
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(addr)
        else:
            self.sock = socket.create_connection(("127.0.0.1", addr), timeout=timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.eof = False
        self.reset = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        self.sock.sendall(data)

    @staticmethod
    def request_bytes(method="GET", path="/", headers=None, body=b"", version="HTTP/1.1", host="127.0.0.1"):
        lines = ["%s %s %s" % (method, path, version)]
        if host is not None:
            lines.append("Host: %s" % host)
        for name, value in headers or []:
            lines.append("%s: %s" % (name, value))
        if isinstance(body, str):
            body = body.encode()
        if body and not any(n.lower() in ("content-length", "transfer-encoding") for n, _ in headers or []):
            lines.append("Content-Length: %d" % len(body))
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    def send_chunked(self, path, body, piece=7000):
        """POST body with Transfer-Encoding: chunked, in chunks of `piece` bytes, each sent on its own."""
        self.send(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n" % path.encode())
        for i in range(0, len(body), piece):
            chunk = body[i : i + piece]
            self.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        self.send(b"0\r\n\r\n")

    def send_request(self, method="GET", path="/", headers=None, body=b"", version="HTTP/1.1", host="127.0.0.1"):
        self.send(self.request_bytes(method, path, headers, body, version, host))

    # -- reading ---------------------------------------------------------
    def _fill(self, deadline):
        if self.eof:
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("timed out")
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            self.eof = True
            self.reset = True
            return False
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def _read_until(self, delimiter, deadline, what):
        while True:
            idx = self.buf.find(delimiter)
            if idx >= 0:
                out = bytes(self.buf[: idx + len(delimiter)])
                del self.buf[: idx + len(delimiter)]
                return out
            try:
                more = self._fill(deadline)
            except socket.timeout:
                raise IncompleteResponse("timed out waiting for %s; have %r" % (what, bytes(self.buf[:500])), bytes(self.buf))
            if not more:
                raise IncompleteResponse("connection closed while reading %s; have %r" % (what, bytes(self.buf[:500])), bytes(self.buf))

    def _read_exact(self, n, deadline, what):
        while len(self.buf) < n:
            try:
                more = self._fill(deadline)
            except socket.timeout:
                raise IncompleteResponse("timed out reading %s: %d of %d bytes" % (what, len(self.buf), n), bytes(self.buf))
            if not more:
                raise IncompleteResponse("connection closed reading %s: %d of %d bytes" % (what, len(self.buf), n), bytes(self.buf))
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _read_to_close(self, deadline):
        while True:
            try:
                more = self._fill(deadline)
            except socket.timeout:
                raise IncompleteResponse("timed out waiting for the server to close a close-delimited body", bytes(self.buf))
            if not more:
                break
        out = bytes(self.buf)
        self.buf.clear()
        return out

    def read_head(self, timeout=None, skip_interim=True):
        deadline = time.monotonic() + (timeout or self.timeout)
        interim = []
        while True:
            raw = self._read_until(b"\r\n\r\n", deadline, "a response head")
            text = raw.decode("latin-1")
            lines = text[:-4].split("\r\n")
            parts = lines[0].split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/"):
                raise AssertionError("not an HTTP response: %r" % raw[:200])
            headers = []
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers.append((name, value.strip()))
            resp = Response(parts[0], int(parts[1]), parts[2] if len(parts) > 2 else "", headers, raw)
            if skip_interim and 100 <= resp.status < 200 and resp.status != 101:
                interim.append(resp)
                continue
            resp.interim = interim
            return resp

    def read_body(self, resp, method="GET", timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        te = resp.header("transfer-encoding")
        cl = resp.header("content-length")
        if method == "HEAD" or resp.status in (204, 304) or 100 <= resp.status < 200:
            resp.framing, resp.body = "none", b""
        elif te is not None:
            assert te.strip().lower() == "chunked", "unexpected Transfer-Encoding %r" % te
            resp.framing, resp.chunks = "chunked", []
            body = bytearray()
            while True:
                line = self._read_until(b"\r\n", deadline, "a chunk size line")
                size = int(line.split(b";", 1)[0].strip(), 16)
                resp.chunks.append(size)
                if size == 0:
                    while self._read_until(b"\r\n", deadline, "the trailer section") != b"\r\n":
                        pass
                    break
                body += self._read_exact(size, deadline, "chunk data")
                crlf = self._read_exact(2, deadline, "the CRLF after chunk data")
                assert crlf == b"\r\n", "chunk data not followed by CRLF: %r" % crlf
            resp.body = bytes(body)
        elif cl is not None:
            resp.framing = "content-length"
            resp.body = self._read_exact(int(cl), deadline, "a Content-Length body")
        else:
            resp.framing = "close"
            resp.body = self._read_to_close(deadline)
        return resp

    def read_response(self, method="GET", timeout=None):
        resp = self.read_head(timeout)
        return self.read_body(resp, method, timeout)

    def request(self, method="GET", path="/", headers=None, body=b"", version="HTTP/1.1", timeout=None):
        self.send_request(method, path, headers, body, version)
        return self.read_response(method, timeout)

    def read_some(self, timeout=None):
        """Whatever arrives next (b'' at end of stream)."""
        if self.buf:
            out = bytes(self.buf)
            self.buf.clear()
            return out
        deadline = time.monotonic() + (timeout or self.timeout)
        try:
            if not self._fill(deadline):
                return b""
        except socket.timeout:
            raise IncompleteResponse("timed out waiting for data")
        out = bytes(self.buf)
        self.buf.clear()
        return out

    def read_until_close(self, timeout=5.0):
        """Everything until the server closes the connection; fails if it
        does not close within timeout seconds."""
        deadline = time.monotonic() + timeout
        try:
            return self._read_to_close(deadline)
        except IncompleteResponse as e:
            raise AssertionError(
                "the server did not close the connection within %.1f s (received %r)" % (timeout, e.data[:300])
            )

    def expect_closed(self, timeout=5.0):
        """Assert that nothing more arrives and the server closes the connection."""
        data = self.read_until_close(timeout)
        assert data == b"", "unexpected bytes after the response: %r" % data[:300]
        return "reset" if self.reset else "eof"


# ---------------------------------------------------------------------------
# Fixtures and hooks


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "peregrine_only: behaviour only Peregrine has; deselected when E2E_REFERENCE=1"
    )


def pytest_collection_modifyitems(config, items):
    # E2E_REFERENCE_ALL=1 keeps the peregrine_only tests too, to see how the
    # reference servers deviate (they are expected to fail there).
    if not REFERENCE or os.environ.get("E2E_REFERENCE_ALL") == "1":
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker("peregrine_only") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_report_header(config):
    if REFERENCE:
        return "e2e: REFERENCE mode (uvicorn for ASGI, gunicorn for WSGI); peregrine_only tests deselected"
    return "e2e: Peregrine command: %s" % shlex.join(peregrine_cmd())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and LIVE_SERVERS:
        for server in list(LIVE_SERVERS):
            report.sections.append(
                ("server output: %s (%s)" % (server.target, shlex.join(server.argv)), server.output()[-4000:])
            )


class _Factory:
    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.servers = []

    def __call__(self, target, *options, **kwargs):
        kwargs.setdefault("log_dir", self.log_dir)
        server = launch(target, *options, **kwargs)
        self.servers.append(server)
        return server

    def stop_all(self):
        for server in self.servers:
            server.stop()


@pytest.fixture
def start_server(tmp_path):
    """Per-test server factory: start_server(target, *options, env=None, kind=None)."""
    log_dir = tmp_path / "server-logs"
    log_dir.mkdir()
    factory = _Factory(log_dir)
    yield factory
    factory.stop_all()


@pytest.fixture(scope="module")
def start_module_server(tmp_path_factory):
    """Per-module server factory, for servers that several tests share."""
    factory = _Factory(tmp_path_factory.mktemp("server-logs"))
    yield factory
    factory.stop_all()


@pytest.fixture
def marker_file(tmp_path):
    """A path for PEREGRINE_TEST_MARKER (lifespan startup/shutdown records)."""
    return tmp_path / "lifespan-marker.txt"


def poll(fn, timeout=10.0, interval=0.05):
    """Call fn until it returns something truthy; return the last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def java_pid(server):
    """The JVM of the server: bin/peregrine's process or a descendant of it in its session."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getsid(int(entry.name)) != server.proc.pid:
                continue
            if (entry / "comm").read_text().strip() == "java":
                return int(entry.name)
        except (OSError, ProcessLookupError):
            continue
    raise AssertionError("no java process in the server's session")


def strace_attached(pid, expression, out_path):
    """strace on every thread of pid with the filter `expression` (as for -e), writing to out_path;
    returns the strace process once it is attached."""
    proc = subprocess.Popen(["strace", "-f", "-qq", "-e", expression, "-o", str(out_path), "-p", str(pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # strace prints nothing on attach with -qq, and attaches to the threads one after the other:
    # wait until the tracer shows in every thread's status, or a request can pass through an
    # I/O thread not yet traced (threads started later are followed by -f).
    def traced(status):
        try:
            return any(line.startswith("TracerPid:") and line.split()[1] != "0" for line in status.read_text().splitlines())
        except FileNotFoundError:  # a thread that ended meanwhile
            return True

    attached = poll(lambda: all(traced(task / "status") for task in Path("/proc/%d/task" % pid).iterdir()), timeout=20)
    assert attached, "strace did not attach to every thread"
    return proc


def settled(read, what, readings=4, interval=1.0, timeout=60.0):
    """Reads read() until it gives the same value `readings` times in a row and returns that value:
    for a quantity that must stop growing, such as what the server sent to a client that reads
    nothing. Fails, saying `what`, if it still changes after timeout seconds."""
    history = [read()]
    deadline = time.monotonic() + timeout
    while len(history) < readings or any(value != history[-1] for value in history[-readings:]):
        assert time.monotonic() < deadline, "%s: still changing after %.0f s (last readings: %r)" % (
            what, timeout, history[-readings:])
        time.sleep(interval)
        history.append(read())
    return history[-1]


# The two raw applications, by protocol.
RAW_TARGETS = {"asgi": "raw_asgi:app", "wsgi": "raw_wsgi:app"}
HELLO = {"asgi": b"hello, asgi", "wsgi": b"hello, wsgi"}


class LazyServers:
    """raw_servers(kind, *options): the raw ASGI or WSGI app, started on first
    use and shared by the tests of a module (restarted if it died)."""

    def __init__(self, factory):
        self.factory = factory
        self.cache = {}

    def __call__(self, kind, *options, env=None):
        key = (kind, tuple(str(o) for o in options), tuple(sorted((env or {}).items())))
        server = self.cache.get(key)
        if server is None or not server.running():
            server = self.factory(RAW_TARGETS[kind], *options, env=env, kind=kind)
            self.cache[key] = server
        return server


@pytest.fixture(scope="module")
def raw_servers(start_module_server):
    return LazyServers(start_module_server)


def read_until_contains(conn, needle, timeout=8.0):
    """Bytes received on conn (after whatever was already parsed) until
    `needle` is among them; fails if it does not arrive within timeout."""
    import time as _time

    deadline = _time.monotonic() + timeout
    got = bytearray()
    while needle not in got:
        remaining = deadline - _time.monotonic()
        if remaining <= 0:
            raise AssertionError("%r did not arrive within %.1f s; got %r" % (needle, timeout, bytes(got[:300])))
        try:
            more = conn.read_some(timeout=remaining)
        except IncompleteResponse:
            raise AssertionError("%r did not arrive within %.1f s; got %r" % (needle, timeout, bytes(got[:300])))
        if not more:
            raise AssertionError("connection closed before %r arrived; got %r" % (needle, bytes(got[:300])))
        got += more
    return bytes(got)


def assert_clean_exit(server, code):
    """SIGTERM ends Peregrine with exit code 0.  In reference mode uvicorn
    re-raises SIGTERM after its graceful shutdown (exit status -15), which is
    what is checked for it instead; gunicorn exits 0 like Peregrine."""
    if REFERENCE and server.kind == "asgi":
        assert code == -signal.SIGTERM, "uvicorn exited with %r" % code
    else:
        assert code == 0, "exit code %r after SIGTERM\n%s" % (code, server.output()[-3000:])
