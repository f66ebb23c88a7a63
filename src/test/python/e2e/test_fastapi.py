"""FastAPI on Peregrine: path and query parameters, validation errors,
StreamingResponse, a sync (def) endpoint in anyio's worker threads, and the
lifespan context manager including teardown on SIGTERM."""

import threading

import pytest

from conftest import assert_clean_exit

pytest.importorskip(
    "fastapi", reason="FastAPI needs pydantic-core, which has a wheel here only for CPython 3.11"
)


@pytest.fixture(scope="module")
def fastapi_server(start_module_server):
    return start_module_server("fastapi_app:app")


def test_path_and_query_params(fastapi_server):
    r = fastapi_server.get("/items/42?q=hello&limit=3")
    assert r.status_code == 200
    assert r.json() == {"item_id": 42, "q": "hello", "limit": 3}


def test_bad_path_param_is_422(fastapi_server):
    r = fastapi_server.get("/items/not-a-number")
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["path", "item_id"]


def test_body_model(fastapi_server):
    r = fastapi_server.post("/items", json={"name": "widget", "price": 2.5, "tags": ["a", "b"]})
    assert r.status_code == 200
    assert r.json() == {"received": {"name": "widget", "price": 2.5, "tags": ["a", "b"]}, "total": 5.0}


def test_bad_body_is_422(fastapi_server):
    r = fastapi_server.post("/items", json={"name": "widget", "price": "not a price"})
    assert r.status_code == 422
    assert any(e["loc"] == ["body", "price"] for e in r.json()["detail"])


def test_streaming_response(fastapi_server):
    with fastapi_server.raw() as c:
        r = c.request("GET", "/stream?n=4")
    assert r.status == 200
    assert r.framing == "chunked"
    assert r.body == b"line 0\nline 1\nline 2\nline 3\n"


def test_sync_endpoint_runs_in_a_worker_thread(fastapi_server):
    sync = fastapi_server.get("/sync?x=21").json()
    asynchronous = fastapi_server.get("/async-thread").json()
    assert sync["x"] == 42
    assert sync["ident"] != asynchronous["ident"]


def test_sync_endpoint_concurrent_calls(fastapi_server):
    results = []

    def call(i):
        results.append(fastapi_server.get("/sync?x=%d" % i).json()["x"])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == [i * 2 for i in range(8)]


def test_lifespan_state(fastapi_server):
    assert fastapi_server.get("/state").json() == {"started": True, "greeting": "hello from lifespan"}


def test_lifespan_teardown_on_sigterm(start_server, marker_file):
    server = start_server("fastapi_app:app", env={"PEREGRINE_TEST_MARKER": str(marker_file)})
    assert server.get("/").json() == {"hello": "fastapi"}
    assert_clean_exit(server, server.stop())
    assert marker_file.read_text().split() == ["startup", "shutdown"]
