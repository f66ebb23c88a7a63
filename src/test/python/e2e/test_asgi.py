"""ASGI 3.0 over HTTP, as the spec's "What is supported" describes it: the full
scope, streaming request and response bodies, http.disconnect, response header
shapes, the lifespan protocol, errors."""

import re
import uuid

import pytest

from conftest import assert_clean_exit, poll, read_until_contains, settled


@pytest.fixture(scope="module")
def asgi(raw_servers):
    return raw_servers("asgi")


def result(server, key):
    return server.get("/result?id=" + key).json()


# ---------------------------------------------------------------------------
# Scope


def test_scope_keys(asgi):
    with asgi.raw() as c:
        r = c.request(
            "GET",
            "/scope/some%20where/caf%C3%A9?x=1&y=%20",
            headers=[("X-Custom", "Value"), ("X-Multi", "a"), ("X-Multi", "b")],
        )
    assert r.status == 200
    scope = r.json()
    assert scope["type"] == "http"
    assert scope["asgi"]["version"] == "3.0"
    assert re.fullmatch(r"2\.\d+", scope["asgi"]["spec_version"])
    assert scope["http_version"] == "1.1"
    assert scope["method"] == "GET"
    assert scope["scheme"] == "http"
    # percent-decoded and UTF-8-decoded
    assert scope["path"] == "/scope/some where/caf\u00e9"
    assert scope["_types"]["path"] == "str"
    # the bytes as sent (shown here decoded as latin-1)
    assert scope["raw_path"] == "/scope/some%20where/caf%C3%A9"
    assert scope["_types"]["raw_path"] == "bytes"
    assert scope["query_string"] == "x=1&y=%20"
    assert scope["_types"]["query_string"] == "bytes"
    assert scope.get("root_path", "") == ""
    headers = scope["headers"]
    assert scope["_header_types"] == ["bytes/bytes"]
    assert scope["_headers_lowercase"] is True
    assert ["x-custom", "Value"] in headers
    assert ["host", "127.0.0.1"] in headers
    # repeated headers arrive as separate entries, in order
    assert [v for n, v in headers if n == "x-multi"] == ["a", "b"]
    assert scope["client"][0] == "127.0.0.1"
    assert isinstance(scope["client"][1], int)
    assert scope["server"] == ["127.0.0.1", asgi.port]
    # state from the lifespan startup is shared into the request scope
    assert scope["state"]["started"] is True
    assert scope["state"]["token"] == "lifespan-token"


def test_scope_method_and_body(asgi):
    scope = asgi.request("PUT", "/scope", content=b"put body").json()
    assert scope["method"] == "PUT"
    assert scope["_body"] == "put body"


def test_scope_http10(asgi):
    with asgi.raw() as c:
        c.send(b"GET /scope HTTP/1.0\r\n\r\n")
        r = c.read_response()
    assert r.json()["http_version"] == "1.0"


def test_root_path(raw_servers):
    server = raw_servers("asgi", "--root-path", "/api")
    scope = server.get("/scope/x").json()
    assert scope["root_path"] == "/api"
    # as uvicorn does, and as the ASGI spec has it: path includes root_path
    assert scope["path"] == "/api/scope/x"


# ---------------------------------------------------------------------------
# Request and response bodies


def test_request_body_arrives_in_several_messages(asgi):
    body = bytes(range(256)) * 4096  # 1 MiB
    r = asgi.post("/echo", content=body)
    assert r.status_code == 200
    assert r.content == body
    assert int(r.headers["x-body-chunks"]) >= 2


def test_request_without_body_is_one_empty_message(asgi):
    r = asgi.get("/echo")
    assert r.status_code == 200
    assert r.content == b""
    assert r.headers["x-body-chunks"] == "1"


def test_latin1_header_value(asgi):
    with asgi.raw() as c:
        r = c.request("GET", "/scope", headers=[("X-Latin", "caf\xe9")])
    assert ["x-latin", "caf\xe9"] in r.json()["headers"]


