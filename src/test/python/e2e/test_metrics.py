"""--metrics-port: Prometheus metrics served on a port of their own, scraped
with httpx and read with prometheus_client's parser, checked to move with the
traffic the application port sees, for an ASGI and a WSGI application."""

import socket
import uuid

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import free_port, poll, read_until_contains, run_cli

pytestmark = pytest.mark.peregrine_only


class Scrape:
    """One scrape: sample values by name and labels."""

    def __init__(self, text):
        self.text = text
        self.samples = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self.samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value

    def __call__(self, name, **labels):
        return self.samples.get((name, tuple(sorted(labels.items()))), 0.0)

    def requests(self):
        """{(method, status class, protocol): count}"""
        return {
            (dict(labels)["method"], dict(labels)["status"], dict(labels)["protocol"]): value
            for (name, labels), value in self.samples.items()
            if name == "peregrine_requests_total"
        }


def scrape(port, host="127.0.0.1"):
    r = httpx.get("http://%s:%d/metrics" % (host, port), timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4"), r.headers
    return Scrape(r.text)


@pytest.fixture(scope="module", params=["asgi", "wsgi"])
def served(request, start_module_server):
    """(server, metrics port) for raw_asgi or raw_wsgi."""
    metrics_port = free_port()
    server = start_module_server("raw_%s:app" % request.param, "--metrics-port", metrics_port)
    return server, metrics_port


# ---------------------------------------------------------------------------
# counting


def test_requests_are_counted_by_method_status_class_and_protocol(served):
    server, port = served
    before = scrape(port)
    bodies = [b"x" * 1000, b"y" * 500]
    received = 0
    with server.client() as client:
        for _ in range(3):
            received += len(client.get("/").content)
        for body in bodies:
            r = client.post("/echo", content=body)
            assert r.content == body
            received += len(r.content)
        for method, status in [("PUT", 404), ("DELETE", 500), ("PATCH", 302), ("OPTIONS", 204)]:
            r = client.request(method, "/status/%d" % status)
            assert r.status_code == status
            received += len(r.content)
        assert client.head("/").status_code == 200
        r = client.get("/error")
        assert r.status_code == 500
        received += len(r.content)
    with server.raw() as c:
        r = c.request("PROPFIND", "/status/201")
        assert r.status == 201
        received += len(r.body)
    with server.raw() as c:
        r = c.request("GET", "/", version="HTTP/1.0")
        assert r.status == 200
        received += len(r.body)
    after = scrape(port)

    expected = {
        ("GET", "2xx", "HTTP/1.1"): 3,
        ("POST", "2xx", "HTTP/1.1"): 2,
        ("PUT", "4xx", "HTTP/1.1"): 1,
        ("DELETE", "5xx", "HTTP/1.1"): 1,
        ("PATCH", "3xx", "HTTP/1.1"): 1,
        ("OPTIONS", "2xx", "HTTP/1.1"): 1,
        ("HEAD", "2xx", "HTTP/1.1"): 1,
        ("GET", "5xx", "HTTP/1.1"): 1,
        ("other", "2xx", "HTTP/1.1"): 1,
        ("GET", "2xx", "HTTP/1.0"): 1,
    }
    old = before.requests()
    grown = {key: value - old.get(key, 0) for key, value in after.requests().items()}
    assert {key: value for key, value in grown.items() if value} == expected
    total = sum(expected.values())

    assert after("peregrine_request_duration_seconds_count") - before("peregrine_request_duration_seconds_count") == total
    assert after("peregrine_request_duration_seconds_bucket", le="+Inf") == after("peregrine_request_duration_seconds_count")
    assert after("peregrine_request_duration_seconds_sum") > before("peregrine_request_duration_seconds_sum")
    # every request above reached the application, each after a wait for the Python thread
    assert after("peregrine_python_wait_seconds_count") - before("peregrine_python_wait_seconds_count") == total
    assert after("peregrine_python_wait_seconds_sum") > before("peregrine_python_wait_seconds_sum")

    assert after("peregrine_request_body_bytes_total") - before("peregrine_request_body_bytes_total") == sum(map(len, bodies))
    assert after("peregrine_response_body_bytes_total") - before("peregrine_response_body_bytes_total") >= received
    assert after("peregrine_connections_total") - before("peregrine_connections_total") >= 3


def test_requests_the_server_refuses_are_counted(served):
    server, port = served
    before = scrape(port)
    with server.raw() as c:
        r = c.request("POST", "/echo", headers=[("Content-Length", str(10**12))])
        assert r.status == 413
    with server.raw() as c:
        c.send(b"NOT A REQUEST\r\n\r\n")
        assert c.read_response().status == 400
    after = scrape(port)
    old = before.requests()
    grown = {key: value - old.get(key, 0) for key, value in after.requests().items()}
    assert {key: value for key, value in grown.items() if value} == {
        ("POST", "4xx", "HTTP/1.1"): 1,
        ("other", "4xx", "HTTP/1.1"): 1,
    }
    # the application never saw them
    assert after("peregrine_python_wait_seconds_count") == before("peregrine_python_wait_seconds_count")


def test_histogram_buckets_are_cumulative(served):
    server, port = served
    with server.client() as client:
        for _ in range(5):
            client.get("/")
    s = scrape(port)
    for name in ("peregrine_request_duration_seconds", "peregrine_python_wait_seconds"):
        buckets = sorted(
            (float(dict(labels)["le"]), value)
            for (sample, labels), value in s.samples.items()
            if sample == name + "_bucket"
        )
        assert len(buckets) > 5, name
        counts = [value for _, value in buckets]
        assert counts == sorted(counts), (name, buckets)
        assert buckets[-1] == (float("inf"), s(name + "_count")), name


def test_active_connections_follow_open_keep_alive_connections(served):
    server, port = served
    poll(lambda: scrape(port)("peregrine_connections_active") == 0)
    before = scrape(port)
    conns = [server.raw() for _ in range(3)]
    try:
        for c in conns:
            assert c.request("GET", "/").status == 200  # admitted, and kept alive
        s = scrape(port)
        assert s("peregrine_connections_active") == 3
        assert s("peregrine_worker_connections_active", worker="1") == 3
        assert s("peregrine_connections_total") - before("peregrine_connections_total") == 3
    finally:
        for c in conns:
            c.close()
    assert poll(lambda: scrape(port)("peregrine_connections_active") == 0), "closed connections still counted"


def test_in_flight_counts_a_request_held_in_the_application(served, tmp_path):
    server, port = served
    poll(lambda: scrape(port)("peregrine_requests_in_flight") == 0)
    marker = tmp_path / ("release-" + uuid.uuid4().hex)
    with server.raw() as c:
        c.send_request("GET", "/stream-wait?marker=%s" % marker)
        read_until_contains(c, b"first")
        s = scrape(port)
        assert s("peregrine_requests_in_flight") == 1
        assert s("peregrine_worker_requests_in_flight", worker="1") == 1
        marker.write_text("go")
        read_until_contains(c, b"seen-marker")
    assert poll(lambda: scrape(port)("peregrine_requests_in_flight") == 0), "the finished request is still in flight"


def test_worker_counters(served):
    _, port = served
    s = scrape(port)
    assert s("peregrine_worker_starts_total") == 1
    assert s("peregrine_worker_exits_total") == 0
    assert s("peregrine_worker_restarts_total") == 0


# ---------------------------------------------------------------------------
# the port


def test_metrics_port_serves_metrics_only_and_app_port_serves_no_metrics(served):
    server, port = served
    root = httpx.get("http://127.0.0.1:%d/" % port, timeout=10)
    assert root.status_code == 200 and "peregrine_requests_in_flight" in root.text
    assert httpx.get("http://127.0.0.1:%d/echo" % port, timeout=10).status_code == 404
    assert httpx.post("http://127.0.0.1:%d/metrics" % port, timeout=10).status_code == 405
    head = httpx.head("http://127.0.0.1:%d/metrics" % port, timeout=10)
    assert head.status_code == 200 and head.content == b""

    app = server.get("/metrics")
    assert app.status_code == 404
    assert "peregrine_" not in app.text


def test_openmetrics_when_asked(served):
    _, port = served
    r = httpx.get("http://127.0.0.1:%d/metrics" % port, headers={"Accept": "application/openmetrics-text; version=1.0.0"}, timeout=10)
    assert r.headers["content-type"].startswith("application/openmetrics-text")
    assert r.text.endswith("# EOF\n")


def test_metrics_host_is_bound_apart_from_host(start_server):
    port = free_port()
    server = start_server("raw_asgi:app", "--host", "127.0.0.1", "--metrics-host", "127.0.0.2", "--metrics-port", port)
    assert scrape(port, host="127.0.0.2")("peregrine_worker_starts_total") == 1
    with pytest.raises(httpx.ConnectError):
        httpx.get("http://127.0.0.1:%d/metrics" % port, timeout=5)
    assert server.get("/").status_code == 200


# ---------------------------------------------------------------------------
# bad values


@pytest.mark.parametrize("value", ["abc", "-1", "65536"])
def test_bad_metrics_port_exits_2_with_one_line(value):
    code, out = run_cli("--metrics-port", value, "raw_asgi:app")
    assert code == 2, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1 and "--metrics-port" in lines[0], out


def test_metrics_port_equal_to_port_exits_2():
    port = free_port()
    code, out = run_cli("--port", port, "--metrics-port", port, "raw_asgi:app")
    assert code == 2, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1 and "--metrics-port" in lines[0], out


def test_metrics_port_taken_is_reported(start_server):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out = run_cli("--port", free_port(), "--metrics-port", port, "raw_asgi:app")
    assert code == 1, out
    assert "cannot serve metrics on 127.0.0.1:%d" % port in out, out
