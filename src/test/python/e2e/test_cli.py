"""Loading the application and the command line: targets, --factory,
--protocol, detection, load errors, --help/--version, option and environment
errors, PEREGRINE_PORT, --python-path, --log-level, --access-log, the startup
line."""

import os
import re
import signal
import socket
import sys
import uuid

import pytest

from conftest import free_port, run_cli

PY_VERSION = "%d.%d" % sys.version_info[:2]


# ---------------------------------------------------------------------------
# Targets


def test_dotted_attribute_target(start_server):
    server = start_server("nested:holder.inner.app")
    assert server.get("/").text == "nested app"


def test_factory(start_server):
    server = start_server("factory_app:create_app", "--factory")
    assert server.get("/").text.startswith("made by factory")


@pytest.mark.peregrine_only  # --protocol has no reference equivalent here
@pytest.mark.parametrize("protocol", ["wsgi", "asgi"])
def test_protocol_override(start_server, protocol):
    server = start_server("opaque_app:app", "--protocol", protocol)
    assert server.get("/").text == "served as %s" % protocol


@pytest.mark.peregrine_only  # --protocol has no reference equivalent here
@pytest.mark.parametrize(
    "target,protocol,why",
    [
        ("raw_asgi:app", "wsgi", "coroutine function"),
        ("raw_wsgi:app", "asgi", "takes 2 positional arguments, and ASGI passes 3"),
    ],
)
@pytest.mark.parametrize("workers", ["1", "2"])
def test_protocol_that_contradicts_the_application_is_refused(target, protocol, why, workers):
    code, out = run_cli("--protocol", protocol, "--port", free_port(), "--workers", workers, target, timeout=120)
    assert code == 2, out
    problem = [line for line in out.splitlines() if "--protocol " + protocol in line]
    # each worker loads the application (the supervisor has no Python), so both may say it first
    assert 1 <= len(problem) <= int(workers) and len(set(problem)) == 1, out
    assert target in problem[0] and why in problem[0], out
    assert "Traceback" not in out, out


@pytest.mark.parametrize("target,body", [("raw_wsgi:app", "hello, wsgi"), ("raw_asgi:app", "hello, asgi")])
def test_protocol_detected(start_server, target, body):
    server = start_server(target)
    assert server.get("/").text == body


@pytest.mark.peregrine_only  # the reference servers' startup lines differ
@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_startup_line(start_server, kind):
    server = start_server("raw_%s:app" % kind)
    address = "127.0.0.1:%d" % server.port

    def startup_line(out):
        for line in out.splitlines():
            if address in line and kind.upper() in line and PY_VERSION in line:
                return line
        return None

    out = server.wait_for_output(startup_line, timeout=10)
    assert out, "no line names %s, %s and Python %s:\n%s" % (address, kind.upper(), PY_VERSION, server.output())


def test_import_error_exits_nonzero_with_traceback(start_server):
    server = start_server("broken_import:app", wait=False)
    code = server.wait_exit(60)
    assert code is not None, "the server kept running with an application that cannot be imported"
    assert code != 0
    out = server.output()
    assert "Traceback" in out
    assert "boom at import" in out


def test_missing_module_exits_nonzero_with_message(start_server):
    server = start_server("nosuchmodule:app", wait=False)
    code = server.wait_exit(60)
    assert code is not None and code != 0
    assert "nosuchmodule" in server.output()


def test_missing_attribute_exits_nonzero_with_message(start_server):
    server = start_server("raw_asgi:nosuchattr", wait=False)
    code = server.wait_exit(60)
    assert code is not None and code != 0
    assert "nosuchattr" in server.output()


# ---------------------------------------------------------------------------
# The command line itself


@pytest.mark.peregrine_only
def test_help_lists_options():
    code, out = run_cli("--help")
    assert code == 0, out
    for option in (
        "--host", "--port", "--unix", "--workers", "--protocol", "--root-path", "--scheme",
        "--backlog", "--max-connections", "--max-body", "--max-header-size", "--keep-alive",
        "--request-timeout", "--factory", "--venv", "--python-path", "--no-uvloop",
        "--no-lifespan", "--access-log", "--log-level", "--version",
    ):
        assert option in out, "%s missing from --help:\n%s" % (option, out)


@pytest.mark.peregrine_only
def test_version():
    code, out = run_cli("--version")
    assert code == 0, out
    assert re.search(r"\d+\.\d+", out), out


@pytest.mark.peregrine_only
def test_unknown_option_exits_2_with_one_line():
    code, out = run_cli("--frobnicate", "raw_asgi:app")
    assert code == 2, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, out
    assert "--frobnicate" in lines[0]


