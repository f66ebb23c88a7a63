"""--cache-size with --shared-store: the response cache across replicas (issue 34, point 3).

Two Peregrine servers on ports of their own stand for two replicas of one deployment, with Debian's
``redis-server`` (started by ``test_shared_store.RedisFactory``: a free port, persistence off) as the
store. Each replica keeps its own shared-memory cache in front; on a local miss it asks the store. The
application (apps/cache_app.py) appends a line per call to one log file both replicas write, so a test
counts the application calls of the whole deployment.

The cache key holds the Host header, so every request carries ``Host: app.example``, as a load
balancer in front of the replicas would pass on the client's. Every test uses paths of its own (a
uuid), so the replicas and the store are shared by the tests of the module; only the test that kills
the store has a store (and replicas) of its own. The store is inspected over raw RESP: entries are
``peregrine:c:<hex>`` hashes, fills and hit-for-miss markers ``peregrine:cl:<hex>``, and invalidations
are published on ``peregrine:ci``.
"""

import threading
import time
import uuid

import httpx
import pytest

from conftest import free_port, poll, run_cli
from test_compress import decode
from test_shared_store import ERRORS, STORE_TESTS, RedisFactory, metric

pytestmark = STORE_TESTS

TARGET = "cache_app:app"
HOST = "app.example"
CHANNEL = b"peregrine:ci"
# The default --shared-store-timeout (50 ms) is ample for a store on loopback, but not on a test machine
# whose two cores run other suites too: a lookup or store that times out is not shared, which is the
# designed fallback, not what these tests are about. A killed store is refused at once whatever it is.
TIMEOUT_MS = 1000


# ---------------------------------------------------------------------------
# The replicas, the store, and what a client sees


class Pair:
    """Two replicas (a, b) of cache_app sharing one store, and the call log both write."""

    def __init__(self, a, b, store, log):
        self.a, self.b, self.store, self.log = a, b, store, log

    def calls(self, target, method="GET"):
        """Application calls for `target` (path and query), in both replicas."""
        if not self.log.exists():
            return 0
        wanted = "%s %s" % (method, target)
        return sum(1 for line in self.log.read_text().splitlines() if line.rsplit(" ", 1)[0] == wanted)


def start_pair(start, store, log, *extra):
    """Two replicas with an 8 MiB local cache each, on `store`, started together."""
    listening = subscribers(store)
    replicas = []
    for _ in range(2):
        metrics = free_port()
        replica = start(TARGET, "--cache-size", "8", "--metrics-port", metrics,
                        "--shared-store", "redis://127.0.0.1:%d" % store.port, "--shared-store-timeout", TIMEOUT_MS, *extra,
                        env={"CACHE_APP_LOG": str(log)}, wait=False)
        replica.metrics = metrics
        replicas.append(replica)
    for replica in replicas:
        replica.wait_ready()
    pair = Pair(replicas[0], replicas[1], store, log)
    # Each replica listens for invalidations on a connection of its own, subscribed after the start.
    assert poll(lambda: subscribers(store) == listening + 2, timeout=20), \
        "subscribers of %r: %r, %d before the replicas" % (CHANNEL, subscribers(store), listening)
    return pair


def subscribers(store):
    return store.command("PUBSUB", "NUMSUB", CHANNEL)[1]


def store_keys(store, kind):
    """The store's cache keys of one kind: "c" (entries) or "cl" (fills and hit-for-miss markers)."""
    return set(store.command("KEYS", b"peregrine:%s:*" % kind.encode()))


def entry_keys(store, target):
    """The store's entry hashes whose records are for `target` (a record holds its key: host, path, query)."""
    found = []
    for key in store_keys(store, "c"):
        values = store.command("HVALS", key) or []
        if any(target.encode() in value and HOST.encode() in value for value in values):
            found.append(key)
    return found


def entry_key(store, target):
    """The one entry hash of `target` in the store, once it is there (stores are not waited for)."""
    keys = poll(lambda: entry_keys(store, target))
    assert len(keys) == 1, "entries for %s in the store: %r" % (target, keys)
    return keys[0]


def unique(query):
    return "/r/%s?%s" % (uuid.uuid4().hex, query)


def get(replica, target, method="GET", headers=None):
    return httpx.request(method, replica.url + target, headers={"host": HOST, **(headers or {})}, timeout=15)


def raw_get(replica, target, coding):
    """(response, body bytes as sent) for a client that accepts `coding` ("identity": none)."""
    with httpx.Client(timeout=15) as c:
        with c.stream("GET", replica.url + target, headers={"host": HOST, "accept-encoding": coding}) as r:
            return r, b"".join(r.iter_raw())


