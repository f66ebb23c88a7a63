"""HTTP/1.1 behaviour on the wire, for an ASGI and a WSGI application, and the
listener / limit options (--host, --port, --unix, --backlog, --max-connections,
--max-body, --max-header-size, --keep-alive, --request-timeout)."""

import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import HELLO, RawConn, assert_clean_exit, java_pid, poll, strace_attached

KINDS = ["asgi", "wsgi"]
STREAM3 = b"chunk 0\nchunk 1\nchunk 2\n"


def chunked(*parts, extension=None, trailers=()):
    out = b""
    for p in parts:
        size = b"%x" % len(p)
        if extension:
            size += extension
        out += size + b"\r\n" + p + b"\r\n"
    out += b"0\r\n"
    for name, value in trailers:
        out += name + b": " + value + b"\r\n"
    return out + b"\r\n"


# ---------------------------------------------------------------------------
# Connections and framing


@pytest.mark.parametrize("kind", KINDS)
def test_keep_alive_two_requests_on_one_connection(raw_servers, kind):
    server = raw_servers(kind)
    with server.raw() as c:
        first = c.request("GET", "/")
        assert first.status == 200
        assert first.body == HELLO[kind]
        assert not first.has_token("connection", "close")
        second = c.request("GET", "/status/201")
        assert second.status == 201
        assert second.body == b"status 201"


# gunicorn's gthread worker (the WSGI reference) goes back to its poller after a response
# and never looks at pipelined bytes it has already read: it hangs.
PIPELINING_KINDS = ["asgi", pytest.param("wsgi", marks=pytest.mark.peregrine_only)]


@pytest.mark.parametrize("kind", PIPELINING_KINDS)
def test_pipelining_three_requests_in_one_write(raw_servers, kind):
    server = raw_servers(kind)
    with server.raw() as c:
        c.send(
            RawConn.request_bytes("GET", "/status/201")
            + RawConn.request_bytes("POST", "/echo", body=b"the middle one")
            + RawConn.request_bytes("GET", "/status/203")
        )
        responses = [c.read_response() for _ in range(3)]
    assert [r.status for r in responses] == [201, 200, 203]
    assert [r.body for r in responses] == [b"status 201", b"the middle one", b"status 203"]


@pytest.mark.parametrize("kind", PIPELINING_KINDS)
def test_requests_sent_while_the_application_runs_are_answered_in_order(raw_servers, kind):
    # The server keeps reading while a request without a body is in the application: what arrives
    # meanwhile is the next requests, held until the response before them is complete.
    server = raw_servers(kind)
    with server.raw() as c:
        c.send_request("GET", "/sleep?s=0.3")
        c.send_request("GET", "/status/201")
        c.send_request("POST", "/echo", body=b"sent during the sleep")
        responses = [c.read_response() for _ in range(3)]
        assert [r.status for r in responses] == [200, 201, 200]
        assert [r.body for r in responses] == [b"slept", b"status 201", b"sent during the sleep"]
        assert c.request("GET", "/status/202").status == 202


@pytest.mark.peregrine_only
@pytest.mark.parametrize("kind", KINDS)
def test_keep_alive_requests_leave_the_connection_in_the_epoll_set(raw_servers, kind, tmp_path):
    # A request with no body needs no change to what the I/O thread waits for on its socket; taking it
    # out of the epoll set and back costs two system calls a request (issue 14).
    server = raw_servers(kind)
    with server.raw() as c:
        assert c.request("GET", "/").status == 200
        trace = tmp_path / "trace"
        tracer = strace_attached(java_pid(server), "trace=epoll_ctl", trace)
        try:
            for _ in range(20):
                response = c.request("GET", "/")
                assert (response.status, response.body) == (200, HELLO[kind])
        finally:
            tracer.terminate()
            tracer.wait(10)
    calls = [line for line in trace.read_text().splitlines() if "epoll_ctl(" in line]
    assert len(calls) <= 2, calls