@pytest.mark.peregrine_only
@pytest.mark.parametrize("typed", [["--prot", "wsgi"], ["--prot=wsgi"]])
def test_unknown_option_names_only_it_and_suggests_the_closest(typed):
    code, out = run_cli(*typed, "raw_asgi:app")
    assert code == 2, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, out
    assert "Unknown option: '--prot' (did you mean '--protocol'?)" in lines[0], out
    assert "raw_asgi:app" not in lines[0] and "wsgi" not in lines[0], out



@pytest.mark.peregrine_only
def test_unknown_option_sharing_only_a_prefix_gets_no_guess():
    # "--no-" is all it shares with --no-lifespan and the like
    code, out = run_cli("--no-such-option", "raw_asgi:app")
    assert (code, out.strip()) == (2, "peregrine: Unknown option: '--no-such-option'"), out


@pytest.mark.peregrine_only
def test_bad_option_value_exits_2_naming_it():
    code, out = run_cli("--port", "abc", "raw_asgi:app")
    assert code == 2, out
    assert "--port" in out
    # the value came from the command line, and the message must not say otherwise
    assert "PEREGRINE_PORT" not in out, out


@pytest.mark.peregrine_only
def test_bad_environment_value_exits_2_naming_it():
    code, out = run_cli("raw_asgi:app", env={"PEREGRINE_PORT": "abc"})
    assert code == 2, out
    assert "PEREGRINE_PORT" in out


@pytest.mark.peregrine_only
def test_option_not_built_yet():
    # When --python-home is built this test moves to another unbuilt option.
    code, out = run_cli("--python-home", "/opt/python", "raw_asgi:app")
    assert code == 2, out
    assert "peregrine: --python-home is not supported yet" in out.splitlines(), out


@pytest.mark.peregrine_only
def test_port_from_environment(start_server):
    port = free_port()
    server = start_server("raw_asgi:app", env={"PEREGRINE_PORT": str(port)}, ready_port=port)
    assert server.get("/").text == "hello, asgi"


@pytest.mark.peregrine_only
def test_command_line_beats_environment(start_server):
    env_port, cli_port = free_port(), free_port()
    server = start_server("raw_asgi:app", "--port", cli_port, env={"PEREGRINE_PORT": str(env_port)})
    assert server.port == cli_port
    assert server.get("/").text == "hello, asgi"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", env_port), timeout=2).close()


def test_python_path(start_server, tmp_path):
    module = "pp_extra_" + uuid.uuid4().hex[:8]
    (tmp_path / (module + ".py")).write_text(
        "async def app(scope, receive, send):\n"
        "    if scope['type'] != 'http':\n"
        "        return\n"
        "    await send({'type': 'http.response.start', 'status': 200, 'headers': []})\n"
        "    await send({'type': 'http.response.body', 'body': b'from python-path'})\n"
    )
    server = start_server(module + ":app", "--python-path", tmp_path)
    assert server.get("/").text == "from python-path"


def log_lines(out, level):
    """The server's own log lines of one level (the format is "HH:MM:SS.mmm LEVEL message")."""
    return [line for line in out.splitlines() if re.match(r"^\d\d:\d\d:\d\d\.\d{3} %s\s" % level, line)]


@pytest.mark.peregrine_only  # the log lines checked are Peregrine's
def test_log_level_debug_shows_debug_lines(start_server):
    # the application has no lifespan: the server says so at debug level only
    server = start_server("raw_asgi:no_lifespan_app", "--log-level", "debug")
    assert server.get("/").text == "hello, asgi"
    out = server.wait_for_output("lifespan appears unsupported", timeout=10)
    assert out and any("lifespan appears unsupported" in line for line in log_lines(out, "DEBUG")), server.output()
    assert log_lines(out, "INFO"), "the info lines are gone at debug level"


@pytest.mark.peregrine_only  # the log lines checked are Peregrine's
def test_log_level_warning_keeps_only_warnings_and_errors(start_server):
    server = start_server("raw_asgi:no_lifespan_app", "--log-level", "warning")
    assert server.get("/").text == "hello, asgi"
    os.kill(server.proc.pid, signal.SIGHUP)  # logged as a warning without a supervisor
    assert server.wait_for_output("SIGHUP replaces workers only", timeout=10), server.output()
    assert server.stop() == 0
    out = server.complete_output()
    assert any("SIGHUP replaces workers only" in line for line in log_lines(out, "WARN")), out
    # neither the startup and shutdown lines nor the debug one
    assert log_lines(out, "INFO") == [] and log_lines(out, "DEBUG") == [], out


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_access_log(start_server, kind):
    server = start_server("raw_%s:app" % kind, "--access-log")
    path = "/access-probe-" + uuid.uuid4().hex[:12]
    assert server.get(path).status_code == 404

    def logged(out):
        return any("GET" in line and path in line and "404" in line for line in out.splitlines())

    assert server.wait_for_output(logged, timeout=10), server.output()
