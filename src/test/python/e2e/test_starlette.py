"""Starlette on Peregrine (pure Python, so it runs under every interpreter)."""

import pytest

from conftest import assert_clean_exit


@pytest.fixture(scope="module")
def starlette_server(start_module_server):
    return start_module_server("starlette_app:app")


def test_homepage(starlette_server):
    assert starlette_server.get("/").text == "hello, starlette"


def test_path_params(starlette_server):
    assert starlette_server.get("/users/ada?q=1").json() == {"name": "ada", "q": "1"}


def test_lifespan_state(starlette_server):
    assert starlette_server.get("/state").json() == {"greeting": "hello from starlette lifespan"}


def test_request_body(starlette_server):
    assert starlette_server.post("/echo", content=b"abcdef").text == "fedcba"


def test_streaming(starlette_server):
    with starlette_server.raw() as c:
        r = c.request("GET", "/stream")
    assert r.framing == "chunked"
    assert r.body == b"part 0\npart 1\npart 2\npart 3\n"


def test_404(starlette_server):
    assert starlette_server.get("/nope").status_code == 404


def test_lifespan_teardown_on_sigterm(start_server, marker_file):
    server = start_server("starlette_app:app", env={"PEREGRINE_TEST_MARKER": str(marker_file)})
    assert server.get("/").text == "hello, starlette"
    assert_clean_exit(server, server.stop())
    assert marker_file.read_text().split() == ["startup", "shutdown"]


@pytest.mark.peregrine_only  # the message names Peregrine's own log line
def test_body_refused_past_max_body_is_not_logged_as_an_application_error(start_server):
    # Starlette's request.body() raises ClientDisconnect when the server refuses the body: the
    # server's doing, so it is logged at debug level (where the test waits for it), never as ERROR.
    server = start_server("starlette_app:app", "--max-body", "1000", "--log-level", "debug")
    with server.raw() as c:
        c.send(b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n" + b"64\r\n" + b"x" * 100 + b"\r\n")
        try:
            for _ in range(20):
                c.send(b"64\r\n" + b"x" * 100 + b"\r\n")
        except OSError:
            pass  # the server may close the connection as soon as it has answered
        r = c.read_head()
    assert r.status == 413
    out = server.wait_for_output("raised after the server ended its request")
    assert out is not None, server.output()
    assert "ClientDisconnect" in out
    assert not [line for line in out.splitlines() if " ERROR " in line], out
