"""--shared-store: replicas that share one rate limit budget per client through Redis (issue 34).

Two Peregrine servers on ports of their own stand for two replicas of one deployment; Debian's
``redis-server`` (started here, on a free port, persistence off, in the test's own directory) is the
store. The application (apps/rate_limit_app.py) only ever answers 200, so every 429 is the server's.
Clients are told apart by X-Forwarded-For: the tests connect from 127.0.0.1, a trusted proxy by
default, and every test names clients of its own (``fresh_client()``), so no budget spent by one
test is seen by another.

Every replica is limited to 5/m with a burst of 5: nothing refills (one request every 12 s) while a
test runs, so a client alternating between two replicas gets exactly 5 through when they share the
budget and 10 when they do not (the control). The store is inspected over raw RESP (no client
library in the test venv): keys live under ``peregrine:rl:``.

The store failing (killed, stopped so that it times out, wrong password, absent at startup) must
never cost a request: the replicas fall back to their own local limit, count the failed operations
in ``peregrine_shared_store_errors_total{operation="rate_limit"}``, log one warning naming the
shared store, and share again by themselves once the store answers ("answers again").

The password must appear in no output of the server (logs, error lines, --help, /metrics).
"""

import concurrent.futures
import itertools
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import free_port, poll, run_cli
from test_tls import LOCAL_NAMES, _leaf, make_root_ca

# Debian's Redis 7; PEREGRINE_TEST_STORE_SERVER runs the same tests against another build (a valkey-server).
REDIS = os.environ.get("PEREGRINE_TEST_STORE_SERVER", "/usr/bin/redis-server")

# Also the marks of test_shared_cache.py.
STORE_TESTS = [
    pytest.mark.peregrine_only,
    pytest.mark.skipif(sys.version_info >= (3, 12), reason="the store does not depend on the Python version: runs once, under 3.11"),
    pytest.mark.skipif(not os.path.exists(REDIS), reason="Debian's redis-server is needed (bin/test installs it)"),
]
pytestmark = STORE_TESTS

APP = "rate_limit_app:app"
RATE, BURST = "5/m", 5
PREFIX = b"peregrine:rl:"
ERRORS = "peregrine_shared_store_errors_total"
ROUND_TRIPS = "peregrine_shared_store_round_trip_seconds_count"
# A password with characters that must be %-escaped in a URL: the escaped form must not leak either.
PASSWORD = "e2e+Store/Pw-7Qz@k"
PASSWORD_IN_URL = "e2e%2BStore%2FPw-7Qz%40k"
WRONG_PASSWORD = "not-the-Pw-3Xv9"
USER_PASSWORD = "acl-User-Pw-5Tm"

# How long a request waits for the store before it is served without it (--shared-store-timeout). The
# default, 50 ms, is shorter than a fresh replica's first round trips on a busy machine (JIT, the
# script's first run): a request that times out is limited locally, and a count that must be exact
# would then be off. The budgets shared here are checked exactly, so the tests wait longer; the
# stopped store's test sets a short timeout of its own.
STORE_TIMEOUT_MS = 2000

_clients = itertools.count(1)


def fresh_client():
    """A client address no other request of this module named."""
    n = next(_clients)
    return "10.77.%d.%d" % (n // 250, n % 250 + 1)


# ---------------------------------------------------------------------------
# The store: redis-server, and RESP over a socket


class RespError(Exception):
    pass


def _read_reply(f):
    line = f.readline()
    if not line:
        raise ConnectionError("the store closed the connection")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RespError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_read_reply(f) for _ in range(n)]
    raise AssertionError("not a RESP reply: %r" % line)


