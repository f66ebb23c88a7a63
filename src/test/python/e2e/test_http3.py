"""HTTP/3 end to end: ``--http3``, ``--quic-port`` (and PEREGRINE_HTTP3 / PEREGRINE_QUIC_PORT), the
Alt-Svc header on TCP responses, the ASGI scope and WSGI environ over HTTP/3, the access log, large
bodies both ways, many concurrent requests on one connection, FastAPI and Flask, SIGTERM with a
request in flight, and ``--workers 2``.

The HTTP/3 client is headless Chromium (``chromium.py``: Debian's ``/usr/bin/chromium`` over the
DevTools pipe), started once per module with ``--origin-to-force-quic-on=*``: every https origin it
loads goes over QUIC, so a page or fetch that works at all went over HTTP/3, which each test
checks again on the navigation's and the fetch's ``nextHopProtocol``. The certificate is test_tls.py's
"default" pair (made by ``openssl`` under a private CA), which Chromium accepts by the SHA-256 of
its public key. The Alt-Svc and CLI checks need no browser; the rest skip only when Chromium is not
installed (``bin/test`` installs it when it can).

The server's readiness is a TLS handshake on the TCP port; the QUIC side is then waited for by
retrying the first page load for a few seconds (``open_h3``).

Applications: ``apps/h3_app.py`` (scope echo, hashed upload, streamed download, sleep),
``raw_wsgi.py``, ``fastapi_app.py`` and ``flask_app.py``.

The reference servers have no HTTP/3, so the whole module is Peregrine-only.
"""

import hashlib
import json
import os
import random
import socket
import time
import uuid

import httpx
import pytest

import chromium
from chromium import DevToolsError
from conftest import assert_clean_exit, free_port, poll
from test_workers import wait_workers
from test_tls import (  # noqa: F401 (certs is the module-scoped fixture making the test certificates)
    assert_refused,
    certs,
    h2_request,
    header_values,
    https_client,
    wait_tls_ready,
)

pytestmark = pytest.mark.peregrine_only

APP = "h3_app:app"
MiB = 1 << 20
# How long the QUIC side may take to answer once the TCP port completes TLS handshakes.
QUIC_READY_TIMEOUT = 15.0


def alt_svc(udp_port):
    return 'h3=":%d"; ma=86400' % udp_port


def free_udp_port():
    """A port free for both TCP and UDP on 127.0.0.1."""
    for _ in range(50):
        port = free_port()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise AssertionError("no port free for both TCP and UDP")


def pattern(size, seed=0):
    """The bytes of h3_app's /download."""
    return random.Random(seed).randbytes(size)


# ---------------------------------------------------------------------------
# Servers and the browser


def start_h3(start, certs, *options, target=APP, env=None):
    """A server with the default pair and --http3, once it completes TLS handshakes."""
    server = start(target, *certs.pair("default"), "--http3", *options, env=env)
    return wait_tls_ready(server, certs)


@pytest.fixture(scope="module")
def browser(request):
    if not chromium.available():
        pytest.skip("%s is not installed: headless Chromium is the HTTP/3 client of these tests "
                    "(bin/test installs Debian's chromium when run as root)" % chromium.CHROMIUM)
    certs = request.getfixturevalue("certs")
    spki = chromium.spki_sha256_base64(certs.cert("default"))
    with chromium.Chromium(force_quic=["*"], spki_hashes=[spki]) as b:
        yield b


def open_h3(browser, port, path="/", isolated=False, server=None):
    """A page loaded from https://127.0.0.1:port/path, over HTTP/3 (asserted). The first loads are
    retried for QUIC_READY_TIMEOUT seconds: the QUIC port may start answering after the TCP one.
    isolated: in a browser context of its own, hence on a QUIC connection of its own."""
    url = "https://127.0.0.1:%d%s" % (port, path)
    deadline = time.monotonic() + QUIC_READY_TIMEOUT
    while True:
        page = browser.new_page(isolated=isolated)
        try:
            page.navigate(url, timeout=20)
            break
        except DevToolsError as e:
            page.close()
            if server is not None and not server.running():
                raise AssertionError("the server exited (status %r) before answering over HTTP/3:\n%s"
                                     % (server.proc.poll(), server.output()[-3000:]))
            if time.monotonic() > deadline:
                raise AssertionError("no page over HTTP/3 from %s within %.0f s: %s\nChromium's QUIC connections: %s"
                                     % (url, QUIC_READY_TIMEOUT, e, browser.quic_closes() or "none closed"))
            time.sleep(0.3)
    assert page.protocol == "h3", "navigation to %s went over %r" % (url, page.protocol)
    return page


