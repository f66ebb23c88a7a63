"""WSGI (PEP 3333), as the spec's "What is supported" describes it: the full
environ, wsgi.input, start_response with exc_info, write(), file_wrapper,
close(), framing, a declared Content-Length enforced, unbuffered output and a
wsgiref.validate-wrapped application."""

import os
import uuid

import pytest

from conftest import IncompleteResponse, free_port, poll, read_until_contains
from test_metrics import scrape


@pytest.fixture(scope="module")
def wsgi(raw_servers):
    return raw_servers("wsgi")


def closed_counts(server):
    return server.get("/closed-count").json()


# ---------------------------------------------------------------------------
# environ


def test_environ_cgi_variables(wsgi):
    with wsgi.raw() as c:
        r = c.request(
            "GET",
            "/environ/some%20where/caf%C3%A9?x=1&y=%20",
            headers=[("X-Custom", "Value"), ("User-Agent", "e2e-raw")],
        )
    assert r.status == 200
    env = r.json()
    assert env["REQUEST_METHOD"] == "GET"
    assert env.get("SCRIPT_NAME", "") == ""
    # percent-decoded, and the UTF-8 bytes carried as latin-1 code points (PEP 3333)
    assert env["PATH_INFO"] == "/environ/some where/caf\u00c3\u00a9"
    assert env["QUERY_STRING"] == "x=1&y=%20"
    assert isinstance(env["SERVER_NAME"], str) and env["SERVER_NAME"]
    assert env["SERVER_PORT"] == str(wsgi.port)
    assert env["SERVER_PROTOCOL"] == "HTTP/1.1"
    assert env["REMOTE_ADDR"] == "127.0.0.1"
    assert env["HTTP_HOST"] == "127.0.0.1"
    assert env["HTTP_X_CUSTOM"] == "Value"
    assert env["HTTP_USER_AGENT"] == "e2e-raw"
    assert env["_meta"]["non_str_cgi_keys"] == []
    assert env["_meta"]["non_str_keys"] == []