class RedisServer:
    """redis-server on 127.0.0.1:port (the TLS port when tls=(cert, key, ca)), started by start()."""

    def __init__(self, directory, port, *extra, password=None, tls=None):
        self.directory = directory
        self.port = port
        self.password = password
        self.tls = tls
        self.argv = [REDIS, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(directory)]
        if tls:
            cert, key, ca = tls
            self.argv += ["--port", "0", "--tls-port", str(port), "--tls-cert-file", str(cert), "--tls-key-file", str(key),
                          "--tls-ca-cert-file", str(ca), "--tls-auth-clients", "no"]
        else:
            self.argv += ["--port", str(port)]
        if password:
            self.argv += ["--requirepass", password]
        self.argv += list(extra)
        self.log_path = directory / ("redis-%d.log" % port)
        self.proc = None

    def start(self):
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, cwd=str(self.directory), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)

        def answers():
            assert self.proc.poll() is None, "redis-server exited:\n" + self.log_path.read_text()
            try:
                return self.command("PING") == "PONG"
            except OSError:
                return False

        assert poll(answers, timeout=20), "redis-server did not answer:\n" + self.log_path.read_text()
        return self

    def connect(self):
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        if self.tls:
            ctx = ssl.create_default_context(cafile=str(self.tls[2]))
            sock = ctx.wrap_socket(sock, server_hostname="localhost")
        return sock

    def command(self, *args, db=None):
        with self.connect() as sock, sock.makefile("rb") as f:
            commands = ([("AUTH", self.password)] if self.password else []) + ([("SELECT", db)] if db else []) + [args]
            for command in commands:
                parts = [a if isinstance(a, bytes) else str(a).encode() for a in command]
                sock.sendall(b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts))
                reply = _read_reply(f)
            return reply

    def keys(self, db=0):
        return self.command("KEYS", PREFIX + b"*", db=db)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # in case a test left it stopped
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class RedisFactory:
    def __init__(self, directory):
        self.directory = directory
        self.servers = []

    def __call__(self, *extra, port=None, password=None, tls=None):
        server = RedisServer(self.directory, port or free_port(), *extra, password=password, tls=tls)
        self.servers.append(server)
        return server.start()

    def stop_all(self):
        for server in self.servers:
            server.stop()


@pytest.fixture
def redis_factory(tmp_path):
    factory = RedisFactory(tmp_path)
    yield factory
    factory.stop_all()


@pytest.fixture(scope="module")
def module_redis(tmp_path_factory):
    factory = RedisFactory(tmp_path_factory.mktemp("redis"))
    yield factory()
    factory.stop_all()


# ---------------------------------------------------------------------------
# The replicas, and what a client sees


def start_replicas(start, store=None, *extra, count=2, env=None, store_timeout=STORE_TIMEOUT_MS):
    """`count` servers limited to RATE with a burst of BURST, each with a metrics port (.metrics), sharing
    the store at URL `store` when given, waiting for it up to store_timeout ms; started together. store
    and env may also be lists, one item a replica."""
    if isinstance(store, list):
        count = len(store)
    stores = store if isinstance(store, list) else [store] * count
    envs = env if isinstance(env, list) else [env] * count
    replicas = []
    for i in range(count):
        metrics = free_port()
        options = ["--rate-limit", RATE, "--rate-limit-burst", BURST, "--metrics-port", metrics]
        if stores[i] is not None:
            options += ["--shared-store", stores[i], "--shared-store-timeout", store_timeout]
        replica = start(APP, *options, *extra, env=envs[i], wait=False)
        replica.metrics = metrics
        replicas.append(replica)
    for replica in replicas:
        replica.wait_ready()
    return replicas


def ask(replica, client, timeout=10):
    """One request for `client`, on a connection of its own: (status, headers, seconds taken)."""
    started = time.monotonic()
    r = httpx.get(replica.url + "/", headers={"X-Forwarded-For": client}, timeout=timeout)
    return r.status_code, r.headers, time.monotonic() - started


def alternate(replicas, client, count=10):
    """`count` requests for `client`, taking the replicas in turn: the statuses, in order."""
    return [ask(replicas[i % len(replicas)], client)[0] for i in range(count)]


def scrape(replica):
    r = httpx.get("http://127.0.0.1:%d/metrics" % replica.metrics, timeout=10)
    assert r.status_code == 200, r.text
    return r.text


def metric(replica, name, **labels):
    """The sum of the samples called `name` whose labels include `labels`."""
    total = 0.0
    for family in text_string_to_metric_families(scrape(replica)):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def store_errors(replica):
    return metric(replica, ERRORS, operation="rate_limit")


def shares(replicas, store, db=0):
    """Whether a fresh client alternating between the replicas gets exactly BURST through, with a key
    of its own added to the store (in database db)."""
    before = len(store.keys(db))
    statuses = alternate(replicas, fresh_client())
    return statuses == [200] * BURST + [429] * (10 - BURST) and len(store.keys(db)) > before


def assert_no_secret(texts, *secrets):
    for where, text in texts.items():
        for secret in secrets:
            assert secret not in text, "%r appears in %s:\n%s" % (secret, where, text[-3000:])


# ---------------------------------------------------------------------------
# Sharing


@pytest.fixture(scope="module")
def shared(start_module_server, module_redis):
    return start_replicas(start_module_server, "redis://127.0.0.1:%d" % module_redis.port), module_redis