@pytest.fixture(scope="module")
def h3_server(start_module_server, certs):
    return start_h3(start_module_server, certs, "--access-log")


@pytest.fixture(scope="module")
def page(browser, h3_server):
    """A page of h3_server (h3_app, --access-log), loaded over HTTP/3 and shared by the module."""
    p = open_h3(browser, h3_server.port, server=h3_server)
    yield p
    p.close()


def fetch_h3(page, url, **kwargs):
    r = page.fetch(url, **kwargs)
    assert r.protocol == "h3", "fetch(%s) went over %r" % (url, r.protocol)
    return r


# ---------------------------------------------------------------------------
# Command line


def test_http3_without_tls_is_refused():
    assert_refused(["--http3", APP], "--http3")


def test_quic_port_without_http3_is_refused(certs):
    assert_refused(certs.pair("default") + ["--quic-port", str(free_port()), APP], "--quic-port")


def test_quic_port_without_http3_or_tls_is_refused():
    assert_refused(["--quic-port", str(free_port()), APP], "--quic-port")


# ---------------------------------------------------------------------------
# Alt-Svc on the TCP side


def test_alt_svc_on_http11_responses(h3_server, certs):
    with https_client(h3_server, certs) as client:
        for path in ("/", "/scope", "/missing", "/download?size=100000"):
            response = client.get(path)
            assert response.http_version == "HTTP/1.1"
            assert response.headers.get_list("alt-svc") == [alt_svc(h3_server.port)], (path, response.headers)
        response = client.post("/upload", content=b"x" * 1000)
        assert response.status_code == 200
        assert response.headers.get_list("alt-svc") == [alt_svc(h3_server.port)]


def test_alt_svc_on_http2_responses(h3_server, certs):
    for path in ("/", "/missing"):
        status, headers, _ = h2_request(h3_server.port, certs, path)
        assert status in (200, 404)
        assert header_values(headers, "alt-svc") == [alt_svc(h3_server.port)], (path, headers)


def test_no_alt_svc_without_http3(start_server, certs):
    server = wait_tls_ready(start_server(APP, *certs.pair("default")), certs)
    with https_client(server, certs) as client:
        response = client.get("/")
        assert response.status_code == 200
        assert "alt-svc" not in response.headers
        assert "alt-svc" not in client.get("/missing").headers
    _, headers, _ = h2_request(server.port, certs, "/")
    assert header_values(headers, "alt-svc") == []


# ---------------------------------------------------------------------------
# HTTP/3 requests to the ASGI application


def test_page_and_fetch_go_over_http3(page):
    assert page.protocol == "h3"
    assert page.navigation_status in (200, None)  # None: a Chromium without responseStatus
    r = fetch_h3(page, "/")
    assert r.status == 200
    assert r.body == b"hello, h3"