@pytest.mark.parametrize("kind", KINDS)
def test_chunked_request_body(raw_servers, kind):
    server = raw_servers(kind)
    with server.raw() as c:
        c.send(
            b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            + chunked(b"hello ", b"chunked ", b"world")
        )
        r = c.read_response()
        assert r.status == 200
        assert r.body == b"hello chunked world"
        # the connection is still usable: the body was consumed exactly
        assert c.request("GET", "/status/202").status == 202


@pytest.mark.parametrize("kind", KINDS)
def test_chunked_request_body_with_extensions_and_trailers(raw_servers, kind):
    server = raw_servers(kind)
    with server.raw() as c:
        c.send(
            b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            + chunked(b"abc", b"defgh", extension=b";name=value", trailers=[(b"X-Trailer", b"t")])
        )
        r = c.read_response()
        assert r.status == 200
        assert r.body == b"abcdefgh"
        assert c.request("GET", "/status/202").status == 202


@pytest.mark.parametrize("kind", KINDS)
def test_large_chunked_request_body(raw_servers, kind):
    server = raw_servers(kind)
    parts = [bytes([65 + i % 26]) * 8191 for i in range(40)]
    with server.raw(timeout=30) as c:
        c.send(
            b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(*parts)
        )
        r = c.read_response()
    assert r.status == 200
    assert r.body == b"".join(parts)


@pytest.mark.parametrize("kind", KINDS)
def test_streaming_response_is_chunked_for_http11(raw_servers, kind):
    server = raw_servers(kind)
    with server.raw() as c:
        r = c.request("GET", "/stream?n=3")
        assert r.status == 200
        assert r.header("content-length") is None
        assert r.framing == "chunked"
        assert r.body == STREAM3
        # chunked framing keeps the connection usable
        assert c.request("GET", "/status/202").status == 202


@pytest.mark.parametrize("kind", KINDS)
def test_expect_100_continue(raw_servers, kind):
    server = raw_servers(kind)
    body = b"0123456789" * 100
    with server.raw() as c:
        c.send(
            b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n"
            % len(body)
        )
        # the body is not sent until the server has said to go on
        interim = c.read_head(skip_interim=False)
        assert interim.status == 100, interim
        assert interim.version == "HTTP/1.1"
        c.send(body)
        r = c.read_response()
        assert r.status == 200
        assert r.body == body


@pytest.mark.parametrize("kind", KINDS)
def test_head_has_headers_and_no_body(raw_servers, kind):
    server = raw_servers(kind)
    with server.raw() as c:
        get = c.request("GET", "/")
        head = c.request("HEAD", "/")
        assert head.status == 200
        assert head.header("content-length") == get.header("content-length") == str(len(HELLO[kind]))
        assert head.header("content-type") == get.header("content-type")
        # no body bytes followed the HEAD response: the next one parses cleanly
        nxt = c.request("GET", "/status/202")
        assert nxt.status == 202
        assert nxt.body == b"status 202"


@pytest.mark.parametrize("kind", KINDS)
def test_head_of_a_streamed_response_has_no_body(raw_servers, kind):
    server = raw_servers(kind)
    with server.raw() as c:
        head = c.request("HEAD", "/stream?n=3")
        assert head.status == 200
        nxt = c.request("GET", "/status/202")
        assert nxt.status == 202
        assert nxt.body == b"status 202"


@pytest.mark.parametrize("kind", KINDS)
def test_empty_blocks_do_not_end_a_chunked_response(raw_servers, kind):
    server = raw_servers(kind)
    path = "/empty-chunks" if kind == "asgi" else "/empty-blocks"
    with server.raw() as c:
        r = c.request("GET", path)
        assert r.status == 200
        assert r.body == b"abc"
        assert c.request("GET", "/status/202").body == b"status 202"