def test_request_and_response_bodies_stream_together(asgi):
    # Each piece of the request body is echoed back before the next one is sent:
    # the application gets the body as it arrives and its output leaves at once.
    with asgi.raw(timeout=15) as c:
        c.send(b"POST /echo-stream HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n")
        c.send(b"5\r\nfirst\r\n")
        r = c.read_head(timeout=8)
        assert r.status == 200
        read_until_contains(c, b"first", timeout=8)
        c.send(b"6\r\nsecond\r\n")
        read_until_contains(c, b"second", timeout=8)
        c.send(b"0\r\n\r\n")
        read_until_contains(c, b"0\r\n\r\n", timeout=8)


def test_streaming_response(asgi):
    with asgi.raw() as c:
        r = c.request("GET", "/stream?n=50")
    assert r.framing == "chunked"
    assert r.body == b"".join(b"chunk %d\n" % i for i in range(50))


def test_streaming_response_is_not_buffered(asgi, tmp_path):
    marker = tmp_path / ("go-" + uuid.uuid4().hex)
    with asgi.raw(timeout=15) as c:
        c.send_request("GET", "/stream-wait?marker=%s" % marker)
        assert c.read_head(timeout=8).status == 200
        got = read_until_contains(c, b"first\n", timeout=8)
        assert b"second" not in got
        marker.write_text("go")
        read_until_contains(c, b"second: seen-marker\n", timeout=12)


def test_response_leaves_before_the_application_yields(asgi, tmp_path):
    # The application answers, then keeps the event loop busy without yielding until the test has read
    # the whole response. A response held for the loop's next turn left only when the I/O thread woke for
    # something else, 5 s later (the connection's timers), or after the application's 10 s.
    marker = tmp_path / ("go-" + uuid.uuid4().hex)
    try:
        with asgi.raw(timeout=15) as c:
            r = c.request("GET", "/answer-then-block?marker=%s" % marker, timeout=3)
            assert (r.status, r.body) == (200, b"answered\n")
    finally:
        marker.write_text("go")
    assert asgi.get("/").text == "hello, asgi"


def test_response_backpressure(asgi):
    # 64 MiB in 1024 sends to a client that reads nothing: once the socket
    # buffers are full, send() must stop returning
    key = uuid.uuid4().hex
    chunks, size = 1024, 65536
    with asgi.raw(timeout=30) as c:
        c.send_request("GET", "/big?id=%s&chunks=%d&size=%d" % (key, chunks, size))
        assert poll(lambda: (result(asgi, key) or {}).get("sent", 0) > 0)
        last = settled(lambda: result(asgi, key)["sent"], "the application's sends kept going", interval=0.25)
        assert last < chunks, "the application sent all %d chunks to a client that read none" % chunks
        r = c.read_response(timeout=30)
    assert len(r.body) == chunks * size
    assert poll(lambda: result(asgi, key)["sent"] == chunks)


def test_response_headers_in_every_shape(asgi):
    r = asgi.get("/headers-shapes")
    assert r.status_code == 200
    assert r.content == b"shapes"
    assert r.headers["x-tuple-bytes"] == "tb"
    assert r.headers["x-list-bytes"] == "lb"
    assert r.headers["x-bytearray"] == "ba"
    assert r.headers["x-str-name"] == "sn"
    assert r.headers["x-str-both"] == "sb"


# ---------------------------------------------------------------------------
# http.disconnect


def test_http_disconnect_when_client_goes_away(asgi):
    key = uuid.uuid4().hex
    c = asgi.raw()
    c.send_request("GET", "/wait-disconnect?id=" + key)
    assert poll(lambda: result(asgi, key)) == {"type": "waiting"}
    c.close()
    assert poll(lambda: result(asgi, key)["type"] != "waiting", timeout=10)
    assert result(asgi, key) == {"type": "http.disconnect"}