def test_asgi_scope_over_http3(page, h3_server):
    body = "payload \u00e9\u20ac".encode("utf-8")
    r = fetch_h3(
        page, "/scope/a%20b?x=1&y=%2F",
        method="POST", headers={"content-type": "text/plain", "x-custom": "value one", "x-other": "A,b"}, body=body,
    )
    assert r.status == 200
    assert r.headers["content-type"] == "application/json"
    assert r.headers["x-h3-app"] == "scope"  # the application's own response header
    scope = r.json()
    assert scope["type"] == "http"
    assert scope["http_version"] == "3"
    assert scope["scheme"] == "https"
    assert scope["method"] == "POST"
    assert scope["path"] == "/scope/a b"
    assert scope["query_string"] == "x=1&y=%2F"
    assert scope["root_path"] == ""
    assert scope["body_size"] == len(body)
    assert scope["body"] == body.decode("latin-1")
    names = [name for name, _ in scope["headers"]]
    assert all(name == name.lower() and not name.startswith(":") for name in names), names
    headers = {}
    for name, value in scope["headers"]:
        headers.setdefault(name, []).append(value)
    assert headers["x-custom"] == ["value one"]
    assert headers["x-other"] == ["A,b"]
    assert headers["content-type"] == ["text/plain"]
    # the authority, as HTTP/1.1 and HTTP/2 give it to the application
    assert headers.get("host") == ["127.0.0.1:%d" % h3_server.port], scope["headers"]


def test_asgi_scope_matches_http11(page, h3_server, certs):
    """The same request over HTTP/1.1 and over HTTP/3: the application sees the same thing, but for
    the version."""
    target = "/scope/%C3%A9t%C3%A9/x%2Fy?q=a+b&q=%26&empty="
    body = bytes(range(256)) * 4
    headers = {"content-type": "application/octet-stream", "x-custom": "same"}
    over_h3 = fetch_h3(page, target, method="PUT", headers=headers, body=body).json()
    with https_client(h3_server, certs) as client:
        over_h1 = client.put(target, headers=headers, content=body).json()
    assert over_h1["http_version"] == "1.1"
    assert over_h3["http_version"] == "3"
    for key in ("type", "scheme", "method", "path", "raw_path", "query_string", "root_path",
                "body_size", "body_sha256"):
        assert over_h3[key] == over_h1[key], key
    assert over_h3["body_sha256"] == hashlib.sha256(body).hexdigest()
    for name in ("x-custom", "content-type"):
        assert [v for n, v in over_h3["headers"] if n == name] == [v for n, v in over_h1["headers"] if n == name]


def test_asgi_scope_client_is_the_browser(page):
    client = fetch_h3(page, "/scope").json()["client"]
    assert client is not None, "no client in the scope over HTTP/3"
    host, port = client
    assert host == "127.0.0.1"
    assert isinstance(port, int) and 0 < port < 65536


def test_same_application_over_tcp_and_http3(page, h3_server, certs):
    token = uuid.uuid4().hex
    assert fetch_h3(page, "/remember?value=h3-" + token, method="POST").status == 200
    with https_client(h3_server, certs) as client:
        assert client.get("/remembered").json() == {"value": "h3-" + token}
        assert client.post("/remember?value=tcp-" + token).status_code == 200
    assert fetch_h3(page, "/remembered").json() == {"value": "tcp-" + token}


@pytest.mark.parametrize("path, status, body", [
    ("/no/such/page", 404, b"not found: /no/such/page"),
    ("/status/404", 404, b"status 404"),
    ("/status/201", 201, b"status 201"),
    ("/status/503", 503, b"status 503"),
])
def test_application_status_passes_through(page, path, status, body):
    r = fetch_h3(page, path)
    assert (r.status, r.body) == (status, body)


def test_access_log_says_http3(page, h3_server):
    probe = uuid.uuid4().hex
    assert fetch_h3(page, "/?probe=" + probe).status == 200
    assert fetch_h3(page, "/missing?probe=" + probe).status == 404
    out = h3_server.wait_for_output(
        lambda o: '"GET /?probe=%s HTTP/3" 200' % probe in o and '"GET /missing?probe=%s HTTP/3" 404' % probe in o,
        timeout=10)
    assert out, [line for line in h3_server.lines() if probe in line] or h3_server.output()[-3000:]


# ---------------------------------------------------------------------------
# Bodies and concurrency


@pytest.mark.parametrize("size", [4 * MiB + 1, 1])
def test_request_body_arrives_intact(page, size):
    data = os.urandom(size)
    r = fetch_h3(page, "/upload", method="POST", headers={"content-type": "application/octet-stream"}, body=data,
                 timeout=60)
    assert r.status == 200
    got = r.json()
    assert got["size"] == size
    assert got["sha256"] == hashlib.sha256(data).hexdigest()