@pytest.mark.parametrize("kind", KINDS)
def test_request_sent_one_byte_at_a_time(raw_servers, kind):
    import time

    server = raw_servers(kind)
    request = (
        b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: yes\r\nTransfer-Encoding: chunked\r\n\r\n"
        + chunked(b"byte ", b"by byte")
    )
    with server.raw() as c:
        for i in range(len(request)):
            c.send(request[i : i + 1])
            time.sleep(0.001)
        r = c.read_response()
    assert r.status == 200
    assert r.body == b"byte by byte"


@pytest.mark.parametrize("kind", KINDS)
def test_transfer_coding_name_is_case_insensitive(raw_servers, kind):
    server = raw_servers(kind)
    with server.raw() as c:
        c.send(b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: Chunked\r\n\r\n" + chunked(b"mixed case"))
        r = c.read_response()
    assert r.status == 200
    assert r.body == b"mixed case"


@pytest.mark.parametrize("kind", KINDS)
def test_expect_100_continue_answered_without_deadlock(raw_servers, kind):
    # "/" does not read the body: the server either asks for it (100) or
    # answers at once; it must not wait for a body the client holds back
    server = raw_servers(kind)
    body = b"z" * 1000
    with server.raw() as c:
        c.send(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n")
        first = c.read_head(skip_interim=False, timeout=10)
        if first.status == 100:
            c.send(body)
            r = c.read_response()
        else:
            r = c.read_body(first)
    assert r.status == 200
    assert r.body == HELLO[kind]


@pytest.mark.parametrize(
    "kind",
    [
        # uvicorn puts the whole absolute URI into the scope's path (RFC 9112
        # section 3.2.2: a server must accept the absolute form)
        pytest.param("asgi", marks=pytest.mark.peregrine_only),
        "wsgi",
    ],
)
def test_absolute_form_request_target(raw_servers, kind):
    server = raw_servers(kind)
    with server.raw() as c:
        r = c.request("GET", "http://127.0.0.1:%d/status/201" % server.port)
    assert r.status == 201
    assert r.body == b"status 201"


@pytest.mark.parametrize("kind", KINDS)
def test_http10_client_gets_close_delimited_body(raw_servers, kind):
    server = raw_servers(kind)
    with server.raw() as c:
        c.send(b"GET /stream?n=3 HTTP/1.0\r\n\r\n")
        r = c.read_head()
        assert r.status == 200
        assert r.version in ("HTTP/1.0", "HTTP/1.1")
        assert r.header("transfer-encoding") is None
        data = c.read_until_close(timeout=5)
    if r.header("content-length") is not None:
        assert int(r.header("content-length")) == len(data)
    assert data == STREAM3


@pytest.mark.parametrize("kind", KINDS)
def test_http10_connection_closed_after_response(raw_servers, kind):
    server = raw_servers(kind)
    with server.raw() as c:
        c.send(b"GET / HTTP/1.0\r\n\r\n")
        r = c.read_head()
        assert r.status == 200
        assert r.header("transfer-encoding") is None
        data = c.read_until_close(timeout=5)
    assert data == HELLO[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_connection_close_request_header(raw_servers, kind):
    server = raw_servers(kind)
    with server.raw() as c:
        r = c.request("GET", "/", headers=[("Connection", "close")])
        assert r.status == 200
        assert r.body == HELLO[kind]
        c.expect_closed(timeout=5)


@pytest.mark.parametrize("kind", KINDS)
def test_204_response_has_no_body(raw_servers, kind):
    server = raw_servers(kind)
    with server.raw() as c:
        r = c.request("GET", "/status/204")
        assert r.status == 204
        assert r.header("transfer-encoding") is None
        assert r.header("content-length") in (None, "0")
        # nothing followed the head: the next response parses cleanly
        assert c.request("GET", "/status/202").body == b"status 202"


# The application at / answers without reading the request body.


@pytest.mark.parametrize("kind", KINDS)
def test_unread_small_body_is_swallowed_and_connection_reused(raw_servers, kind):
    server = raw_servers(kind)
    with server.raw() as c:
        r = c.request("POST", "/", body=b"a body nobody reads")
        assert r.status == 200
        assert r.body == HELLO[kind]
        nxt = c.request("GET", "/status/201")
        assert nxt.status == 201
        assert nxt.body == b"status 201"


@pytest.mark.parametrize("kind", KINDS)
def test_unread_large_body_ends_the_connection(raw_servers, kind):
    server = raw_servers(kind)
    with server.raw() as c:
        c.send(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10000000\r\n\r\n" + b"x" * 65536)
        r = c.read_response()
        assert r.status == 200
        assert r.body == HELLO[kind]
        # (10 MB: under the default --max-body of 16 MiB)
        # the server does not wait for the other 9.9 MB: this was the last response
        c.expect_closed(timeout=5)


@pytest.mark.parametrize("kind", KINDS)
def test_concurrent_clients(raw_servers, kind):
    import threading

    server = raw_servers(kind)
    failures = []

    def client(n):
        try:
            with server.raw(timeout=30) as c:
                for i in range(10):
                    body = b"client %d request %d" % (n, i)
                    r = c.request("POST", "/echo", body=body)
                    if r.status != 200 or r.body != body:
                        failures.append((n, i, r))
        except Exception as e:  # noqa: BLE001 - collected and reported
            failures.append((n, repr(e)))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert failures == []


# ---------------------------------------------------------------------------
# Listener options


def test_host_and_port(start_server):
    from conftest import free_port

    port = free_port()
    server = start_server("raw_asgi:app", "--host", "127.0.0.1", "--port", port)
    assert server.port == port
    r = server.get("/")
    assert r.status_code == 200
    assert r.text == "hello, asgi"
    scope = server.get("/scope").json()
    assert scope["server"] == ["127.0.0.1", port]


@pytest.mark.parametrize("kind", KINDS)
def test_unix_socket(start_server, kind):
    sock_dir = Path(tempfile.mkdtemp(prefix="pgx"))
    path = str(sock_dir / "peregrine.sock")
    server = start_server("raw_%s:app" % kind, "--unix", path)
    assert Path(path).is_socket()
    r = server.get("/")
    assert r.status_code == 200
    assert r.content == HELLO[kind]
    r = server.post("/echo", content=b"over a unix socket")
    assert r.content == b"over a unix socket"
    with server.raw() as c:
        assert c.request("GET", "/status/201").status == 201


def listen_backlog(port):
    """The accept queue's length the kernel gives a listening TCP socket: ss shows it as Send-Q."""
    out = subprocess.run(["ss", "-ltnH", "sport = :%d" % port], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in out.splitlines() if line.strip()]
    assert len(rows) == 1, out
    return int(rows[0][2])


@pytest.mark.parametrize("backlog", ["16", "300"])
def test_backlog_is_the_listening_sockets_queue(start_server, backlog):
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) is not installed")
    server = start_server("raw_asgi:app", "--backlog", backlog)
    assert server.get("/").text == "hello, asgi"
    assert listen_backlog(server.port) == int(backlog)


# ---------------------------------------------------------------------------
# Limits


def _closed_without_response(server):
    """Open a connection and send a request: True when the server refuses the
    connection or closes it without answering."""
    try:
        c = server.raw(timeout=5)
    except ConnectionRefusedError:
        return True
    with c:
        try:
            c.send_request("GET", "/")
        except (BrokenPipeError, ConnectionResetError):
            return True
        data = c.read_until_close(timeout=5)
        assert data == b"", "the connection over the limit was answered: %r" % data[:200]
        return True


def _server_of_two_connections(start_server):
    """raw_asgi with --max-connections 2, once the readiness probe's connection (counted until the server has
    read its close) is gone; with the scrape of its metrics."""
    from conftest import free_port
    from test_metrics import scrape

    metrics_port = free_port()
    server = start_server("raw_asgi:app", "--max-connections", "2", "--metrics-port", metrics_port)
    scrape_metric = lambda name: scrape(metrics_port)(name)
    assert poll(lambda: scrape_metric("peregrine_connections_active") == 0, timeout=10)
    return server, scrape_metric


@pytest.mark.peregrine_only  # uvicorn --limit-concurrency answers 503 instead; gunicorn has no such limit for gthread
def test_max_connections(start_server):
    """Connections busy with requests are never displaced: past the limit a new one is closed unanswered."""
    server, scrape_metric = _server_of_two_connections(start_server)
    c1 = server.raw()
    c2 = server.raw()
    try:
        c1.send_request("GET", "/sleep?s=4")
        c2.send_request("GET", "/sleep?s=4")
        assert poll(lambda: scrape_metric("peregrine_requests_in_flight") == 2, timeout=10)
        assert _closed_without_response(server)
        # the two busy ones are still served
        assert c1.read_response().status == 200
        assert c2.read_response().status == 200
        # a connection slot that is given back can be used again
        c1.close()

        def served():
            try:
                with server.raw(timeout=5) as c:
                    return c.request("GET", "/status/203").status == 203
            except (OSError, AssertionError):
                return False

        assert poll(served, timeout=10, interval=0.2), "no new connection was served after one closed"
    finally:
        c1.close()
        c2.close()


@pytest.mark.peregrine_only
def test_max_connections_makes_room_by_closing_the_connection_idle_longest(start_server):
    """At the limit, a new client is served in place of the keep-alive connection that has waited longest."""
    server, _ = _server_of_two_connections(start_server)
    older = server.raw()
    younger = server.raw()
    try:
        assert older.request("GET", "/status/201").status == 201
        assert younger.request("GET", "/status/202").status == 202
        with server.raw(timeout=5) as newcomer:
            assert newcomer.request("GET", "/status/203").status == 203
        assert older.read_until_close(timeout=5) == b"", "the oldest idle connection was not the one closed"
        assert younger.request("GET", "/status/204").status == 204
    finally:
        older.close()
        younger.close()


@pytest.mark.peregrine_only  # neither uvicorn nor gunicorn limits the body size
@pytest.mark.parametrize("kind", KINDS)
def test_max_body(start_server, kind):
    server = start_server("raw_%s:app" % kind, "--max-body", "1000")
    with server.raw() as c:
        r = c.request("POST", "/echo", body=b"a" * 1000)
        assert r.status == 200, "a body of exactly --max-body bytes is accepted"
        assert r.body == b"a" * 1000
    with server.raw() as c:
        r = c.request("POST", "/echo", body=b"b" * 2000)
        assert r.status == 413
    with server.raw() as c:
        c.send(
            b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            + chunked(*[b"c" * 500] * 4)
        )
        r = c.read_response()
        assert r.status == 413
    # and the server goes on serving
    assert server.get("/").status_code == 200


@pytest.mark.peregrine_only  # uvicorn/h11 and gunicorn answer 400 for an oversized head
@pytest.mark.parametrize("kind", KINDS)
def test_max_header_size(start_server, kind):
    server = start_server("raw_%s:app" % kind, "--max-header-size", "1024")
    with server.raw() as c:
        r = c.request("GET", "/", headers=[("X-Small", "s" * 200)])
        assert r.status == 200
    with server.raw() as c:
        r = c.request("GET", "/", headers=[("X-Big", "b" * 2000)])
        assert r.status == 431
    assert server.get("/").status_code == 200


@pytest.mark.parametrize("kind", KINDS)
def test_keep_alive_timeout_closes_idle_connection(start_server, kind):
    server = start_server("raw_%s:app" % kind, "--keep-alive", "500")
    with server.raw() as c:
        r = c.request("GET", "/")
        assert r.status == 200
        assert not r.has_token("connection", "close")
        c.expect_closed(timeout=5)


@pytest.mark.peregrine_only  # uvicorn starts its keep-alive timer only after a first response
@pytest.mark.parametrize("kind", KINDS)
def test_keep_alive_timeout_closes_a_connection_that_never_sends(start_server, kind):
    # before any byte the server does not know yet whether HTTP/1.1 or HTTP/2 will come; it still times out
    server = start_server("raw_%s:app" % kind, "--keep-alive", "500")
    with server.raw() as c:
        c.expect_closed(timeout=5)


@pytest.mark.peregrine_only  # the HTTP/2 preface only means something to a server that speaks h2c
def test_request_timeout_on_a_stalled_http2_preface(start_server):
    server = start_server("raw_asgi:app", "--keep-alive", "500", "--request-timeout", "1000")
    with server.raw() as c:
        c.send(b"PRI * HTTP/2.0\r\n")  # could still become the preface; never does
        c.expect_closed(timeout=10)


@pytest.mark.peregrine_only  # uvicorn has no request timeout; gunicorn's --timeout kills the worker instead
@pytest.mark.parametrize("kind", KINDS)
def test_request_timeout_on_partial_head(start_server, kind):
    server = start_server("raw_%s:app" % kind, "--request-timeout", "1000")
    with server.raw() as c:
        c.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # the head never ends
        r = c.read_response(timeout=10)
        assert r.status == 408
        c.expect_closed(timeout=5)
    assert server.get("/").status_code == 200


@pytest.mark.peregrine_only  # uvicorn has no request timeout; gunicorn's --timeout kills the worker instead
@pytest.mark.parametrize("kind", KINDS)
def test_request_timeout_on_stalled_body(start_server, kind):
    server = start_server("raw_%s:app" % kind, "--request-timeout", "1000")
    with server.raw() as c:
        c.send(b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n" + b"x" * 10)
        r = c.read_response(timeout=10)
        assert r.status == 408
        c.expect_closed(timeout=5)
    assert server.get("/").status_code == 200


@pytest.mark.parametrize("kind", KINDS)
def test_sigterm_exits_zero_and_drains_in_flight_request(start_server, kind):
    import threading

    # WSGI: a second application thread, so that /seen can be answered while
    # the slow request occupies the first
    options = ["--wsgi-threads", "4"] if kind == "wsgi" else []
    server = start_server("raw_%s:app" % kind, *options)
    result = {}

    def slow_request():
        try:
            with server.raw(timeout=20) as c:
                result["response"] = c.request("GET", "/sleep?s=1.5&probe=drain")
        except Exception as e:  # noqa: BLE001 - reported below
            result["error"] = e

    t = threading.Thread(target=slow_request)
    t.start()
    # wait until the application has the request, then ask the server to stop
    assert poll(lambda: any("probe=drain" in p for p in server.get("/seen").json()), timeout=10)
    server.terminate()
    t.join(20)
    assert "error" not in result, result.get("error")
    assert result["response"].status == 200
    assert result["response"].body == b"slept"
    code = server.wait_exit(30)
    assert code is not None, "the server did not exit within 30 s of SIGTERM"
    assert_clean_exit(server, code)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=2).close()


@pytest.mark.parametrize("kind", KINDS)
def test_graceful_timeout_ends_a_request_that_takes_too_long(start_server, kind):
    import threading

    options = ["--graceful-timeout", "1000"] + (["--wsgi-threads", "4"] if kind == "wsgi" else [])
    server = start_server("raw_%s:app" % kind, *options)
    outcome = {}

    def stuck_request():
        try:
            with server.raw(timeout=60) as c:
                outcome["response"] = c.request("GET", "/sleep?s=40&probe=stuck", timeout=60)
        except Exception as e:  # noqa: BLE001 - the request is expected to be cut off
            outcome["error"] = e

    t = threading.Thread(target=stuck_request, daemon=True)
    t.start()
    assert poll(lambda: any("probe=stuck" in p for p in server.get("/seen").json()), timeout=10)
    server.terminate()
    # a 40 s request does not hold up a shutdown with a 1 s grace period
    assert server.wait_exit(15) is not None, "the server was still running 15 s after SIGTERM"
    t.join(15)
    assert "response" not in outcome or outcome["response"].status != 200
