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
