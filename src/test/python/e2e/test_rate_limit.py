"""--rate-limit and --rate-limit-burst: one GCRA budget per client, shared by every worker through
shared memory, answered 429 by the server without calling the application.

The application (apps/rate_limit_app.py) only ever answers 200, so every 429 is the server's. Each
test spends the budget of clients of its own: a trusted proxy (a peer address in
--forwarded-allow-ips) names them in X-Forwarded-For, and untrusted peers are told apart by their
own source address (any 127.x.y.z reaches a server on 127.0.0.1).

Counting is checked against the test's own clock: every request was charged between the moment
the first was sent and the moment the last answer arrived, so at most burst + rate x (that span) + 1
may pass. And the burst passed before the first refusal, after which the client, sending faster than
the rate, never lets its budget fill up again: at least burst + rate x (first refusal's answer ..
last send) - 1 must pass. The client keeps sending for a while after its first refusal.
"""

import math
import os
import re
import signal
import socket
import threading
import time

import httpx
import pytest

from conftest import free_port, poll, run_cli
from test_http3 import browser, fetch_h3, open_h3, start_h3  # noqa: F401 (browser: the module-scoped Chromium fixture)
from test_tls import certs  # noqa: F401 (the module-scoped fixture making the test certificates)

pytestmark = pytest.mark.peregrine_only

APP = "rate_limit_app:app"
PROXY = "127.0.0.2"  # the trusted proxy's source address
RATE, BURST = 10, 50  # the burst lasts 5 s: only a stall longer than that could lose refills


def connect(port, source=None, host="127.0.0.1"):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(20)
    if source:
        s.bind((source, 0))
    s.connect((host, port))
    return s


def request_bytes(path="/", client=None, method="GET", extra=b""):
    forwarded = b"X-Forwarded-For: %s\r\n" % client.encode() if client else b""
    return b"%s %s HTTP/1.1\r\nHost: t\r\n%s%s\r\n" % (method.encode(), path.encode(), forwarded, extra)