def status(response):
    return response.headers.get("cache-status", "")


def is_hit(response):
    return status(response).startswith("Peregrine; hit; ttl=")


def lookup_errors(replica):
    return metric(replica, ERRORS, operation="cache_lookup")


def concurrently(requests):
    """Sends (replica, target) requests at once, one thread and connection each. Returns the responses
    (in order) and, per request, the monotonic time it completed; a request that failed re-raises."""
    results = [None] * len(requests)
    done = [None] * len(requests)

    def run(i, replica, target):
        try:
            results[i] = get(replica, target)
        except Exception as e:  # noqa: BLE001 (re-raised below, in the test's thread)
            results[i] = e
        done[i] = time.monotonic()

    threads = [threading.Thread(target=run, args=(i, r, t)) for i, (r, t) in enumerate(requests)]
    for thread in threads:
        thread.start()
    return threads, results, done


def joined(threads, results):
    for thread in threads:
        thread.join(30)
    for result in results:
        if isinstance(result, Exception):
            raise result
        assert result is not None, "a request did not complete within 30 s"
    return results


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    factory = RedisFactory(tmp_path_factory.mktemp("redis"))
    yield factory()
    factory.stop_all()


@pytest.fixture(scope="module")
def pair(start_module_server, store, tmp_path_factory):
    return start_pair(start_module_server, store, tmp_path_factory.mktemp("calls") / "calls.log")


# ---------------------------------------------------------------------------
# Sharing


def test_a_response_stored_through_one_replica_is_a_hit_on_the_other(pair):
    """A's miss is stored in the store as one hash; B, which never saw the URL, answers from it (a hit,
    A's very body, the freshness A gave it) and then from its own memory; the application ran once."""
    target = unique("cc=max-age%3D60")
    first = get(pair.a, target)
    assert status(first) == "Peregrine; fwd=miss; stored"
    key = entry_key(pair.store, target)
    assert pair.store.command("TYPE", key) == "hash" and pair.store.command("HLEN", key) == 1
    assert 0 < pair.store.command("PTTL", key) <= 60_000
    hit = get(pair.b, target)
    assert is_hit(hit), hit.headers
    assert hit.status_code == 200 and hit.content == first.content
    assert int(status(hit).split("ttl=")[1]) <= 60 and int(hit.headers["age"]) >= 0
    assert hit.headers["x-pid"] == first.headers["x-pid"], "B sends A's stored response, headers and all"
    again = get(pair.b, target)
    assert is_hit(again) and again.content == first.content
    head = get(pair.b, target, method="HEAD")
    assert head.status_code == 200 and head.content == b"" and is_hit(head)
    assert head.headers["content-length"] == str(len(first.content))
    assert pair.calls(target) == 1 and pair.calls(target, "HEAD") == 0


def test_a_head_on_a_replica_that_never_saw_the_url_is_answered_from_the_store(pair):
    """A HEAD is answered from a stored GET: also when the GET was stored by another replica."""
    target = unique("cc=max-age%3D60")
    first = get(pair.a, target)
    head = get(pair.b, target, method="HEAD")
    assert head.status_code == 200 and head.content == b"" and is_hit(head), head.headers
    assert head.headers["content-length"] == str(len(first.content))
    assert pair.calls(target) == 1 and pair.calls(target, "HEAD") == 0


def test_the_key_holds_the_host(pair):
    """The control for the tests above: the same path and query under another Host is another entry,
    on the other replica too."""
    target = unique("cc=max-age%3D60")
    get(pair.a, target)
    other = get(pair.b, target, headers={"host": "other.example"})
    assert status(other) == "Peregrine; fwd=miss; stored"
    assert pair.calls(target) == 2


def test_a_post_through_one_replica_invalidates_the_url_on_both(pair):
    """A successful POST through A deletes the store's entry and, through pub/sub, B's own copy: B
    misses (once the message arrived) and calls the application again, exactly once; A then gets B's new
    entry from the store."""
    target = unique("cc=max-age%3D60")
    get(pair.a, target)
    key = entry_key(pair.store, target)
    assert is_hit(get(pair.b, target)), "B holds a copy of its own now"
    assert is_hit(get(pair.a, target))
    assert get(pair.a, target).content == get(pair.b, target).content
    assert pair.calls(target) == 1

    assert pair.a.post(target, content=b"change", headers={"host": HOST}).status_code == 200
    assert poll(lambda: not pair.store.command("EXISTS", key)), "the store's entry outlived the POST"
    answers = []

    def b_misses():
        answers.append(get(pair.b, target))
        return not is_hit(answers[-1])

    assert poll(b_misses), "B still answers from its copy: %r" % [status(r) for r in answers[-3:]]
    misses = [status(r) for r in answers if not is_hit(r)]
    assert misses == ["Peregrine; fwd=miss; stored"], misses
    assert pair.calls(target) == 1 + len(misses)
    after = get(pair.a, target)
    assert is_hit(after) and after.content == answers[-1].content, "A answers from the entry B stored"
    assert is_hit(get(pair.b, target))
    assert pair.calls(target) == 2 and pair.calls(target, "POST") == 1


