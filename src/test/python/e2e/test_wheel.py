"""The pip package: the wheel of bin/build-wheel installed into a fresh virtualenv of the CPython running
these tests (bin/test runs them under 3.11, 3.14 and 3.13), and its two commands, `peregrine` and
`python -m peregrine`, run with a PATH that holds no java and without JAVA_HOME.

The wheel is the one named by PEREGRINE_WHEEL (bin/test builds it once before the suites), else this
module builds it. The virtualenv gets the wheel with its uvloop extra, FastAPI and Flask where the
test venv has them (the package mirror has no 3.13 builds of some).
"""

import importlib.util
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from conftest import APPS_DIR, REPO_ROOT, Server, base_env, free_port, kind_of, poll
from test_workers import LoadLoop, children, wait_workers

pytestmark = pytest.mark.peregrine_only

WHEEL_ENV = "PEREGRINE_WHEEL"


@pytest.fixture(scope="module")
def wheel():
    given = os.environ.get(WHEEL_ENV)
    if given:
        assert Path(given).is_file(), "%s=%s names no file" % (WHEEL_ENV, given)
        return Path(given)
    built = subprocess.run([str(REPO_ROOT / "bin" / "build-wheel")], stdout=subprocess.PIPE, text=True, timeout=900)
    assert built.returncode == 0, "bin/build-wheel failed"
    return Path(built.stdout.strip().splitlines()[-1])