class Responses:
    """Reads pipelined HTTP/1.1 responses (all framed by Content-Length) off a socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""

    def _fill(self):
        data = self.sock.recv(1 << 16)
        if not data:
            raise ConnectionError("closed by the server")
        self.buffer += data

    def next(self):
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, headers, body


def one(port, path="/", client=None, source=PROXY, host="127.0.0.1"):
    with connect(port, source, host) as s:
        s.sendall(request_bytes(path, client))
        return Responses(s).next()


def metric(port, name):
    text = httpx.get("http://127.0.0.1:%d/metrics" % port, timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def pids_seen(port, network, count=40):
    """The worker pids that answered /pid over new connections, each request from another client
    of `network` (a /24 with its last byte left out)."""
    pids = set()
    for i in range(count):
        status, _, body = one(port, "/pid", "%s.%d" % (network, i))
        assert status == 200
        pids.add(int(body))
    return pids


@pytest.fixture(scope="module")
def limited(start_module_server):
    """Two workers, RATE a second with a burst of BURST, a trusted proxy at 127.0.0.2, and metrics."""
    metrics = free_port()
    server = start_module_server(APP, "--workers", "2", "--rate-limit", "%d/s" % RATE, "--rate-limit-burst", BURST,
                                 "--forwarded-allow-ips", PROXY, "--health-check-path", "/healthz",
                                 "--metrics-port", metrics, "--access-log")
    # A supervisor's socket accepts from the start: the server is ready once it says every worker is.
    assert server.wait_for_output("with 2 workers", timeout=90), server.output()[-3000:]
    return server, metrics


class Marks:
    """The test's clock bounds of one client's run (see the module's docstring)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sent_first = time.monotonic()
        self.first_refusal_answered = None
        self.sent_last = 0.0
        self.answered_last = None
        self.allowed = self.refused = 0

    def record(self, sent, status):
        answered = time.monotonic()
        assert status in (200, 429), status
        with self.lock:
            if status == 200:
                self.allowed += 1
            else:
                self.refused += 1
                if self.first_refusal_answered is None:
                    self.first_refusal_answered = answered
            self.sent_last = max(self.sent_last, sent)
            self.answered_last = answered

    def going(self, seconds, now):
        """Whether to send more: until `seconds` after the first refusal (60 s at most in all)."""
        first = self.first_refusal_answered
        return now < self.sent_first + 60 and (first is None or now < first + seconds)

    def assert_exact(self):
        assert self.refused > 0, "the client was never limited"
        most = BURST + math.floor(RATE * (self.answered_last - self.sent_first)) + 1
        least = BURST + math.floor(RATE * (self.sent_last - self.first_refusal_answered)) - 1
        assert least <= self.allowed <= most, "%d allowed; expected %d..%d" % (self.allowed, least, most)


def hammer_http1(port, client, seconds, connections=4, source=PROXY, forged=False):
    """Sends requests for `client` as fast as it can over several connections (so both workers get
    some), 4 pipelined at a time, until `seconds` after its first refusal; returns the Marks."""
    marks = Marks()

    def run():
        with connect(port, source) as s:
            responses = Responses(s)
            while True:
                sent = time.monotonic()
                if not marks.going(seconds, sent):
                    return
                if forged:
                    s.sendall(b"".join(request_bytes("/", "203.0.113.%d" % (sent * 1e6 % 250 + i)) for i in range(4)))
                else:
                    s.sendall(request_bytes("/", client) * 4)
                for _ in range(4):
                    marks.record(sent, responses.next()[0])

    threads = [threading.Thread(target=run) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    return marks


def test_a_client_as_fast_as_it_can_over_two_workers_gets_burst_plus_rate_times_time(limited):
    server, metrics = limited
    assert len(pids_seen(server.port, "198.51.101")) == 2, "the requests did not reach both workers"
    hammer_http1(server.port, "198.51.100.1", 1.5).assert_exact()


def test_http2_requests_share_the_budget_exactly(limited):
    server, _ = limited
    transport = httpx.HTTPTransport(http1=False, http2=True, local_address=PROXY)
    headers = {"X-Forwarded-For": "198.51.100.2"}
    with httpx.Client(transport=transport, base_url=server.url, http1=False, http2=True, timeout=20) as c:
        c.get("/pid", headers={"X-Forwarded-For": "198.51.100.20"})  # the connection, before the clock starts
        marks = Marks()
        while True:
            sent = time.monotonic()
            if not marks.going(1.5, sent):
                break
            r = c.get("/", headers=headers)
            assert r.http_version == "HTTP/2"
            marks.record(sent, r.status_code)
    marks.assert_exact()


def test_a_forged_forwarded_for_from_an_untrusted_peer_is_keyed_by_the_peer(limited):
    server, _ = limited
    # Every request names another client, but the peer is not trusted: one budget, counted exactly.
    hammer_http1(server.port, None, 1.0, source="127.0.0.7", forged=True).assert_exact()
    # The budget spent is the peer's own, not that of the addresses it named.
    assert one(server.port, client="203.0.113.1")[0] == 200


# ---- the answers: one worker, 1/m with a burst of 2, so that nothing refills while a test runs


@pytest.fixture(scope="module")
def strict(start_module_server):
    metrics = free_port()
    server = start_module_server(APP, "--rate-limit", "1/m", "--rate-limit-burst", "2", "--forwarded-allow-ips", PROXY,
                                 "--health-check-path", "/healthz", "--metrics-port", metrics, "--access-log")
    return server, metrics


def spend(server, client, source=PROXY):
    assert [one(server.port, client=client, source=source)[0] for _ in range(2)] == [200, 200]


def test_a_refusal_carries_retry_after_and_the_ratelimit_fields_and_a_short_text(strict):
    server, _ = strict
    spend(server, "198.51.100.3")
    status, headers, body = one(server.port, client="198.51.100.3")
    assert status == 429
    # The second request moved the next allowed arrival a minute past the burst's tolerance.
    retry = int(headers["retry-after"])
    assert 1 <= retry <= 60
    # The quota is the burst, the window the time to refill it (2 at 1/m: 120 s).
    assert headers["ratelimit-policy"] == '"peregrine";q=2;w=120'
    assert headers["ratelimit"] == '"peregrine";r=0;t=%d' % retry
    assert headers["content-type"].startswith("text/plain")
    assert body.startswith(b"Too Many Requests") and len(body) < 200


def test_each_client_behind_a_trusted_proxy_has_its_own_budget(strict):
    server, _ = strict
    spend(server, "198.51.100.4")
    assert one(server.port, client="198.51.100.4")[0] == 429
    assert one(server.port, client="198.51.100.5")[0] == 200
    # A forged header from an untrusted peer names nobody: the peer's own budget.
    spend(server, "198.51.100.8", source="127.0.0.9")
    assert one(server.port, client="198.51.100.9", source="127.0.0.9")[0] == 429
    assert one(server.port, client="198.51.100.8")[0] == 200


def test_the_health_check_is_never_limited(strict):
    server, _ = strict
    statuses = [one(server.port, "/healthz", source="127.0.0.8")[0] for _ in range(10)]
    assert statuses == [200] * 10


HANDSHAKE = (b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
             b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")


def test_a_websocket_handshake_is_limited_too_and_its_429_is_counted_and_logged(strict):
    server, metrics = strict
    with connect(server.port, PROXY) as s:
        s.sendall(request_bytes("/ws", "198.51.100.6", extra=HANDSHAKE))
        assert Responses(s).next()[0] == 101
    assert one(server.port, client="198.51.100.6")[0] == 200
    before = metric(metrics, 'peregrine_requests_total{method="GET",protocol="HTTP/1.1",status="4xx"}')
    with connect(server.port, PROXY) as s:
        s.sendall(request_bytes("/ws?refused", "198.51.100.6", extra=HANDSHAKE))
        status, headers, body = Responses(s).next()
        assert status == 429 and "retry-after" in headers and b"rate limit" in body
    # The access log names the client the trusted proxy reported, like any other line.
    assert server.wait_for_output(lambda out: re.search(r'198\.51\.100\.6:\d+ - "GET /ws\?refused HTTP/1\.1" 429 ', out)), \
        server.output()[-2000:]
    assert metric(metrics, 'peregrine_requests_total{method="GET",protocol="HTTP/1.1",status="4xx"}') == before + 1


def test_limited_requests_are_counted_in_metrics_and_shown_in_the_access_log(strict):
    server, metrics = strict
    before = metric(metrics, "peregrine_rate_limited_total")
    spend(server, "198.51.100.7")
    for _ in range(3):
        assert one(server.port, client="198.51.100.7")[0] == 429
    assert poll(lambda: metric(metrics, "peregrine_rate_limited_total") >= before + 3)
    assert metric(metrics, "peregrine_rate_limited_total") == before + 3
    assert metric(metrics, "peregrine_rate_limit_untracked_total") == 0
    assert server.wait_for_output(lambda out: re.search(r"198\.51\.100\.7.* 429 ", out)), server.output()[-2000:]


# ---- IPv6, churn and SIGHUP: a server on ::1 behind a proxy at ::1, 1/m with a burst of 2


@pytest.fixture(scope="module")
def slow(start_module_server):
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    metrics = free_port()
    server = start_module_server(APP, "--host", "::1", "--workers", "2", "--rate-limit", "1/m", "--rate-limit-burst", "2",
                                 "--forwarded-allow-ips", "::1", "--metrics-port", metrics, "--metrics-host", "127.0.0.1", wait=False)
    # The supervisor holds the socket from the start: ready is when it says every worker is.
    assert server.wait_for_output("with 2 workers", timeout=90), server.output()[-3000:]
    return server, metrics


def one6(server, client):
    return one(server.port, client=client, source=None, host="::1")[0]


def test_ipv6_clients_are_keyed_by_their_slash_64(slow):
    server, _ = slow
    assert one6(server, "2001:db8:1:1::1") == 200
    assert one6(server, "2001:db8:1:1:ffff::2") == 200
    assert one6(server, "2001:db8:1:1:1234:5678:9abc:def0") == 429, "a third address of one /64 shares its budget"
    assert one6(server, "2001:db8:1:2::1") == 200, "another /64 has a budget of its own"


@pytest.mark.timeout(300)  # 100,000 application calls on a shared machine
def test_a_limited_client_is_never_given_a_fresh_budget_by_100000_others(slow):
    server, metrics = slow
    limited = "192.0.2.200"
    assert [one6(server, limited) for _ in range(3)] == [200, 200, 429]

    def churn(first, count):
        with connect(server.port, None, "::1") as s:
            responses = Responses(s)
            batch = 200
            for start in range(first, first + count, batch):
                clients = range(start, min(start + batch, first + count))
                s.sendall(b"".join(request_bytes("/", "10.%d.%d.%d" % (c >> 16 & 255, c >> 8 & 255, c & 255)) for c in clients))
                for _ in clients:
                    assert responses.next()[0] == 200

    threads = [threading.Thread(target=churn, args=(i * 25_000, 25_000)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert one6(server, limited) == 429
    # The table (65,536 entries) had to forget clients with part of their budget spent; none was left uncounted.
    assert metric(metrics, "peregrine_rate_limit_forgotten_total") > 0
    assert metric(metrics, "peregrine_rate_limit_untracked_total") == 0


@pytest.mark.timeout(300)  # two workers replaced one after the other
def test_budgets_survive_the_replacement_of_every_worker_on_sighup(slow):
    server, _ = slow
    client = "2001:db8:77::1"
    assert [one6(server, client) for _ in range(3)] == [200, 200, 429]
    asked = iter(range(1_000_000))

    def pids():
        seen = set()
        for _ in range(10):
            with connect(server.port, None, "::1") as s:
                s.sendall(request_bytes("/pid", "2001:db8:%x::1" % (0x1000 + next(asked))))
                status, _, body = Responses(s).next()
                assert status == 200
                seen.add(int(body))
        return seen

    before = pids()
    os.kill(server.proc.pid, signal.SIGHUP)

    def replaced():
        seen = pids()
        return seen and not (seen & before)

    assert poll(replaced, timeout=90), "the workers were not replaced"
    assert one6(server, client) == 429, "the budget was lost with the workers"


def test_bad_rate_limit_values_exit_2_with_one_line():
    for args in (["--rate-limit", "10/d"], ["--rate-limit", "0/s"], ["--rate-limit", "1/s", "--rate-limit-burst", "0"],
                 ["--rate-limit-burst", "5"]):
        code, out = run_cli(*args, APP)
        lines = [line for line in out.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and "--rate-limit" in lines[0], (args, out)


def test_the_rate_limit_comes_from_the_environment(start_server):
    server = start_server(APP, "--forwarded-allow-ips", PROXY, env={"PEREGRINE_RATE_LIMIT": "1/h", "PEREGRINE_RATE_LIMIT_BURST": "1"})
    assert one(server.port, client="198.51.100.50")[0] == 200
    status, headers, _ = one(server.port, client="198.51.100.50")
    assert status == 429 and headers["retry-after"] == "3600"


# ---- HTTP/3, with Chromium as the client (skipped where it is not installed)


def test_http3_requests_are_limited_too(start_server, certs, browser):  # noqa: F811 (the fixtures imported above)
    server = start_h3(start_server, certs, "--rate-limit", "1/m", "--rate-limit-burst", "3")
    page = open_h3(browser, server.port, server=server)
    try:
        statuses = []
        for _ in range(6):
            r = fetch_h3(page, "/")
            statuses.append(r.status)
            if r.status == 429:
                assert int(r.headers["retry-after"]) >= 1
                assert r.headers["ratelimit-policy"] == '"peregrine";q=3;w=180'
                break
        # The navigation spent one request of the burst (a favicon fetch may spend another).
        assert statuses[-1] == 429 and statuses.count(200) <= 2, statuses
    finally:
        page.close()