def test_one_client_alternating_between_two_replicas_gets_the_shared_budget_not_twice_it(shared):
    """The GCRA runs in the store: 10 requests alternating between two replicas let exactly BURST
    through, the rest are refused with Retry-After and the same RateLimit fields as the local limit,
    and each store round trip is measured."""
    replicas, store = shared
    trips_before = [metric(r, ROUND_TRIPS) for r in replicas]
    client = fresh_client()
    answers = [ask(replicas[i % 2], client) for i in range(10)]
    statuses = [status for status, _, _ in answers]
    assert statuses == [200] * BURST + [429] * (10 - BURST), statuses
    for status, headers, _ in answers[BURST:]:
        retry = int(headers["retry-after"])
        assert 1 <= retry <= 12, headers  # the next request is allowed 12 s after the burst's first
        assert headers["ratelimit-policy"] == '"peregrine";q=5;w=60', headers
        assert headers["ratelimit"] == '"peregrine";r=0;t=%d' % retry, headers
    # Both replicas asked the store, each round trip counted in the histogram.
    for replica, before in zip(replicas, trips_before):
        assert metric(replica, ROUND_TRIPS) >= before + 5, scrape(replica)
    assert all(store_errors(r) == 0 for r in replicas)
    keys = store.keys()
    assert keys and all(key.startswith(PREFIX) for key in keys), keys
    # One more key for one more client.
    alternate(replicas, fresh_client(), 1)
    assert len(store.keys()) == len(keys) + 1, (keys, store.keys())


def test_another_client_has_a_budget_of_its_own_in_the_store(shared):
    """A second client, spending right after a first one has spent its budget, still gets its BURST."""
    replicas, _ = shared
    first, second = fresh_client(), fresh_client()
    assert alternate(replicas, first, 6) == [200] * BURST + [429]
    assert alternate(replicas, second) == [200] * BURST + [429] * (10 - BURST)
    assert alternate(replicas, first, 2) == [429, 429]


def test_ipv6_clients_of_one_slash_64_share_one_budget_in_the_store(shared):
    """As with the local limit, an IPv6 client is its /64: addresses of one /64 spread over both
    replicas spend one budget in the store, another /64 has its own."""
    replicas, _ = shared
    statuses = [ask(replicas[i % 2], "2001:db8:34:1::%x" % (i + 1))[0] for i in range(10)]
    assert statuses == [200] * BURST + [429] * (10 - BURST), statuses
    assert ask(replicas[1], "2001:db8:34:2::1")[0] == 200


def test_without_the_store_each_replica_has_its_own_budget(start_server):
    """The control: without --shared-store, the same alternation gets twice the burst through (which
    shows the tests above can fail)."""
    replicas = start_replicas(start_server)
    client = fresh_client()
    assert alternate(replicas, client) == [200] * 10
    assert alternate(replicas, client, 2) == [429, 429]


# ---------------------------------------------------------------------------
# The store failing