def test_empty_post_body(page):
    r = fetch_h3(page, "/upload", method="POST", body=b"")
    assert r.json()["size"] == 0


@pytest.mark.parametrize("size, chunk, length", [
    (8 * MiB + 123, 65536, False),
    (8 * MiB + 123, 65536, True),  # with a content-length
    (MiB + 7, 1000, False),
    (3 * MiB, 3 * MiB, False),  # one piece
    (3 * MiB, 3 * MiB, True),
])
def test_streamed_response_arrives_intact(page, size, chunk, length):
    seed = size % 1000
    r = fetch_h3(page, "/download?size=%d&chunk=%d&seed=%d&length=%d" % (size, chunk, seed, length),
                 keep_body=False, timeout=60)
    assert r.status == 200
    expected = hashlib.sha256(pattern(size, seed)).hexdigest()
    assert r.headers["x-sha256"] == expected
    if length:
        assert r.headers["content-length"] == str(size)
    assert r.length == size, "%d of %d bytes arrived" % (r.length, size)
    assert r.sha256 == expected


def test_echo_round_trip(page):
    # the application answers as soon as it has read the body, in one piece with a content-length
    data = os.urandom(2 * MiB + 3)
    r = fetch_h3(page, "/echo", method="POST", headers={"content-type": "application/x-test"}, body=data, timeout=60)
    assert r.status == 200
    assert r.headers["content-type"] == "application/x-test"
    size = len(data)
    assert r.headers["content-length"] == str(size)
    assert r.length == size, "%d of %d bytes arrived" % (r.length, size)
    assert r.sha256 == hashlib.sha256(data).hexdigest()


def test_many_concurrent_requests_on_one_connection(page):
    # Chromium puts every request of an origin on one QUIC connection; they are all started at once.
    count = 120
    specs = []
    for i in range(count):
        if i % 3 == 0:
            specs.append(dict(url="/scope?i=%d" % i, method="POST", body="body %d" % i))
        elif i % 3 == 1:
            specs.append(dict(url="/download?size=%d&chunk=4096&seed=%d" % (20000 + i, i), keep_body=False))
        else:
            specs.append(dict(url="/sleep?ms=50&i=%d" % i))
    results = page.fetch_all(specs, timeout=90)
    assert len(results) == count
    for i, r in enumerate(results):
        assert r.status == 200, (i, r)
        assert r.protocol == "h3", (i, r.protocol)
        if i % 3 == 0:
            scope = r.json()
            assert scope["query_string"] == "i=%d" % i
            assert scope["body"] == "body %d" % i
        elif i % 3 == 1:
            assert r.sha256 == hashlib.sha256(pattern(20000 + i, i)).hexdigest(), i
        else:
            assert r.body == b"slept"


# ---------------------------------------------------------------------------
# WSGI and the frameworks


def test_wsgi_environ_over_http3(start_server, certs, browser):
    server = start_h3(start_server, certs, target="raw_wsgi:app")
    p = open_h3(browser, server.port, server=server)
    try:
        r = fetch_h3(p, "/environ/x?a=1&b=%20", method="POST",
                     headers={"content-type": "text/plain", "x-custom": "wsgi"}, body="wsgi body")
    finally:
        p.close()
    assert r.status == 200
    environ = r.json()
    assert environ["SERVER_PROTOCOL"] == "HTTP/3"
    assert environ["wsgi.url_scheme"] == "https"
    assert environ["REQUEST_METHOD"] == "POST"
    assert environ["PATH_INFO"] == "/environ/x"
    assert environ["QUERY_STRING"] == "a=1&b=%20"
    assert environ["HTTP_X_CUSTOM"] == "wsgi"
    assert environ["CONTENT_TYPE"] == "text/plain"
    assert environ["HTTP_HOST"] == "127.0.0.1:%d" % server.port
    assert environ["_body"] == "wsgi body"


