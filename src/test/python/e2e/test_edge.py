"""The edge chain: what the server does in front of the application is the same on every transport.

Today's stage is the health check (``--health-check-path``); these tests ask it over HTTP/1.1 (httpx
over TLS), HTTP/2 (httpx with h2 over TLS, and h2c prior knowledge with the ``h2`` library) and
HTTP/3 (headless Chromium, as in test_http3.py), and check each time that the application never saw
the request. They also check the request core's one refusal path: a request the server refuses
(413 at the head, 408 for a stalled body) is counted with its duration measured from the head's
arrival, whichever transport carried it.

Application: ``apps/h3_app.py`` (``/seen`` lists every request it received).
"""

import httpx
import pytest

from conftest import free_port, poll
from test_http2 import H2Client
from test_http3 import browser, fetch_h3, open_h3, start_h3  # noqa: F401 (browser is a module fixture)
from test_metrics import scrape
from test_tls import certs, https_client  # noqa: F401 (certs is the module fixture of the test certificates)

pytestmark = pytest.mark.peregrine_only

APP = "h3_app:app"


def assert_health_answer(status, headers, body):
    assert status == 200, (status, body)
    assert body == b"OK\n", body
    assert headers["content-type"] == "text/plain; charset=utf-8", headers
    assert headers["cache-control"] == "no-store", headers


def assert_not_seen(client):
    seen = client.get("/seen").json()
    assert not any(path.startswith("/healthz") for path in seen), seen


@pytest.fixture
def tls_server(start_server, certs):
    return start_h3(start_server, certs, "--health-check-path", "/healthz")


def test_health_check_over_http11(tls_server, certs):
    with https_client(tls_server, certs) as client:
        r = client.get("/healthz")
        assert r.http_version == "HTTP/1.1"
        assert_health_answer(r.status_code, r.headers, r.content)
        assert client.get("/").text == "hello, h3"
        assert_not_seen(client)


def test_health_check_over_http2(tls_server, certs):
    with https_client(tls_server, certs, http2=True) as client:
        r = client.get("/healthz")
        assert r.http_version == "HTTP/2"
        assert_health_answer(r.status_code, r.headers, r.content)
        head = client.head("/healthz")
        assert head.status_code == 200 and head.content == b""
        assert head.headers["content-length"] == "3"
        assert_not_seen(client)


def test_health_check_over_http3(tls_server, certs, browser):
    page = open_h3(browser, tls_server.port, isolated=True, server=tls_server)
    try:
        r = fetch_h3(page, "/healthz")
        assert_health_answer(r.status, r.headers, r.body)
        assert fetch_h3(page, "/").status == 200
    finally:
        page.close()
    with https_client(tls_server, certs) as client:
        assert_not_seen(client)


def test_health_check_over_h2c_prior_knowledge(start_server):
    server = start_server(APP, "--health-check-path", "/healthz")
    with H2Client(server.port) as c:
        r = c.get("/healthz")
        assert_health_answer(r.status, dict(r.headers), bytes(r.data))
    assert_not_seen(httpx.Client(base_url=server.url, timeout=10))


def duration(scrape_result):
    return (scrape_result("peregrine_request_duration_seconds_count"),
            scrape_result("peregrine_request_duration_seconds_sum"))


def test_a_stalled_body_refused_over_http2_is_timed_from_its_head(start_server):
    # The client announces a body and sends none; the server answers 408 after --request-timeout.
    # The duration recorded for it covers that wait: it was measured from the head's arrival, not
    # from the moment the refusal was written.
    metrics_port = free_port()
    server = start_server(APP, "--request-timeout", "1000", "--metrics-port", str(metrics_port))
    count_before, sum_before = duration(scrape(metrics_port))
    with H2Client(server.port) as c:
        sid = c.request("POST", "/upload", headers=[("content-length", "100")], end_stream=False)
        c.wait_for(lambda: c.streams[sid].status is not None, timeout=15, what="the 408")
        assert c.streams[sid].status == 408, c.streams[sid]
    assert poll(lambda: duration(scrape(metrics_port))[0] == count_before + 1, timeout=10), "the 408 was not counted"
    count_after, sum_after = duration(scrape(metrics_port))
    # at least the one-second stall (the server cannot answer sooner than its own timeout)
    assert sum_after - sum_before >= 1.0, (sum_before, sum_after)


@pytest.mark.parametrize("transport", ["http/1.1", "h2"])
def test_a_body_over_max_body_is_refused_before_the_application(start_server, certs, transport):
    server = start_h3(start_server, certs, "--max-body", "1000")
    with https_client(server, certs, http2=(transport == "h2")) as client:
        r = client.post("/upload", content=b"x" * 5000)
        assert r.status_code == 413, r
        assert r.headers["content-type"] == "text/plain; charset=utf-8"
        assert r.text == "Content Too Large: request body larger than --max-body\n"
        if transport == "h2":
            assert client.post("/upload", content=b"x" * 10).json()["size"] == 10
    with https_client(server, certs) as client:
        # only the small upload over h2 reached the application
        assert client.get("/seen").json().count("/upload") == (1 if transport == "h2" else 0)