class Installed:
    """A virtualenv holding the wheel, and how to run its commands."""

    def __init__(self, venv):
        self.venv = venv
        self.python = venv / "bin" / "python"
        self.script = venv / "bin" / "peregrine"

    def command(self, entry):
        return [str(self.script)] if entry == "script" else [str(self.python), "-m", "peregrine"]

    def env(self, extra=None):
        """The test environment without JAVA_HOME, with only the virtualenv's bin on PATH."""
        env = base_env(extra)
        env.pop("JAVA_HOME", None)
        env["PATH"] = str(self.venv / "bin")
        assert shutil.which("java", path=env["PATH"]) is None
        return env

    def run(self, entry, *args, env=None):
        result = subprocess.run(self.command(entry) + [str(a) for a in args], cwd=APPS_DIR, env=self.env(env),
                                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        return result.returncode, result.stdout, result.stderr

    def ask(self, code):
        """What the virtualenv's own interpreter prints for `code`."""
        return subprocess.run([str(self.python), "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def has(module):
    return importlib.util.find_spec(module) is not None


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    venv = tmp_path_factory.mktemp("wheel") / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=120)
    packages = [str(wheel) + ("[uvloop]" if has("uvloop") else "")] + [m for m in ("fastapi", "flask") if has(m)]
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--retries", "0", *packages],
                   check=True, timeout=600)
    return Installed(venv)


@pytest.fixture
def serve(installed, tmp_path):
    """serve(entry, target, *options, env=None): a server started by one of the wheel's commands."""
    servers = []

    def start(entry, target, *options, env=None):
        port = free_port()
        argv = installed.command(entry) + ["--port", str(port), *map(str, options), target]
        log = tmp_path / ("server-%d.log" % len(servers))
        server = Server(argv, installed.env(env), kind_of(target), port, None, log, target)
        servers.append(server)
        server.wait_ready()
        return server

    yield start
    for server in servers:
        server.stop()


def wheel_version(wheel):
    return wheel.name.split("-")[1]


# ---------------------------------------------------------------------------
# What pip installed


def test_the_wheel_installs_the_command_a_runtime_of_the_needed_modules_and_the_aot_cache(installed, wheel):
    assert re.fullmatch(r"peregrine_server-[0-9.]+-py3-none-manylinux_2_\d+_x86_64(\.manylinux2014_x86_64)?\.whl", wheel.name)
    assert os.access(installed.script, os.X_OK)
    assert installed.script.read_text().startswith("#!%s/bin/python" % installed.venv)
    runtime = Path(installed.ask("import peregrine._launcher as l; print(l.RUNTIME)"))
    assert str(runtime).startswith(str(installed.venv))
    assert installed.ask("import importlib.metadata as m; print(m.metadata('peregrine-server').get_all('Provides-Extra'))") \
        == "['uvloop']"

    java = runtime / "java" / "bin" / "java"
    release = (runtime / "java" / "release").read_text()
    modules = set(re.search(r'^MODULES="([^"]*)"', release, re.MULTILINE).group(1).split())
    assert {"java.base", "java.logging", "java.naming", "jdk.unsupported"} <= modules, modules
    assert not modules & {"java.desktop", "java.sql", "java.xml", "jdk.compiler", "jdk.jshell"}, modules
    listed = subprocess.run([str(java), "--list-modules"], capture_output=True, text=True, check=True).stdout
    assert {line.split("@")[0] for line in listed.split()} == modules
    assert os.access(runtime / "java" / "lib" / "jspawnhelper", os.X_OK), "the supervisor starts workers through it"
    assert (runtime / "server" / "quarkus-run.jar").is_file() and (runtime / "jvm-options").is_file()
    assert (runtime / "server.aot").stat().st_size > 1_000_000
    assert [p for p in runtime.rglob("*") if p.is_symlink()] == []


@pytest.mark.parametrize("entry", ["script", "module"])
def test_version(installed, wheel, entry):
    code, out, err = installed.run(entry, "--version")
    assert (code, out.strip()) == (0, "peregrine " + wheel_version(wheel)), err


@pytest.mark.parametrize("entry", ["script", "module"])
def test_a_bad_option_is_one_line_and_exit_status_2(installed, entry):
    code, out, err = installed.run(entry, "--no-such-option", "raw_asgi:app")
    assert code == 2
    assert err.strip().splitlines() == ["peregrine: Unknown option: '--no-such-option'"], err


# ---------------------------------------------------------------------------
# Serving


def test_the_console_script_serves_fastapi_with_the_interpreter_it_was_installed_into(serve, installed):
    if not has("fastapi"):
        pytest.skip("no FastAPI for this Python on the package mirror")
    # Another virtualenv is active: the command still embeds the one it belongs to, as uvicorn would.
    server = serve("script", "fastapi_app:app", env={"VIRTUAL_ENV": sys.prefix})
    assert server.get("/").json() == {"hello": "fastapi"}
    assert server.get("/items/7", params={"q": "x"}).json() == {"item_id": 7, "q": "x", "limit": 10}
    started = server.wait_for_output("serving fastapi_app:app")
    assert started and "(%s/bin/python" % installed.venv in started, server.output()
    if has("uvloop"):
        assert "(ASGI, uvloop)" in started  # the uvloop extra was installed and is used


def test_the_fastapi_webtransport_router_comes_with_the_wheel(serve, installed):
    if not has("fastapi"):
        pytest.skip("no FastAPI for this Python on the package mirror")
    where = installed.ask("import peregrine.contrib.fastapi as m; print(m.WebTransportRouter.__module__, m.__file__)")
    assert where == "peregrine.contrib.fastapi %s" % (installed.venv / "lib" / ("python%d.%d" % sys.version_info[:2])
                                                       / "site-packages" / "peregrine" / "contrib" / "fastapi.py")
    # The server of the wheel imports it for an application (plain HTTP: everything but sessions passes through).
    server = serve("script", "wt_router_app:app")
    assert server.get("/hello/wheel").json() == {"hello": "wheel", "http_version": "1.1"}


def open_files(pid):
    """What the process has open; a descriptor closed between the listing and its readlink is passed over."""
    opened = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            opened.append(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
        except FileNotFoundError:
            pass
    return opened


def test_python_m_peregrine_serves_raw_asgi_from_the_aot_cache(serve, installed, tmp_path):
    aot_log, class_log = tmp_path / "aot.log", tmp_path / "classes.log"
    server = serve("module", "raw_asgi:app", env={
        "PEREGRINE_JAVA_OPTS": "-Xlog:aot=info:file=%s -Xlog:class+load=info:file=%s" % (aot_log, class_log)})
    assert server.get("/").content == b"hello, asgi"
    assert server.post("/echo", content=b"x" * 100_000).content == b"x" * 100_000
    assert "(%s/bin/python" % installed.venv in server.output()
    # The JVM mapped the cache, and the server's own classes came out of it rather than from the jars.
    assert "Using AOT-linked classes: true" in aot_log.read_text()
    loaded = class_log.read_text()
    assert re.search(r"dev\.peregrine\.server\.WorkerServer source: shared objects file", loaded), loaded[-2000:]
    # exec: the process the command started is the JVM itself, so signals reach the server.
    assert os.readlink("/proc/%d/exe" % server.proc.pid).endswith("/_runtime/java/bin/java")
    # Everything it opened is the installation's own: nothing of the tree the wheel was built in.
    opened = open_files(server.proc.pid)
    assert not [f for f in opened if f.startswith(str(REPO_ROOT / "target" / "wheel"))], opened
    assert [f for f in opened if f.startswith(str(installed.venv)) and f.endswith(".jar")]
    server.proc.send_signal(signal.SIGTERM)
    assert server.wait_exit(60) == 0


def test_the_console_script_serves_flask(serve):
    if not has("flask"):
        pytest.skip("no Flask for this Python on the package mirror")
    server = serve("script", "flask_app:app")
    assert server.get("/").content == b"hello, flask"
    assert "(WSGI" in server.output()


def test_two_workers_and_a_sighup_that_drops_nothing(serve):
    server = serve("script", "workers_app:app", "--workers", "2")
    first = set(wait_workers(server, 2))
    for pid in [server.proc.pid, *first]:
        assert os.readlink("/proc/%d/exe" % pid).endswith("/_runtime/java/bin/java")
    with LoadLoop(server) as load:
        assert poll(lambda: load.ok > 50, timeout=30)
        os.kill(server.proc.pid, signal.SIGHUP)
        assert poll(lambda: server.output().count("Replaced worker") >= 2, timeout=90), server.output()[-3000:]
        served_before = load.ok
        assert poll(lambda: load.ok > served_before + 20, timeout=30)
    assert load.failures == [], load.failures[:10]
    assert poll(lambda: len(children(server.proc.pid)) == 2, timeout=30)
    assert not set(children(server.proc.pid)) & first


def test_tls_with_a_traditional_ec_key(serve, tmp_path):
    """TLS (BoringSSL) and Bouncy Castle, which reads SEC1 keys, run on the wheel's trimmed runtime."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command makes the certificate")
    key, cert, sec1 = tmp_path / "key.pem", tmp_path / "cert.pem", tmp_path / "sec1.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True,
                   env=dict(os.environ, OPENSSL_CONF="/dev/null"))
    subprocess.run(["openssl", "ec", "-in", key, "-out", sec1], check=True, capture_output=True)
    assert sec1.read_text().startswith("-----BEGIN EC PRIVATE KEY-----")
    server = serve("script", "raw_asgi:app", "--tls-cert", cert, "--tls-key", sec1)
    response = httpx.get("https://127.0.0.1:%d/" % server.port, verify=ssl.create_default_context(cafile=str(cert)),
                         timeout=15)
    assert response.status_code == 200 and response.content == b"hello, asgi"