@pytest.fixture(scope="module")
def fastapi_page(start_module_server, certs, browser):
    pytest.importorskip("fastapi")
    server = start_h3(start_module_server, certs, target="fastapi_app:app")
    p = open_h3(browser, server.port, server=server)
    yield p
    p.close()


def test_fastapi_post_over_http3(fastapi_page):
    item = {"name": "widget", "price": 2.5, "tags": ["a", "b"]}
    r = fetch_h3(fastapi_page, "/items", method="POST", headers={"content-type": "application/json"},
                 body=json.dumps(item))
    assert r.status == 200, r
    assert r.json() == {"received": item, "total": 5.0}
    r = fetch_h3(fastapi_page, "/items/42?q=x")
    assert r.json() == {"item_id": 42, "q": "x", "limit": 10}
    r = fetch_h3(fastapi_page, "/items", method="POST", headers={"content-type": "application/json"},
                 body=json.dumps({"name": "no price"}))
    assert r.status == 422


def test_fastapi_404_passes_through(fastapi_page):
    r = fetch_h3(fastapi_page, "/no/such/route")
    assert r.status == 404
    assert r.json() == {"detail": "Not Found"}


@pytest.fixture(scope="module")
def flask_page(start_module_server, certs, browser):
    pytest.importorskip("flask")
    server = start_h3(start_module_server, certs, target="flask_app:app")
    p = open_h3(browser, server.port, server=server)
    yield p
    p.close()


def test_flask_post_over_http3(flask_page):
    payload = {"b": [1, 2], "a": "\u00e9"}
    r = fetch_h3(flask_page, "/json", method="POST", headers={"content-type": "application/json"},
                 body=json.dumps(payload))
    assert r.status == 200, r
    assert r.json() == {"got": payload, "keys": ["a", "b"]}
    r = fetch_h3(flask_page, "/form", method="POST", headers={"content-type": "application/x-www-form-urlencoded"},
                 body="x=1&x=2&y=%C3%A9")
    assert r.json() == {"form": {"x": ["1", "2"], "y": ["\u00e9"]}, "content_type": "application/x-www-form-urlencoded"}
    r = fetch_h3(flask_page, "/remote")
    assert r.json()["scheme"] == "https"
    assert r.json()["is_secure"] is True


def test_flask_404_passes_through(flask_page):
    r = fetch_h3(flask_page, "/no/such/route")
    assert r.status == 404
    assert r.json() == {"custom_404": "/no/such/route"}


# ---------------------------------------------------------------------------
# --quic-port and the environment


def test_quic_port_serves_http3_on_that_port(start_server, certs, browser):
    quic_port = free_udp_port()
    server = start_h3(start_server, certs, "--quic-port", quic_port)
    assert quic_port != server.port
    with https_client(server, certs) as client:
        assert client.get("/").headers.get_list("alt-svc") == [alt_svc(quic_port)]
    p = open_h3(browser, quic_port, server=server)
    try:
        scope = fetch_h3(p, "/scope").json()
        assert scope["http_version"] == "3"
    finally:
        p.close()
    # nothing speaks QUIC on the TCP port's number
    other = browser.new_page()
    try:
        with pytest.raises(DevToolsError):
            other.navigate("https://127.0.0.1:%d/" % server.port, timeout=20)
    finally:
        other.close()


def test_http3_and_quic_port_from_the_environment(start_server, certs, browser):
    quic_port = free_udp_port()
    server = wait_tls_ready(
        start_server(APP, *certs.pair("default"), env={"PEREGRINE_HTTP3": "true", "PEREGRINE_QUIC_PORT": str(quic_port)}),
        certs)
    with https_client(server, certs) as client:
        assert client.get("/").headers.get_list("alt-svc") == [alt_svc(quic_port)]
    p = open_h3(browser, quic_port, server=server)
    try:
        assert fetch_h3(p, "/scope").json()["http_version"] == "3"
    finally:
        p.close()


# ---------------------------------------------------------------------------
# Shutdown and workers