def test_concurrent_misses_on_two_replicas_make_one_application_call(pair):
    """Six concurrent misses for one URL, alternating between the replicas, while the application takes
    a second: the first claims the fill in the store, the others (local or on the other replica) wait
    for it and are hits."""
    target = unique("cc=max-age%3D60&sleep=1")
    threads, results, _ = concurrently([(pair.a if i % 2 == 0 else pair.b, target) for i in range(6)])
    responses = joined(threads, results)
    assert [r.status_code for r in responses] == [200] * 6
    assert len({r.content for r in responses}) == 1
    statuses = [status(r) for r in responses]
    assert statuses.count("Peregrine; fwd=miss; stored") == 1 and sum(is_hit(r) for r in responses) == 5, statuses
    assert pair.calls(target) == 1


def test_a_response_that_may_not_be_stored_leaves_a_hit_for_miss_marker_in_the_store(pair):
    """After A got a no-store answer, the store holds 'pass' for the URL; six concurrent requests on both
    replicas (B never saw the URL) then all go to the application at once: all six calls are under way
    before any answer is complete (each takes 2 s), nobody waits for anybody's fill."""
    target = unique("cc=no-store&sleep=2")
    claims = {key: pair.store.command("GET", key) for key in store_keys(pair.store, "cl")}
    first = get(pair.a, target)
    assert first.status_code == 200 and status(first) == "Peregrine; fwd=miss"
    passes = poll(lambda: [key for key in store_keys(pair.store, "cl")
                           if key not in claims and pair.store.command("GET", key) == b"pass"])
    assert len(passes) == 1, passes
    assert 0 < pair.store.command("PTTL", passes[0]) <= 10_000

    started = time.monotonic()
    threads, results, done = concurrently([(pair.a if i % 2 == 0 else pair.b, target) for i in range(6)])
    all_called = poll(lambda: pair.calls(target) == 7 and time.monotonic(), timeout=10, interval=0.01)
    responses = joined(threads, results)
    assert all_called, "only %d of the 6 calls reached the application" % (pair.calls(target) - 1)
    assert all_called < min(done), "the last call began %.2f s after the first answer was complete" % (all_called - min(done))
    assert [r.status_code for r in responses] == [200] * 6
    assert [status(r) for r in responses] == ["Peregrine; fwd=miss"] * 6
    assert max(done) - started < 5, "the round took %.1f s: somebody waited for a 5 s fill" % (max(done) - started)
    assert pair.calls(target) == 7


# ---------------------------------------------------------------------------
# The store failing


def test_the_store_killed_costs_no_request_and_sharing_and_invalidation_resume_when_it_is_back(start_server, tmp_path):
    """With the store SIGKILLed, both replicas answer every request (never a 5xx) from their own cache
    (a second GET on one replica is a hit; the other replica misses, as without the store) and count
    the failed lookups; started again on the same port, the store is used again without a restart:
    the replicas say so, subscribe again, share new entries, and a POST invalidates on both again."""
    factory = RedisFactory(tmp_path)
    try:
        store = factory()
        pair = start_pair(start_server, store, tmp_path / "calls.log")
        shared = unique("cc=max-age%3D60")
        get(pair.a, shared)
        assert is_hit(get(pair.b, shared)), "the replicas do not share to begin with"
        errors = [lookup_errors(r) for r in (pair.a, pair.b)]

        store.kill()
        target = unique("cc=max-age%3D60")
        took = []
        answers = {}
        for name, replica in (("a-first", pair.a), ("a-second", pair.a), ("b-first", pair.b), ("b-second", pair.b)):
            started = time.monotonic()
            answers[name] = get(replica, target)
            took.append(time.monotonic() - started)
        assert [r.status_code for r in answers.values()] == [200] * 4, {k: r.status_code for k, r in answers.items()}
        assert status(answers["a-first"]) == "Peregrine; fwd=miss; stored"
        assert is_hit(answers["a-second"]), "the local cache still works"
        assert status(answers["b-first"]) == "Peregrine; fwd=miss; stored", "B cannot know what A stored"
        assert is_hit(answers["b-second"])
        assert is_hit(get(pair.a, shared)) and is_hit(get(pair.b, shared)), "what each held is still served"
        assert pair.calls(target) == 2 and pair.calls(shared) == 1
        assert max(took) < 5, "requests took up to %.1f s with the store down" % max(took)
        for replica, before in zip((pair.a, pair.b), errors):
            assert poll(lambda: lookup_errors(replica) > before), "no failed cache_lookup counted"

        store.start()
        marks = [len(r.complete_output()) for r in (pair.a, pair.b)]

        def shares():
            url = unique("cc=max-age%3D60")
            get(pair.a, url)
            return is_hit(get(pair.b, url)) and pair.calls(url) == 1

        assert poll(shares, timeout=30, interval=0.2), "sharing did not resume"
        for replica, mark in zip((pair.a, pair.b), marks):
            assert replica.wait_for_output(lambda out: "answers again" in out[mark:]), replica.output()[-3000:]
        assert poll(lambda: subscribers(store) == 2, timeout=20), "the replicas did not subscribe again: %r" % subscribers(store)

        # Invalidation works again: a POST through A reaches B's copy.
        again = unique("cc=max-age%3D60")
        get(pair.a, again)
        assert is_hit(get(pair.b, again))
        assert pair.a.post(again, content=b"change", headers={"host": HOST}).status_code == 200
        assert poll(lambda: not is_hit(get(pair.b, again))), "B still answers from its copy after the POST"
        assert pair.calls(again) == 2
    finally:
        factory.stop_all()