class Load(threading.Thread):
    """Requests to the replicas in turn, one client of its own for every 7 (so both 200 and 429 come),
    until stop(): every answer's status, or the exception a request raised, in .seen."""

    def __init__(self, replicas):
        super().__init__(daemon=True)
        self.replicas = replicas
        self.halt = threading.Event()
        self.seen = []

    def run(self):
        clients = [httpx.Client(base_url=r.url, timeout=10) for r in self.replicas]
        try:
            for n in itertools.count():
                if self.halt.wait(0.005):
                    return
                client = "10.99.%d.%d" % (n // 7 // 250 % 250, n // 7 % 250 + 1)
                try:
                    self.seen.append(clients[n % len(clients)].get("/", headers={"X-Forwarded-For": client}).status_code)
                except httpx.HTTPError as e:
                    self.seen.append(repr(e))
        finally:
            for c in clients:
                c.close()

    def stop(self):
        self.halt.set()
        self.join(30)
        return self.seen


def test_the_store_killed_mid_load_costs_no_request_and_sharing_resumes_when_it_is_back(start_server, redis_factory):
    """With the store SIGKILLed under load, both replicas keep answering (200 or 429, never 5xx nor a
    dropped connection) with their own local limit, count the failed operations and warn once naming the
    shared store; started again on the same port, the store is used again without a restart, and each
    replica says it answers again."""
    store = redis_factory()
    replicas = start_replicas(start_server, "redis://127.0.0.1:%d" % store.port)
    assert shares(replicas, store)
    marks = [len(r.complete_output()) for r in replicas]
    load = Load(replicas)
    load.start()
    assert poll(lambda: len(load.seen) >= 10), load.seen

    store.kill()
    # Mid-load: one client per replica spends past its local burst, and others alternate.
    took = []
    for replica in replicas:
        client = fresh_client()
        answers = [ask(replica, client) for _ in range(BURST + 2)]
        took += [seconds for _, _, seconds in answers]
        # The fallback is each replica's own limit, the same as without the store: not unlimited.
        assert [status for status, _, _ in answers] == [200] * BURST + [429] * 2, answers
    for _ in range(3):
        statuses = alternate(replicas, fresh_client(), 4)
        assert statuses == [200] * 4, statuses  # two each: within each replica's own burst
    assert max(took) < 5, "requests took up to %.1f s with the store down" % max(took)
    for replica, mark in zip(replicas, marks):
        assert poll(lambda: store_errors(replica) > 0), scrape(replica)
        assert replica.wait_for_output(lambda out: re.search("shared store", out[mark:], re.I)), replica.output()[-3000:]
    # At most one warning a minute: the whole outage so far is one.
    for replica, mark in zip(replicas, marks):
        text = replica.complete_output()[mark:]
        warnings = [line for line in text.splitlines() if re.search("shared store", line, re.I)]
        assert len(warnings) == 1, text

    store.start()
    marks = [len(r.complete_output()) for r in replicas]
    # (The load adds keys of its own: the statuses are what show the budget shared here.)
    assert poll(lambda: shares(replicas, store), timeout=40, interval=0.5), \
        "sharing did not resume; keys %r" % store.keys()
    for replica, mark in zip(replicas, marks):
        assert replica.wait_for_output(lambda out: "answers again" in out[mark:]), replica.output()[-3000:]
    seen = load.stop()
    assert len(seen) >= 20 and set(seen) == {200, 429}, seen
    # Once back, the store no longer fails.
    errors = [store_errors(r) for r in replicas]
    assert shares(replicas, store)
    assert [store_errors(r) for r in replicas] == errors


def test_a_store_that_stops_answering_times_out_and_costs_no_request(start_server, redis_factory):
    """A store that accepts but never answers (SIGSTOP) is given up on after --shared-store-timeout:
    every request is answered soon after it, within each replica's own limit, the failures are counted;
    after SIGCONT the replicas share again."""
    store = redis_factory()
    replicas = start_replicas(start_server, "redis://127.0.0.1:%d" % store.port, store_timeout=300)
    assert shares(replicas, store)
    store.proc.send_signal(signal.SIGSTOP)
    try:
        took = []
        for replica in replicas:
            answers = [ask(replica, fresh_client(), timeout=15) for _ in range(3)]
            assert [status for status, _, _ in answers] == [200] * 3, answers
            took += [seconds for _, _, seconds in answers]
        # Each waited 300 ms at most for the store (and a busy machine's scheduling).
        assert max(took) < 2, "requests took %r s with the store stopped" % [round(t, 2) for t in took]
        for replica in replicas:
            assert poll(lambda: store_errors(replica) > 0), scrape(replica)
    finally:
        store.proc.send_signal(signal.SIGCONT)
    assert poll(lambda: shares(replicas, store), timeout=40, interval=0.5), "sharing did not resume"


def test_a_store_down_at_startup_does_not_keep_the_server_from_serving(start_server, redis_factory):
    """Nothing listens on the store's port when the server starts: it starts, serves within its own
    limit, counts the failures; once a store listens there, it is used."""
    port = free_port()
    (replica,) = start_replicas(start_server, "redis://127.0.0.1:%d" % port, count=1)
    client = fresh_client()
    assert alternate([replica], client, BURST + 1) == [200] * BURST + [429]
    assert poll(lambda: store_errors(replica) > 0), scrape(replica)
    mark = len(replica.complete_output())
    store = redis_factory(port=port)

    def keyed():
        ask(replica, fresh_client())
        return store.keys()

    assert poll(keyed, timeout=40, interval=0.5), replica.output()[-3000:]
    # The warning said "until it answers again": so does the line that ends it.
    assert replica.wait_for_output(lambda out: "answers again" in out[mark:]), replica.output()[-3000:]


# ---------------------------------------------------------------------------
# Passwords


def test_a_password_from_the_environment_or_the_url_works_and_is_never_shown(start_server, redis_factory):
    """A store with --requirepass and an ACL user allowed only the keys under peregrine:rl:. Three
    replicas: one given the password through PEREGRINE_SHARED_STORE_PASSWORD, one in the URL
    (%-escaped), one as the ACL user (USER:PASSWORD in the URL). They share one budget, and no password
    is in their output nor /metrics, nor in --help with one in the environment."""
    store = redis_factory(password=PASSWORD)
    assert store.command("ACL", "SETUSER", "replica", "on", ">" + USER_PASSWORD, "~peregrine:rl:*", "+@all") == "OK"
    replicas = start_replicas(start_server, [
        "redis://127.0.0.1:%d" % store.port,
        "redis://:%s@127.0.0.1:%d/0" % (PASSWORD_IN_URL, store.port),
        "redis://replica:%s@127.0.0.1:%d" % (USER_PASSWORD, store.port),
    ], env=[{"PEREGRINE_SHARED_STORE_PASSWORD": PASSWORD}, None, None])
    assert shares(replicas, store)
    assert shares(replicas[1:], store)
    assert [store_errors(r) for r in replicas] == [0, 0, 0]
    code, help_text = run_cli("--help", env={"PEREGRINE_SHARED_STORE_PASSWORD": PASSWORD,
                                            "PEREGRINE_SHARED_STORE": "redis://:%s@127.0.0.1:1" % PASSWORD_IN_URL})
    assert code == 0 and "--shared-store" in help_text, help_text
    texts = {"--help": help_text}
    for i, replica in enumerate(replicas):
        texts["the output of replica %d" % i] = replica.output()
        texts["/metrics of replica %d" % i] = scrape(replica)
    assert_no_secret(texts, PASSWORD, PASSWORD_IN_URL, USER_PASSWORD)


def test_a_wrong_password_costs_no_request_and_is_never_shown(start_server, redis_factory):
    """The store refuses the password: the server still serves with its own limit, counts the
    failures, warns, and shows the wrong password nowhere."""
    store = redis_factory(password=PASSWORD)
    (replica,) = start_replicas(start_server, "redis://127.0.0.1:%d" % store.port, count=1,
                                env={"PEREGRINE_SHARED_STORE_PASSWORD": WRONG_PASSWORD})
    client = fresh_client()
    assert alternate([replica], client, BURST + 2) == [200] * BURST + [429] * 2
    assert poll(lambda: store_errors(replica) > 0), scrape(replica)
    assert replica.wait_for_output(lambda out: re.search("shared store", out, re.I)), replica.output()[-3000:]
    assert not store.keys()
    assert_no_secret({"the output": replica.output(), "/metrics": scrape(replica)}, WRONG_PASSWORD, PASSWORD)
    assert replica.stop() == 0, replica.output()[-3000:]


# ---------------------------------------------------------------------------
# TLS


def redis_has_tls():
    probe = subprocess.run([REDIS, "--port", "0", "--tls-port", "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=20)
    out = probe.stdout.decode(errors="replace")
    # Built with TLS, it complains of the missing certificate; without, of an unknown directive (Redis 7.0)
    # or of missing TLS support (Valkey 8).
    return "Bad directive" not in out and "Failed finding TLS support" not in out and "tls" in out.lower()


@pytest.fixture(scope="module")
def tls_store(tmp_path_factory):
    if not redis_has_tls():
        pytest.skip("Debian's redis-server here was built without TLS (--tls-port is not accepted)")
    directory = tmp_path_factory.mktemp("store-tls")
    make_root_ca(directory, "Peregrine Test Store CA")
    _leaf(directory, "store", 0x3401, "localhost", LOCAL_NAMES)
    factory = RedisFactory(directory)
    store = factory(tls=(directory / "store.pem", directory / "store.key", directory / "ca.pem"))
    yield store, directory / "ca.pem"
    factory.stop_all()


def test_rediss_with_a_private_ca_shares_the_budget(start_server, tls_store):
    """rediss:// to a TLS-only store whose certificate a private CA signed, trusted with --shared-store-ca:
    the replicas share one budget, in the database the URL names."""
    store, ca = tls_store
    replicas = start_replicas(start_server, "rediss://localhost:%d/2" % store.port, "--shared-store-ca", ca)
    assert shares(replicas, store, db=2)
    assert not store.keys(db=0)
    assert [store_errors(r) for r in replicas] == [0, 0]


def test_rediss_without_the_ca_does_not_trust_the_store_and_still_serves(start_server, tls_store):
    """Without --shared-store-ca the JDK's roots do not trust the private CA: the store is not used (the
    certificate is checked), and the server still serves with its own limit, counting the failures."""
    store, _ = tls_store
    (replica,) = start_replicas(start_server, "rediss://localhost:%d/2" % store.port, count=1)
    keys = store.keys(db=2)
    assert alternate([replica], fresh_client(), BURST + 1) == [200] * BURST + [429]
    assert poll(lambda: store_errors(replica) > 0), scrape(replica)
    assert store.keys(db=2) == keys


# ---------------------------------------------------------------------------
# Bad values: each case is a JVM start, so they run four at a time


def exits_2_with_one_line(cases, named):
    """Runs every case ((args, env)) of the command and returns the failures: an exit status other than 2,
    more or less than one line, a line that does not name `named` or that repeats the password."""
    def check(case):
        args, env = case
        code, out = run_cli("--rate-limit", RATE, *args, APP, env=env)
        lines = [line for line in out.splitlines() if line.strip()]
        if code != 2 or len(lines) != 1 or not lines[0].startswith("peregrine: ") or "s3cretPw" in out \
                or not any(name in lines[0] for name in named):
            return (args, env, code, out)
        return None

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        return [failure for failure in pool.map(check, cases) if failure]


def test_a_malformed_url_exits_2_with_one_line_naming_the_option_without_the_password():
    cases = [(["--shared-store", url], None) for url in (
        "http://x",
        "ftp://h:1",
        "redis://:s3cretPw@host:notaport",
        "redis://host:6379/abc",
        "redis://u:s3cretPw@host:99999",
        "redis://u:s3cretPw@host:6379/0?db=1",
    )]
    # From the environment: like the other checked values (--cache-size), the line may name the option.
    cases.append(([], {"PEREGRINE_SHARED_STORE": "redis://:s3cretPw@host:notaport"}))
    failures = exits_2_with_one_line(cases, ("--shared-store", "PEREGRINE_SHARED_STORE"))
    assert not failures, failures


def test_a_timeout_that_is_not_a_number_exits_2_naming_it():
    failures = exits_2_with_one_line([(["--shared-store", "redis://127.0.0.1:6379", "--shared-store-timeout", "soon"], None)],
                                     ("--shared-store-timeout",))
    assert not failures, failures


def test_a_ca_with_plain_redis_or_a_missing_ca_file_exits_2_naming_it(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    cases = [(["--shared-store", "redis://:s3cretPw@127.0.0.1:6379", "--shared-store-ca", ca], None),
             (["--shared-store", "rediss://:s3cretPw@127.0.0.1:6379", "--shared-store-ca", tmp_path / "missing.pem"], None)]
    failures = exits_2_with_one_line(cases, ("--shared-store-ca",))
    assert not failures, failures


# ---------------------------------------------------------------------------
# WebSocket handshakes


def websocket_handshake(port, path="/echo"):
    """The status of an HTTP/1.1 WebSocket handshake on a connection of its own."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        head = b""
        while b"\r\n" not in head:
            chunk = s.recv(4096)
            assert chunk, "closed before a status line"
            head += chunk
        return int(head.split(b" ", 2)[1])


def test_websocket_handshakes_over_http11_and_http2_spend_the_shared_budget(start_server, redis_factory):
    """A handshake is charged in the store like a request: the budget a client spent with WebSocket
    handshakes on one replica (over HTTP/2's extended CONNECT, then HTTP/1.1) is spent on the other too."""
    from test_websocket_h2 import H2WebSockets
    store = redis_factory()
    url = "redis://127.0.0.1:%d" % store.port
    first, second = (start_server("raw_ws:app", "--rate-limit", "1/m", "--rate-limit-burst", "2", "--shared-store", url,
                                  "--shared-store-timeout", STORE_TIMEOUT_MS, "--access-log") for _ in range(2))
    with H2WebSockets(first.port) as c:
        c.accepted("/echo")
    assert websocket_handshake(second.port) == 101, second.output()[-3000:]
    # Both handshakes were charged in the store, not in either host's table: the third, on either replica, is refused.
    assert store.command("KEYS", PREFIX + b"*"), "no budget in the store"
    assert websocket_handshake(first.port, "/echo?third") == 429
    with H2WebSockets(second.port) as c:
        refused = c.open("/echo?fourth")
        c.wait_for(lambda: refused.ended, "the 429")
        assert refused.status == 429 and "retry-after" in refused.headers
    assert first.wait_for_output('"GET /echo?third HTTP/1.1" 429', timeout=5), first.output()[-2000:]
    assert second.wait_for_output('"CONNECT /echo?fourth HTTP/2" 429', timeout=5), second.output()[-2000:]