def test_sigterm_lets_an_http3_request_in_flight_finish(start_server, certs, browser):
    server = start_h3(start_server, certs)
    p = open_h3(browser, server.port, server=server)
    try:
        p.start_fetch("slow", "/sleep?ms=1000&probe=drain")
        # wait until the application has the request, then ask the server to stop
        with https_client(server, certs) as client:
            assert poll(lambda: any("probe=drain" in seen for seen in client.get("/seen").json()), timeout=10), \
                "the application never received the HTTP/3 request"
        server.terminate()
        r = p.finish_fetch("slow", timeout=30)
    finally:
        p.close()
    assert r.status == 200
    assert r.body == b"slept"
    assert r.protocol == "h3"
    code = server.wait_exit(30)
    assert code is not None, "the server did not exit within 30 s of SIGTERM"
    assert_clean_exit(server, code)


def test_workers_answer_http3(start_server, certs, browser):
    server = start_h3(start_server, certs, "--workers", "2")
    # Both workers up, hence both bound to the UDP port, before the first QUIC packet: SO_REUSEPORT
    # spreads datagrams by a hash over the sockets bound at that moment.
    workers = wait_workers(server, 2)
    with https_client(server, certs) as client:
        assert client.get("/").headers.get_list("alt-svc") == [alt_svc(server.port)]
    pids = set()
    # several QUIC connections (one per isolated browser context, each from a port of its own), which
    # the kernel spreads over the workers' sockets
    for _ in range(6):
        p = open_h3(browser, server.port, isolated=True, server=server)
        try:
            for r in p.fetch_all([dict(url="/pid?n=%d" % i) for i in range(5)]):
                assert r.status == 200 and r.protocol == "h3", r
                pids.add(int(r.body))
        finally:
            p.close()
    assert pids and pids <= set(workers), (pids, workers)  # answered by the workers' Pythons


# ---------------------------------------------------------------------------
# Limits, slow clients and cancellation (docs/HARDENING.md)


def test_a_client_that_does_not_read_makes_send_wait(browser, h3_server, certs):
    # The page fetches 1 GiB and never reads the body: once Chromium's stream and connection windows
    # and the server's small queue are full, the application's send() must wait instead of the server
    # buffering the rest; a request on another connection is served meanwhile; and when the client
    # goes away the waiting send is released.
    p = open_h3(browser, h3_server.port, isolated=True, server=h3_server)
    closed = False
    try:
        assert p.evaluate("window.__flood = fetch('/flood?id=unread').then(r => r.status); true") is True
        with https_client(h3_server, certs) as client:
            def sent():
                return client.get("/progress?id=unread").json()["sent"]

            assert poll(lambda: sent() > 0, timeout=10), "the application never started sending"
            readings = [sent()]
            deadline = time.monotonic() + 30
            while not (len(readings) >= 3 and readings[-1] == readings[-2] == readings[-3]):
                assert time.monotonic() < deadline, "send() never waited: %s" % readings[-5:]
                time.sleep(0.5)
                readings.append(sent())
            stalled_at = readings[-1]
            # Chromium itself takes in about 64 MB of a body the page does not read (63 to 68 MB in
            # runs here, the same with DevTools' own buffers limited to 1 MiB), so the bound is set
            # well above that and far below the 1 GiB the application would otherwise hand over.
            assert stalled_at < 256 * MiB, "%d bytes went out to a client that reads nothing" % stalled_at
            assert not client.get("/progress?id=unread").json()["ended"]
            assert p.evaluate("window.__flood") == 200  # the head did arrive

            other = open_h3(browser, h3_server.port, isolated=True, server=h3_server)
            try:
                assert fetch_h3(other, "/").body == b"hello, h3"
            finally:
                other.close()
            assert sent() == stalled_at

            p.close()
            closed = True
            assert poll(lambda: client.get("/progress?id=unread").json()["ended"], timeout=20), \
                "the application's send() was still waiting after the client closed its connection"
    finally:
        if not closed:
            p.close()