# ---------------------------------------------------------------------------
# With --compress


@pytest.fixture(scope="module")
def coded(start_module_server, store, tmp_path_factory):
    """--compress-min-size 0, so that the short bodies which say their call number are compressed too."""
    return start_pair(start_module_server, store, tmp_path_factory.mktemp("coded") / "calls.log",
                      "--compress", "--compress-min-size", "0")


def test_with_compress_a_gzip_client_on_one_replica_gets_the_entry_another_stored(coded):
    """A stores the identity response of an identity client; B's first gzip client is a hit: B
    compresses the copied entry once (gzip, decoding to A's body) and stores the coded variant, in the
    store too; a second gzip hit on B compresses nothing. The application ran once."""
    target = unique("cc=max-age%3D60")
    plain, plain_raw = raw_get(coded.a, target, "identity")
    assert status(plain) == "Peregrine; fwd=miss; stored" and "content-encoding" not in plain.headers
    key = entry_key(coded.store, target)
    assert coded.store.command("HLEN", key) == 1
    compressed = metric(coded.b, "peregrine_compressed_responses_total")
    hit, hit_raw = raw_get(coded.b, target, "gzip")
    assert is_hit(hit), hit.headers
    assert hit.headers["content-encoding"] == "gzip" and "accept-encoding" in hit.headers["vary"].lower()
    assert decode("gzip", hit_raw) == plain_raw
    assert poll(lambda: coded.store.command("HLEN", key) == 2), "the gzip variant is not in the store"
    assert metric(coded.b, "peregrine_compressed_responses_total") == compressed + 1
    second, second_raw = raw_get(coded.b, target, "gzip")
    assert is_hit(second) and second_raw == hit_raw
    assert metric(coded.b, "peregrine_compressed_responses_total") == compressed + 1
    assert coded.calls(target) == 1


def test_with_compress_an_identity_client_on_one_replica_gets_the_application_bytes_another_stored(coded):
    """The other way round: A's miss for a gzip client is sent compressed but stored as the
    application's own response; B's identity client gets those bytes, uncompressed, as a hit."""
    target = unique("cc=max-age%3D60")
    miss, miss_raw = raw_get(coded.a, target, "gzip")
    assert status(miss) == "Peregrine; fwd=miss; stored" and miss.headers["content-encoding"] == "gzip"
    hit, hit_raw = raw_get(coded.b, target, "identity")
    assert is_hit(hit) and "content-encoding" not in hit.headers
    assert hit_raw == decode("gzip", miss_raw) and hit.headers["content-length"] == str(len(hit_raw))
    assert coded.calls(target) == 1


# ---------------------------------------------------------------------------
# Options


def test_shared_store_without_a_stage_that_uses_it_is_one_line_and_exit_2():
    code, out = run_cli("--shared-store", "redis://127.0.0.1:1", TARGET)
    lines = [line for line in out.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "--shared-store" in lines[0], out


def test_a_bad_shared_store_timeout_is_one_line_and_exit_2():
    code, out = run_cli("--cache-size", "8", "--shared-store", "redis://127.0.0.1:1", "--shared-store-timeout", "0", TARGET)
    lines = [line for line in out.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "--shared-store-timeout" in lines[0], out