def test_environ_content_type_and_length(wsgi):
    r = wsgi.post(
        "/environ", content=b"a=1&b=2", headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    env = r.json()
    assert env["REQUEST_METHOD"] == "POST"
    assert env["CONTENT_TYPE"] == "application/x-www-form-urlencoded"
    assert env["CONTENT_LENGTH"] == "7"
    assert "HTTP_CONTENT_TYPE" not in env
    assert "HTTP_CONTENT_LENGTH" not in env
    assert env["_body"] == "a=1&b=2"


def test_environ_wsgi_keys(wsgi):
    env = wsgi.get("/environ").json()
    assert env["wsgi.version"] == [1, 0]
    assert env["_meta"]["version_type"] == "tuple"
    assert env["wsgi.url_scheme"] == "http"
    assert isinstance(env["wsgi.multithread"], bool)
    assert isinstance(env["wsgi.multiprocess"], bool)
    assert env["wsgi.run_once"] is False
    assert env["_meta"]["input_methods"] == ["__iter__", "read", "readline", "readlines"]
    assert env["_meta"]["errors_methods"] == ["flush", "write", "writelines"]
    assert env["_meta"]["file_wrapper_callable"] is True


def test_latin1_header_value(wsgi):
    with wsgi.raw() as c:
        r = c.request("GET", "/environ", headers=[("X-Latin", "caf\xe9")])
    assert r.json()["HTTP_X_LATIN"] == "caf\xe9"


def test_environ_http10_protocol(wsgi):
    with wsgi.raw() as c:
        c.send(b"GET /environ HTTP/1.0\r\n\r\n")
        r = c.read_response()
    assert r.json()["SERVER_PROTOCOL"] == "HTTP/1.0"


@pytest.mark.peregrine_only  # gunicorn folds repeated headers with "," and no space
def test_repeated_headers_folded(wsgi):
    with wsgi.raw() as c:
        r = c.request("GET", "/environ", headers=[("X-Multi", "a"), ("X-Other", "o"), ("X-Multi", "b")])
    env = r.json()
    assert env["HTTP_X_MULTI"] == "a, b"
    assert env["HTTP_X_OTHER"] == "o"


@pytest.mark.peregrine_only  # gunicorn expects the prefix in the request path (and strips it)
def test_root_path_is_script_name(raw_servers):
    server = raw_servers("wsgi", "--root-path", "/api")
    env = server.get("/environ/x").json()
    assert env["SCRIPT_NAME"] == "/api"
    assert env["PATH_INFO"] == "/environ/x"


@pytest.mark.peregrine_only  # gunicorn has no option to set the reported scheme
def test_scheme_https_reported(raw_servers):
    server = raw_servers("wsgi", "--scheme", "https")
    assert server.get("/environ").json()["wsgi.url_scheme"] == "https"


# ---------------------------------------------------------------------------
# wsgi.input


BINARY = bytes(range(256)) * 400  # 100 KiB with every byte value


@pytest.mark.parametrize("mode", ["cl", "all", "pieces", "iter"])
def test_input_read(wsgi, mode):
    r = wsgi.post("/echo?mode=%s" % mode, content=BINARY)
    assert r.status_code == 200
    assert r.content == BINARY


# A chunked body is read whole before the application runs and given a CONTENT_LENGTH (mode cl
# reads only that many bytes): one of 100 KiB in memory, one of 3 MiB through a temporary file.
@pytest.mark.parametrize("mode,size", [("all", len(BINARY)), ("pieces", len(BINARY)), ("iter", len(BINARY)),
                                       ("all", 3 << 20), ("pieces", 3 << 20), ("cl", 3 << 20)])
def test_input_read_chunked_request(wsgi, mode, size):
    body = (BINARY * (size // len(BINARY) + 1))[:size]
    with wsgi.raw(timeout=30) as c:
        c.send_chunked("/echo?mode=%s" % mode, body)
        r = c.read_response()
    assert r.status == 200
    assert r.body == body


@pytest.mark.peregrine_only  # gunicorn leaves CONTENT_LENGTH out of a chunked request
def test_chunked_request_read_whole_gets_content_length(wsgi):
    with wsgi.raw() as c:
        c.send(b"POST /environ HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        r = c.read_response()
    env = r.json()
    assert env["CONTENT_LENGTH"] == "5"
    assert env["wsgi.input_terminated"] is True


@pytest.mark.peregrine_only  # gunicorn streams a chunked body to the application and keeps no file
def test_chunked_body_that_cannot_be_spooled_is_answered_500_not_handed_on_cut(start_server, tmp_path):
    """Past what it holds in memory, the server keeps a chunked body in a file under $TMPDIR; when that
    fails, the client is told with a 500 and the application never sees a part of the body."""
    server = start_server("raw_wsgi:app", env={"TMPDIR": str(tmp_path / "missing")})
    small, large = BINARY, (BINARY * ((2 << 20) // len(BINARY) + 1))[: 2 << 20]
    with server.raw(timeout=30) as c:
        c.send_chunked("/echo?mode=cl", small)
        r = c.read_response()
    assert (r.status, r.body) == (200, small)
    with server.raw(timeout=30) as c:
        try:
            c.send_chunked("/echo?mode=all", large)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the answer may come before the client has sent everything
        r = c.read_response()
    assert r.status == 500
    assert poll(lambda: "temporary file" in server.output())


def test_input_read_without_body(wsgi):
    r = wsgi.get("/echo?mode=all")
    assert r.status_code == 200
    assert r.content == b""


LINES = b"alpha\nbravo charlie\n\ndelta"


@pytest.mark.parametrize(
    "mode,expected",
    [
        ("readline", ["alpha\n", "bravo charlie\n", "\n", "delta"]),
        ("readlines", ["alpha\n", "bravo charlie\n", "\n", "delta"]),
        ("iter", ["alpha\n", "bravo charlie\n", "\n", "delta"]),
        ("mixed", ["alpha\n", "bravo charlie\n\ndelta"]),
    ],
)
def test_input_lines(wsgi, mode, expected):
    out = wsgi.post("/readline?mode=%s" % mode, content=LINES).json()
    assert out["lines"] == expected
    assert out["types"] == ["bytes"]
    assert out["after_eof"] == ""


@pytest.mark.parametrize("mode", ["readline", "iter"])
def test_input_lines_across_buffer_boundaries(wsgi, mode):
    lines = [(b"%d:" % i) + b"x" * (i * 37 % 3000) + b"\n" for i in range(400)]
    body = b"".join(lines)
    out = wsgi.post("/readline?mode=%s" % mode, content=body).json()
    assert [x.encode("latin-1") for x in out["lines"]] == lines


# ---------------------------------------------------------------------------
# start_response, write(), iterables


@pytest.mark.parametrize("given", ["Very Fine", "FINE", "Tr%C3%A8s bien", "a%09tab"])
def test_reason_phrase_goes_out_as_given(wsgi, given):
    from urllib.parse import unquote

    with wsgi.raw() as c:
        r = c.request("GET", "/reason?r=" + given.replace(" ", "+"))
    assert r.raw_head.startswith(b"HTTP/1.1 200 " + unquote(given).encode("latin-1") + b"\r\n")


@pytest.mark.peregrine_only  # gunicorn writes any reason phrase out, CR and LF included
@pytest.mark.parametrize("given", ["a%0D%0ASet-Cookie:+x=1", "bell%07", "del%7F", "snow%E2%98%83"])
def test_reason_phrase_that_would_break_the_status_line_gets_500(wsgi, given):
    with wsgi.raw() as c:
        r = c.request("GET", "/reason?r=" + given)
        assert r.status == 500
        assert r.header("set-cookie") is None
        assert c.request("GET", "/reason?r=OK").status == 200


def test_exc_info_before_output_replaces_response(wsgi):
    r = wsgi.get("/exc-info?mode=before")
    assert r.status_code == 500
    assert r.headers.get("x-second") == "1"
    assert r.content == b"error page"


@pytest.mark.peregrine_only  # gunicorn keeps the first call's headers as well
def test_exc_info_before_output_drops_the_first_headers(wsgi):
    # PEP 3333: start_response with exc_info "should replace the currently-stored
    # HTTP response headers with the newly-supplied ones"
    r = wsgi.get("/exc-info?mode=before")
    assert r.status_code == 500
    assert "x-first" not in r.headers
    assert r.headers.get_list("content-type") == ["text/plain"]


def test_exc_info_after_output_reraises_and_aborts(wsgi):
    with wsgi.raw() as c:
        c.send_request("GET", "/exc-info?mode=after")
        r = c.read_head()
        assert r.status == 200
        data = c.read_until_close(timeout=5)
    assert b"partial;" in data
    assert b"should not be sent" not in data
    if r.header("content-length") is None:
        # the chunked body was cut off, not terminated as if complete
        assert not data.endswith(b"0\r\n\r\n")
    assert poll(lambda: wsgi.get("/exc-status").json().get("after")) == "reraised"


def test_start_response_twice_without_exc_info_raises(wsgi):
    r = wsgi.get("/exc-info?mode=twice")
    assert r.status_code == 200
    assert r.content == b"raised"


def test_start_response_inside_first_iteration(wsgi):
    r = wsgi.get("/lazy-start")
    assert r.status_code == 200
    assert r.headers["x-lazy"] == "yes"
    assert r.content == b"lazy body"


def test_write_callable(wsgi):
    r = wsgi.get("/write")
    assert r.status_code == 200
    assert r.content == b"part1;part2;end"


def test_file_wrapper(wsgi):
    before = closed_counts(wsgi)["file"]
    r = wsgi.get("/file?size=100000")
    assert r.status_code == 200
    assert r.content == bytes(i % 251 for i in range(100000))
    # the wrapper's close() closes the file-like object
    assert poll(lambda: closed_counts(wsgi)["file"] == before + 1), closed_counts(wsgi)


def test_iterable_close_called(wsgi):
    before = closed_counts(wsgi)["stream"]
    r = wsgi.get("/stream?n=3")
    assert r.content == b"chunk 0\nchunk 1\nchunk 2\n"
    assert poll(lambda: closed_counts(wsgi)["stream"] == before + 1), closed_counts(wsgi)


def test_iterable_close_called_when_client_disconnects(raw_servers):
    # a second application thread answers /closed-count while the stream runs
    server = raw_servers("wsgi", "--wsgi-threads", "4")
    before = closed_counts(server)["stream"]
    with server.raw() as c:
        c.send_request("GET", "/stream?n=2000&delay=0.01")
        c.read_head()
        read_until_contains(c, b"chunk 1\n")
    # the client is gone; the server notices on its next write and closes the iterable
    assert poll(lambda: closed_counts(server)["stream"] == before + 1, timeout=15), closed_counts(server)


# ---------------------------------------------------------------------------
# Framing


def test_framing_chosen_automatically(wsgi):
    with wsgi.raw() as c:
        declared = c.request("GET", "/")
        assert declared.framing == "content-length"
        assert declared.body == b"hello, wsgi"

        generator = c.request("GET", "/stream?n=2")
        assert generator.framing == "chunked"
        assert generator.body == b"chunk 0\nchunk 1\n"

        listed = c.request("GET", "/list")
        assert listed.framing in ("content-length", "chunked")
        assert listed.body == b"hello list"
        if listed.framing == "content-length":
            assert listed.header("content-length") == "10"

        written = c.request("GET", "/write")
        assert written.framing in ("content-length", "chunked")
        assert written.body == b"part1;part2;end"

        # every one of them left the connection usable
        assert c.request("GET", "/status/202").status == 202


def test_declared_content_length_too_long_is_cut(wsgi):
    with wsgi.raw() as c:
        r = c.request("GET", "/content-length-long")
        assert r.header("content-length") == "5"
        assert r.body == b"01234"
        # nothing past the declared length: the connection is either closed or
        # the next response starts right away
        try:
            c.send_request("GET", "/status/202")
        except (BrokenPipeError, ConnectionResetError):
            return
        try:
            nxt = c.read_response()
        except IncompleteResponse as e:
            assert e.data == b"", "bytes past the declared Content-Length: %r" % e.data
            return
        assert nxt.status == 202


@pytest.mark.peregrine_only  # gunicorn leaves the connection open until its keep-alive timeout
def test_declared_content_length_too_short_closes_connection(wsgi):
    with wsgi.raw() as c:
        c.send_request("GET", "/content-length-short")
        r = c.read_head()
        assert r.status == 200
        assert r.header("content-length") == "10"
        data = c.read_until_close(timeout=5)
    assert data == b"12345"


# ---------------------------------------------------------------------------
# Unbuffered output (each test waits for the first block before letting the
# application produce the second: a buffering server never gets to send it)


@pytest.mark.parametrize("path", ["/stream-wait", "/write-wait"])
def test_output_is_unbuffered(wsgi, tmp_path, path):
    marker = tmp_path / ("go-" + uuid.uuid4().hex)
    with wsgi.raw(timeout=15) as c:
        c.send_request("GET", "%s?marker=%s" % (path, marker))
        r = c.read_head(timeout=8)
        assert r.status == 200
        got = read_until_contains(c, b"first\n", timeout=8)
        assert b"second" not in got
        marker.write_text("go")
        read_until_contains(c, b"second: seen-marker\n", timeout=12)


# ---------------------------------------------------------------------------
# Errors, wsgi.errors, wsgiref.validate


def test_exception_gives_500_and_server_keeps_serving(wsgi):
    r = wsgi.get("/error")
    assert r.status_code == 500
    assert wsgi.get("/").content == b"hello, wsgi"


def test_wsgi_errors_goes_to_the_server_log(wsgi):
    token = "wsgi-errors-" + uuid.uuid4().hex
    assert wsgi.get("/errors-write?token=" + token).status_code == 200
    assert wsgi.wait_for_output(token, timeout=10), "wsgi.errors output did not reach the server's output"


def test_wsgiref_validate_app_passes(wsgi):
    assert wsgi.get("/validated/").content == b"hello, validated"
    assert wsgi.post("/validated/echo", content=b"validated body").content == b"validated body"
    assert wsgi.post("/validated/lines", content=b"one\ntwo\nthree").json() == ["one\n", "two\n", "three"]
    assert wsgi.get("/validated/stream").content == b"chunk 0\nchunk 1\nchunk 2\n"
    assert wsgi.get("/validated/write").content == b"written;returned"
    assert wsgi.get("/validated/file").content == b"x" * 20000
    assert wsgi.get("/validated/errors").status_code == 204
    assert wsgi.get("/validator-warnings").json() == []


# ---------------------------------------------------------------------------
# Application threads


def test_wsgi_threads_run_requests_at_once(raw_servers):
    import threading

    server = raw_servers("wsgi", "--wsgi-threads", "2")
    key = uuid.uuid4().hex
    outcomes = []

    def call():
        outcomes.append(server.get("/barrier?n=2&id=" + key).text)

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    # each request returns only once the other one is inside the application too
    assert outcomes == ["passed", "passed"]


# ---------------------------------------------------------------------------
# responses handed to the I/O thread


@pytest.mark.peregrine_only  # the batch of finished responses is Peregrine's (WsgiApplication, BatchWatchdog)
def test_a_finished_response_does_not_wait_for_the_next_request(start_server, tmp_path):
    """One WSGI thread: a response finished just before a request whose application blocks reaches its
    client while that request still runs. A finished response is handed to the I/O thread without
    waking it, and the wake-up comes when the WSGI thread runs out of requests or after a few
    responses; a watchdog wakes it within a millisecond or so when the thread goes on to a request that
    blocks. Without it, a and b were answered only when the I/O thread woke for a timer of its own,
    about four seconds later here: hence the short read timeouts, far above the expected wait."""
    metrics = free_port()
    server = start_server("raw_wsgi:app", "--wsgi-threads", "1", "--metrics-port", metrics)
    first, third = tmp_path / "first", tmp_path / "third"
    in_flight = lambda n: poll(lambda: scrape(metrics)("peregrine_requests_in_flight") == n)
    with server.raw() as a, server.raw() as b, server.raw() as c:
        a.send_request("GET", "/wait?marker=%s" % first)
        assert in_flight(1)
        b.send_request("GET", "/")
        assert in_flight(2)
        c.send_request("GET", "/wait?marker=%s" % third)
        assert in_flight(3)
        first.write_text("go")  # a is answered; then b, then c blocks until `third` exists
        assert a.read_response(timeout=2).body == b"seen-marker"
        answered = b.read_response(timeout=2)
        assert answered.status == 200 and answered.body == b"hello, wsgi"
        assert scrape(metrics)("peregrine_requests_in_flight") == 1, "c should still be waiting for its marker"
        third.write_text("go")
        assert c.read_response(timeout=8).body == b"seen-marker"