def test_receive_after_response_complete_is_disconnect_at_once(asgi):
    key = uuid.uuid4().hex
    with asgi.raw() as c:
        r = c.request("GET", "/disconnect?id=" + key)
        assert r.status == 200
        assert r.body == b"response complete"
        # the client stays connected; the application's receive() must not wait for it
        outcome = poll(lambda: result(asgi, key), timeout=10)
        assert outcome is not None
        assert outcome["type"] == "http.disconnect"
        assert outcome["elapsed"] < 2.0
        # and the connection is still good for another request
        assert c.request("GET", "/status/201").status == 201


# ---------------------------------------------------------------------------
# Errors


def test_exception_gives_500_and_server_keeps_serving(asgi):
    r = asgi.get("/error")
    assert r.status_code == 500
    assert asgi.get("/").content == b"hello, asgi"
    with asgi.raw() as c:
        assert c.request("GET", "/error").status == 500


def test_returning_without_a_response_gives_500(asgi):
    r = asgi.get("/no-response")
    assert r.status_code == 500
    assert asgi.get("/").content == b"hello, asgi"


def test_exception_after_start_closes_connection(asgi):
    with asgi.raw() as c:
        c.send_request("GET", "/error-after-start")
        r = c.read_head()
        assert r.status == 200
        data = c.read_until_close(timeout=5)
    assert b"partial" in data
    if r.header("content-length") is None:
        assert not data.endswith(b"0\r\n\r\n"), "a failed response must not look complete"
    assert asgi.get("/").content == b"hello, asgi"


# ---------------------------------------------------------------------------
# Lifespan


def test_lifespan_startup_and_shutdown(start_server, marker_file):
    server = start_server("raw_asgi:app", env={"PEREGRINE_TEST_MARKER": str(marker_file)})
    assert poll(lambda: marker_file.exists() and "startup" in marker_file.read_text(), timeout=5)
    assert server.get("/scope").json()["state"]["started"] is True
    assert "shutdown" not in marker_file.read_text()
    assert_clean_exit(server, server.stop())
    assert marker_file.read_text().split() == ["startup", "shutdown"]


def test_lifespan_startup_failed_stops_the_server(start_server, marker_file):
    server = start_server(
        "raw_asgi:failing_startup_app", env={"PEREGRINE_TEST_MARKER": str(marker_file)}, wait=False
    )
    code = server.wait_exit(60)
    assert code is not None, "the server kept running after lifespan.startup.failed"
    assert code != 0
    assert "startup-failed" in marker_file.read_text()
    assert "database unreachable (on purpose)" in server.output()


def test_app_without_lifespan_support_still_serves(start_server):
    server = start_server("raw_asgi:no_lifespan_app")
    assert server.get("/").content == b"hello, asgi"
    state = server.get("/scope").json()["state"]
    assert not (state or {}).get("started")
    assert_clean_exit(server, server.stop())


def test_no_lifespan_option(start_server, marker_file):
    server = start_server(
        "raw_asgi:app", "--no-lifespan", env={"PEREGRINE_TEST_MARKER": str(marker_file)}
    )
    assert server.get("/").content == b"hello, asgi"
    state = server.get("/scope").json()["state"]
    assert not (state or {}).get("started")
    assert_clean_exit(server, server.stop())
    assert not marker_file.exists() or marker_file.read_text() == ""


# ---------------------------------------------------------------------------
# Event loop


def test_no_uvloop_option(raw_servers):
    server = raw_servers("asgi", "--no-uvloop")
    loop = server.get("/loop").json()
    assert not loop["module"].startswith("uvloop")
    assert server.get("/").content == b"hello, asgi"


def test_uvloop_used_when_installed(asgi):
    pytest.importorskip("uvloop", reason="uvloop is not installed for this interpreter (no wheel here)")
    assert asgi.get("/loop").json()["module"].startswith("uvloop")