def test_aborted_request_then_closed_connection_gives_the_application_http_disconnect(browser, h3_server, certs):
    # The application sends a byte every 50 ms while waiting on receive(). The page aborts the fetch:
    # Chromium stops the stream (STOP_SENDING), which QUIC does not report to a server until it
    # writes, and the write then waits; the connection goes on serving. When the client's connection
    # closes, the application must get http.disconnect and its waiting send() must return.
    p = open_h3(browser, h3_server.port, isolated=True, server=h3_server)
    closed = False
    try:
        p.evaluate("window.__abort = new AbortController(); "
                   "window.__dripping = fetch('/drip?id=abort', {signal: window.__abort.signal})"
                   ".then(r => r.status, e => e.name); true")
        with https_client(h3_server, certs) as client:
            assert poll(lambda: client.get("/events?id=abort").json() == ["started"], timeout=10)
            assert p.evaluate("window.__dripping") == 200
            p.evaluate("window.__abort.abort(); true")
            assert fetch_h3(p, "/").status == 200  # the connection goes on
            p.close()
            closed = True
            assert poll(lambda: client.get("/events?id=abort").json() == ["started", "http.disconnect", "stopped"], timeout=20), \
                client.get("/events?id=abort").json()
    finally:
        if not closed:
            p.close()


def test_max_body_gets_413_over_http3(start_server, certs, browser):
    server = start_h3(start_server, certs, "--max-body", "1000")
    p = open_h3(browser, server.port, isolated=True, server=server)
    try:
        r = fetch_h3(p, "/upload", method="POST", body=b"x" * 5000)
        assert r.status == 413, r
        small = fetch_h3(p, "/upload", method="POST", body=b"x" * 1000)
        assert small.status == 200 and small.json()["size"] == 1000
    finally:
        p.close()
    with https_client(server, certs) as client:
        assert "/upload" in client.get("/seen").json()
        assert client.get("/seen").json().count("/upload") == 1  # the refused one never reached the application


def test_stalled_request_body_gets_408(start_server, certs, browser):
    # A streaming upload (fetch with a ReadableStream body, which Chromium sends over HTTP/2 and
    # HTTP/3 only) that sends a little and then nothing. Chromium does not show a response to a
    # half-duplex upload it has not finished, so the 408 is read from the metrics; the application,
    # waiting for the body, gets http.disconnect and answers (to nobody).
    metrics_port = free_port()
    server = start_h3(start_server, certs, "--request-timeout", "1000", "--metrics-port", str(metrics_port))
    p = open_h3(browser, server.port, isolated=True, server=server)

    def refused_uploads():
        text = httpx.get("http://127.0.0.1:%d/metrics" % metrics_port, timeout=10).text
        for line in text.splitlines():
            if line.startswith('peregrine_requests_total{method="POST",protocol="HTTP/3",status="4xx"}'):
                return float(line.split()[-1])
        return 0.0

    try:
        p.evaluate("(() => { const body = new ReadableStream({start(c) { c.enqueue(new Uint8Array(1000)); }});"
                   " window.__stalled = fetch('/upload?stalled=1', {method: 'POST', body, duplex: 'half'}); return true; })()")
        with https_client(server, certs) as client:
            assert poll(lambda: "/upload?stalled=1" in client.get("/seen").json(), timeout=10), \
                "the streaming upload never reached the application"
        assert poll(lambda: refused_uploads() == 1.0, timeout=15), "no 408 counted for the stalled upload"
        assert fetch_h3(p, "/").status == 200  # the connection goes on
    finally:
        p.close()


def test_max_connections_counts_quic_connections(start_server, certs, browser):
    server = start_h3(start_server, certs, "--max-connections", "1")
    first = open_h3(browser, server.port, isolated=True, server=server)
    try:
        second = browser.new_page(isolated=True)
        try:
            with pytest.raises(DevToolsError):
                second.navigate("https://127.0.0.1:%d/" % server.port, timeout=20)
        finally:
            second.close()
        assert fetch_h3(first, "/").body == b"hello, h3"  # the one admitted is still served
    finally:
        first.close()
    # once the first connection is gone, a new one is admitted
    third = open_h3(browser, server.port, isolated=True, server=server)
    try:
        assert fetch_h3(third, "/").status == 200
    finally:
        third.close()
