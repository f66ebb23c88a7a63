"""--cache-size: the response cache shared by every worker (issue 17, items 8-14).

The application (apps/cache_app.py) sets the response headers the query asks for and appends a line
per call to a log file that every worker writes, so the tests count application calls across workers.
Each test uses paths of its own (a uuid), so the servers are shared by the tests of the module. The
rules run over HTTP/1.1 and HTTP/2 (h2c with prior knowledge), against one worker and two.
"""

import asyncio
import os
import signal
import uuid

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import free_port, poll, run_cli
from test_compress import brotli_module, decode, get_raw
from test_http3 import browser, fetch_h3, open_h3, start_h3  # noqa: F401 (browser: the module-scoped Chromium fixture)
from test_tls import certs, https_client  # noqa: F401 (certs: the module-scoped fixture of test certificates)

pytestmark = pytest.mark.peregrine_only

TARGET = "cache_app:app"


class CacheServer:
    def __init__(self, server, log, metrics_port, workers):
        self.server = server
        self.log = log
        self.metrics_port = metrics_port
        self.workers = workers

    def calls(self, target, method="GET"):
        """Application calls for `target` (path and query), in every worker."""
        if not self.log.exists():
            return 0
        return sum(1 for line in self.log.read_text().splitlines() if line.rsplit(" ", 1)[0] == "%s %s" % (method, target))

    def pids(self, target):
        return {int(line.rsplit(" ", 1)[1]) for line in self.log.read_text().splitlines() if line.split(" ")[1] == target}

    def client(self, protocol):
        if protocol == "h2":
            return httpx.Client(base_url=self.server.url, http1=False, http2=True, timeout=15)
        return httpx.Client(base_url=self.server.url, timeout=15)

    def metric(self, name):
        text = httpx.get("http://127.0.0.1:%d/metrics" % self.metrics_port, timeout=10).text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name:
                    return sample.value
        return 0.0


def launch(start, tmp_path, *options, workers=1):
    log = tmp_path / ("calls-%s.log" % uuid.uuid4().hex)
    metrics_port = free_port()
    server = start(TARGET, "--workers", str(workers), "--metrics-port", metrics_port, *options,
                   env={"CACHE_APP_LOG": str(log)})
    if workers > 1:
        assert poll(lambda: "with %d workers" % workers in server.output(), timeout=90), server.output()[-3000:]
    return CacheServer(server, log, metrics_port, workers)


@pytest.fixture(scope="module", params=[1, 2], ids=["1-worker", "2-workers"])
def cache(request, start_module_server, tmp_path_factory):
    return launch(start_module_server, tmp_path_factory.mktemp("cache"), "--cache-size", "8", "--cache-max-object", "64",
                  workers=request.param)


@pytest.fixture(params=["h1", "h2"])
def protocol(request):
    return request.param


def unique(query=""):
    path = "/r/%s" % uuid.uuid4().hex
    return path + ("?" + query if query else "")


def twice(cache, protocol, target, headers=None):
    with cache.client(protocol) as c:
        first = c.get(target, headers=headers)
        second = c.get(target, headers=headers)
    return first, second


STORABLE = [
    ("max-age", "cc=max-age%3D60", None),
    ("s-maxage", "cc=s-maxage%3D60", None),
    ("expires", "expires=60", None),
    ("status-404", "cc=max-age%3D60&status=404", None),
    ("status-301", "cc=max-age%3D60&status=301", None),
    ("status-204", "cc=max-age%3D60&status=204", None),
    ("status-410", "cc=max-age%3D60&status=410", None),
    ("authorization-public", "cc=public,max-age%3D60", {"authorization": "Bearer x"}),
    ("authorization-s-maxage", "cc=s-maxage%3D60", {"authorization": "Bearer x"}),
    ("authorization-must-revalidate", "cc=must-revalidate,max-age%3D60", {"authorization": "Bearer x"}),
]

NOT_STORABLE = [
    ("no-freshness", "", None),
    ("max-age-0", "cc=max-age%3D0", None),
    ("expires-invalid", "expires=bad", None),
    ("no-store", "cc=no-store,max-age%3D60", None),
    ("private", "cc=private,max-age%3D60", None),
    ("no-cache", "cc=no-cache,max-age%3D60", None),
    ("set-cookie", "cc=max-age%3D60&cookie=1", None),
    ("vary-star", "cc=max-age%3D60&vary=*", None),
    ("authorization", "cc=max-age%3D60", {"authorization": "Bearer x"}),
    ("status-206", "cc=max-age%3D60&status=206", None),
    ("status-302", "cc=max-age%3D60&status=302", None),
    ("status-500", "cc=max-age%3D60&status=500", None),
    ("request-no-store", "cc=max-age%3D60", {"cache-control": "no-store"}),
    ("larger-than-max-object", "cc=max-age%3D60&size=70000", None),
    ("streamed-past-max-object", "cc=max-age%3D60&size=200000&stream=20", None),
]


@pytest.mark.parametrize("name,query,headers", STORABLE, ids=[c[0] for c in STORABLE])
def test_a_storable_response_is_a_hit_the_second_time(cache, protocol, name, query, headers):
    target = unique(query)
    first, second = twice(cache, protocol, target, headers)
    assert first.headers["cache-status"] == "Peregrine; fwd=miss; stored"
    assert second.headers["cache-status"].startswith("Peregrine; hit; ttl=")
    assert second.status_code == first.status_code and second.content == first.content
    assert int(second.headers["age"]) >= 0
    assert cache.calls(target) == 1


@pytest.mark.parametrize("name,query,headers", NOT_STORABLE, ids=[c[0] for c in NOT_STORABLE])
def test_a_response_that_may_not_be_stored_goes_to_the_application_each_time(cache, protocol, name, query, headers):
    target = unique(query)
    first, second = twice(cache, protocol, target, headers)
    assert "stored" not in first.headers["cache-status"]
    assert "hit" not in second.headers["cache-status"]
    if "size" in query:  # the client gets all of it, stored or not
        assert len(second.content) == int(query.split("size=")[1].split("&")[0])
    assert cache.calls(target) == 2


def test_vary_selects_a_variant_by_the_normalised_request_value(cache, protocol):
    target = unique("cc=max-age%3D60&vary=Accept-Language")
    with cache.client(protocol) as c:
        en = c.get(target, headers={"accept-language": "en, de"})
        fr = c.get(target, headers={"accept-language": "fr"})
        en_again = c.get(target, headers={"accept-language": "en,de"})
        fr_again = c.get(target, headers={"accept-language": "fr"})
    assert b"lang=en, de" in en.content and b"lang=fr" in fr.content
    assert en_again.content == en.content and en_again.headers["cache-status"].startswith("Peregrine; hit")
    assert fr_again.content == fr.content and fr_again.headers["cache-status"].startswith("Peregrine; hit")
    assert cache.calls(target) == 2


def test_age_counts_the_age_the_response_came_with(cache, protocol):
    target = unique("cc=max-age%3D60&age=7")
    _, second = twice(cache, protocol, target)
    assert int(second.headers["age"]) >= 7
    assert int(second.headers["cache-status"].split("ttl=")[1]) <= 53


def test_a_head_is_answered_from_a_stored_get(cache, protocol):
    target = unique("cc=max-age%3D60")
    with cache.client(protocol) as c:
        get = c.get(target)
        head = c.head(target)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len(get.content))
    assert head.headers["cache-status"].startswith("Peregrine; hit")
    assert cache.calls(target) == 1 and cache.calls(target, "HEAD") == 0


def test_a_head_alone_stores_nothing(cache, protocol):
    target = unique("cc=max-age%3D60")
    with cache.client(protocol) as c:
        c.head(target)
        get = c.get(target)
    assert get.headers["cache-status"] == "Peregrine; fwd=miss; stored"


def test_conditionals_against_a_stored_entry(cache, protocol):
    target = unique("cc=max-age%3D60&etag=v1&lastmod=1")
    with cache.client(protocol) as c:
        full = c.get(target)
        matching = c.get(target, headers={"if-none-match": 'W/"v1"'})
        other = c.get(target, headers={"if-none-match": '"v2"'})
        later = c.get(target, headers={"if-modified-since": "Thu, 22 Oct 2015 07:28:00 GMT"})
        earlier = c.get(target, headers={"if-modified-since": "Tue, 20 Oct 2015 07:28:00 GMT"})
        plain = c.get(target)
    assert full.status_code == 200
    assert matching.status_code == 304 and matching.headers["etag"] == '"v1"' and matching.content == b""
    assert matching.headers["cache-status"].startswith("Peregrine; hit")
    assert other.status_code == 200 and other.content == full.content
    assert later.status_code == 304
    assert earlier.status_code == 200
    assert plain.status_code == 200  # no conditional, never a 304
    assert cache.calls(target) == 1


def test_a_request_with_no_cache_goes_to_the_application(cache, protocol):
    target = unique("cc=max-age%3D60")
    with cache.client(protocol) as c:
        c.get(target)
        forced = c.get(target, headers={"cache-control": "no-cache"})
        after = c.get(target)
    assert forced.headers["cache-status"].startswith("Peregrine; fwd=request")
    assert after.headers["cache-status"].startswith("Peregrine; hit")
    assert cache.calls(target) == 2


def test_a_successful_post_invalidates_the_url_and_a_failed_one_does_not(cache, protocol):
    target = unique("cc=max-age%3D60")
    with cache.client(protocol) as c:
        c.get(target)
        assert c.get(target).headers["cache-status"].startswith("Peregrine; hit")
        c.post(target + "&status=500")  # another URL: its query differs
        assert c.get(target).headers["cache-status"].startswith("Peregrine; hit")
        assert c.post(target, content=b"x").status_code == 200
        after = c.get(target)
    assert after.headers["cache-status"] == "Peregrine; fwd=miss; stored"
    assert cache.calls(target) == 2


def test_a_failed_delete_keeps_the_entry(cache, protocol):
    target = unique("cc=max-age%3D60&status=200")
    with cache.client(protocol) as c:
        c.get(target)
        c.request("DELETE", target.replace("status=200", "status=200"), headers={"x": "1"})
        after = c.get(target)
    # the DELETE succeeded (200): the entry is gone
    assert after.headers["cache-status"] == "Peregrine; fwd=miss; stored"


async def _concurrent(cache, protocol, target, n):
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=cache.server.url, http1=protocol == "h1", http2=protocol == "h2",
                                 limits=limits, timeout=30) as c:
        return await asyncio.gather(*(c.get(target) for _ in range(n)))


def test_fifty_concurrent_misses_make_one_application_call(cache, protocol):
    target = unique("cc=max-age%3D60&sleep=0.5")
    responses = asyncio.run(_concurrent(cache, protocol, target, 50))
    assert all(r.status_code == 200 for r in responses)
    assert len({r.content for r in responses}) == 1
    assert cache.calls(target) == 1
    assert sum(r.headers["cache-status"].startswith("Peregrine; hit") for r in responses) == 49


def test_waiters_for_a_response_that_may_not_be_stored_go_to_the_application(cache, protocol):
    target = unique("cc=no-store&sleep=0.3")
    responses = asyncio.run(_concurrent(cache, protocol, target, 10))
    assert all(r.status_code == 200 for r in responses)
    assert cache.calls(target) == 10
    # hit-for-miss: the next misses neither wait nor collapse, and a later storable answer is stored
    assert twice(cache, protocol, target)[1].headers["cache-status"] == "Peregrine; fwd=miss"


@pytest.mark.parametrize("cache", [2], indirect=True, ids=["2-workers"])
def test_a_response_stored_by_one_worker_is_a_hit_in_the_other(cache):
    target = unique("cc=max-age%3D60")
    with cache.client("h1") as c:
        c.get(target)
    storer = cache.pids(target)
    assert len(storer) == 1
    served_elsewhere = 0
    for _ in range(60):
        with cache.client("h1") as c:  # a new connection each time: the kernel spreads them over the workers
            worker = int(c.get(unique("cc=no-store")).headers["x-pid"])
            hit = c.get(target)
        assert hit.headers["cache-status"].startswith("Peregrine; hit")
        if worker not in storer:
            served_elsewhere += 1
    assert served_elsewhere > 0
    assert cache.calls(target) == 1


def test_metrics_count_hits_misses_stores_and_bytes(cache):
    before = {name: cache.metric(name) for name in ("peregrine_cache_hits_total", "peregrine_cache_misses_total",
                                                     "peregrine_cache_stores_total")}
    target = unique("cc=max-age%3D60")
    twice(cache, "h1", target)
    assert poll(lambda: cache.metric("peregrine_cache_hits_total") >= before["peregrine_cache_hits_total"] + 1)
    assert cache.metric("peregrine_cache_misses_total") >= before["peregrine_cache_misses_total"] + 1
    assert cache.metric("peregrine_cache_stores_total") >= before["peregrine_cache_stores_total"] + 1
    assert 0 < cache.metric("peregrine_cache_held_bytes") <= 8 * 1024 * 1024


def test_with_compress_br_gzip_and_identity_hits_come_from_one_application_call(start_server, tmp_path):
    both = launch(start_server, tmp_path, "--cache-size", "4", "--compress")
    size = 4000
    target = unique("cc=max-age%%3D60&size=%d" % size)
    first, first_raw = get_raw(both.server, target, "br")
    gzip_hit, gzip_raw = get_raw(both.server, target, "gzip")
    plain_hit, plain_raw = get_raw(both.server, target, "identity")
    assert first.headers["cache-status"] == "Peregrine; fwd=miss; stored"
    assert first.headers["content-encoding"] == "br" and decode("br", first_raw) == b"x" * size
    assert gzip_hit.headers["cache-status"].startswith("Peregrine; hit")
    assert gzip_hit.headers["content-encoding"] == "gzip" and decode("gzip", gzip_raw) == b"x" * size
    # The entry is the application's own response: served as it is, it is the uncompressed body.
    assert plain_hit.headers["cache-status"].startswith("Peregrine; hit")
    assert "content-encoding" not in plain_hit.headers
    assert plain_hit.headers["content-length"] == str(size) and plain_raw == b"x" * size
    assert "accept-encoding" in plain_hit.headers.get("vary", "").lower()
    assert both.calls(target) == 1


# ---- --compress: coded variants stored beside the identity entry (issue 17, item 11)


@pytest.fixture(scope="module", params=[1, 2], ids=["1-worker", "2-workers"])
def coded(request, start_module_server, tmp_path_factory):
    """--compress-min-size 0, so that the short bodies which say their call number are compressed too."""
    return launch(start_module_server, tmp_path_factory.mktemp("coded"), "--cache-size", "4", "--compress",
                  "--compress-min-size", "0", workers=request.param)


def raw_get(client, target, coding, method="GET", headers=None):
    """(response, body bytes as sent) for a client that accepts `coding` ("identity": none)."""
    with client.stream(method, target, headers={"accept-encoding": coding, **(headers or {})}) as r:
        return r, b"".join(r.iter_raw())


def counts(server):
    """What shows that something was compressed or stored: bodies compressed, entries stored, bytes held."""
    return tuple(server.metric(name) for name in ("peregrine_compressed_responses_total", "peregrine_cache_stores_total",
                                                   "peregrine_cache_held_bytes"))


def is_hit(response):
    return response.headers["cache-status"].startswith("Peregrine; hit")


@pytest.mark.parametrize("coding", ["gzip", "br"])
def test_with_compress_a_coded_variant_is_made_once_and_later_hits_are_not_compressed(coded, protocol, coding):
    if coding == "br":
        brotli_module()
    size = 20_000
    target = unique("cc=max-age%%3D60&size=%d" % size)
    with coded.client(protocol) as c:
        miss, _ = raw_get(c, target, coding)
        assert miss.headers["cache-status"] == "Peregrine; fwd=miss; stored" and miss.headers["content-encoding"] == coding
        compressed, stores, held = counts(coded)
        first, first_raw = raw_get(c, target, coding)
        assert is_hit(first) and first.headers["content-encoding"] == coding
        assert decode(coding, first_raw) == b"x" * size and first.headers["content-length"] == str(len(first_raw))
        assert "accept-encoding" in first.headers["vary"].lower()
        made = counts(coded)
        assert made[:2] == (compressed + 1, stores + 1), "the first hit in a coding compresses the entry once and stores it"
        assert made[2] >= held + len(first_raw), "the coded variant's bytes count in what the cache holds"
        for _ in range(3):
            hit, raw = raw_get(c, target, coding)
            assert is_hit(hit) and hit.headers["content-encoding"] == coding and raw == first_raw
    assert counts(coded) == made, "later hits in that coding are sent from the stored variant, not compressed"
    assert coded.calls(target) == 1


def test_with_compress_an_identity_client_still_gets_the_application_bytes(coded, protocol):
    size = 20_000
    target = unique("cc=max-age%%3D60&size=%d" % size)
    with coded.client(protocol) as c:
        raw_get(c, target, "gzip")
        gzip_hit, gzip_raw = raw_get(c, target, "gzip")
        plain, plain_raw = raw_get(c, target, "identity")
        none, none_raw = raw_get(c, target, "gzip;q=0")
    assert is_hit(gzip_hit) and decode("gzip", gzip_raw) == b"x" * size
    for response, raw in ((plain, plain_raw), (none, none_raw)):
        assert is_hit(response) and "content-encoding" not in response.headers
        assert raw == b"x" * size and response.headers["content-length"] == str(size)
    assert coded.calls(target) == 1


def test_with_compress_conditionals_and_head_are_answered_from_the_coded_variant(coded, protocol):
    target = unique("cc=max-age%3D60&size=5000&etag=v1")
    with coded.client(protocol) as c:
        miss, _ = raw_get(c, target, "gzip")
        assert miss.headers["etag"] == 'W/"v1"'
        hit, hit_raw = raw_get(c, target, "gzip")
        assert is_hit(hit) and hit.headers["etag"] == 'W/"v1"'
        before = counts(coded)
        same, same_raw = raw_get(c, target, "gzip", headers={"if-none-match": 'W/"v1"'})
        other, other_raw = raw_get(c, target, "gzip", headers={"if-none-match": 'W/"v2"'})
        head, head_raw = raw_get(c, target, "gzip", method="HEAD")
        plain, _ = raw_get(c, target, "identity")
    assert same.status_code == 304 and is_hit(same) and same_raw == b""
    assert same.headers["etag"] == 'W/"v1"' and "accept-encoding" in same.headers["vary"].lower()
    assert other.status_code == 200 and other_raw == hit_raw
    assert head.status_code == 200 and is_hit(head) and head_raw == b""
    assert head.headers["content-encoding"] == "gzip" and head.headers["content-length"] == str(len(hit_raw))
    assert plain.headers["etag"] == '"v1"', "the identity entry keeps the application's strong tag"
    assert counts(coded)[:2] == before[:2], "none of them compressed or stored anything"
    assert coded.calls(target) == 1


def test_with_compress_a_new_response_replaces_the_coded_variants_of_the_old(coded, protocol):
    target = unique("cc=max-age%3D60")  # the body says the worker's call number: each call's differs
    with coded.client(protocol) as c:
        raw_get(c, target, "gzip")
        old, old_raw = raw_get(c, target, "gzip")
        assert is_hit(old)
        fresh, fresh_raw = raw_get(c, target, "identity", headers={"cache-control": "no-cache"})
        assert fresh.headers["cache-status"] == "Peregrine; fwd=request; stored" and fresh_raw != decode("gzip", old_raw)
        hit, hit_raw = raw_get(c, target, "gzip")
    assert is_hit(hit) and decode("gzip", hit_raw) == fresh_raw
    assert coded.calls(target) == 2


def test_with_compress_a_post_drops_every_variant(coded, protocol):
    size = 20_000
    target = unique("cc=max-age%%3D60&size=%d" % size)
    with coded.client(protocol) as c:
        raw_get(c, target, "gzip")
        raw_get(c, target, "gzip")
        raw_get(c, target, "identity")
        held = coded.metric("peregrine_cache_held_bytes")
        assert c.post(target, content=b"change").status_code == 200
        assert coded.metric("peregrine_cache_held_bytes") <= held - size, "the entry and its variant are dropped"
        gzip_after, _ = raw_get(c, target, "gzip")
        plain_after, _ = raw_get(c, target, "identity")
    assert gzip_after.headers["cache-status"] == "Peregrine; fwd=miss; stored"
    assert is_hit(plain_after)
    assert coded.calls(target) == 2


@pytest.mark.parametrize("coded", [2], indirect=True, ids=["2-workers"])
def test_with_compress_a_variant_made_by_one_worker_is_sent_by_the_other(coded):
    target = unique("cc=max-age%3D60&size=20000")
    with coded.client("h1") as c:
        raw_get(c, target, "gzip")
        raw_get(c, target, "gzip")
    made = counts(coded)
    workers = set()
    for _ in range(60):
        with coded.client("h1") as c:  # a new connection each time: the kernel spreads them over the workers
            workers.add(int(c.get(unique("cc=no-store"), headers={"accept-encoding": "identity"}).headers["x-pid"]))
            hit, _ = raw_get(c, target, "gzip")
        assert is_hit(hit) and hit.headers["content-encoding"] == "gzip"
        if len(workers) == 2:
            break
    assert len(workers) == 2
    assert counts(coded)[:2] == made[:2], "no worker compressed it again"
    assert coded.calls(target) == 1


def test_eviction_under_a_size_bound_keeps_what_is_used(start_server, tmp_path):
    small = launch(start_server, tmp_path, "--cache-size", "1", "--cache-max-object", "64")
    size = 40_000
    kept = unique("cc=max-age%%3D60&size=%d" % size)
    targets = [unique("cc=max-age%%3D60&size=%d" % size) for _ in range(60)]  # 2.4 MB through a 1 MiB cache
    with small.client("h1") as c:
        c.get(kept)
        for target in targets:
            c.get(target)
            assert c.get(kept).headers["cache-status"].startswith("Peregrine; hit")
        first_again = c.get(targets[0])
    assert first_again.headers["cache-status"] == "Peregrine; fwd=miss; stored"
    assert small.calls(kept) == 1
    assert small.metric("peregrine_cache_evictions_total") >= 1
    assert small.metric("peregrine_cache_held_bytes") <= 1024 * 1024


def test_entries_outlive_a_sighup(start_server, tmp_path):
    two = launch(start_server, tmp_path, "--cache-size", "4", workers=2)
    target = unique("cc=max-age%3D60")
    with two.client("h1") as c:
        c.get(target)
    replaced = lambda: two.server.output().count("Replaced worker")  # noqa: E731
    os.kill(two.server.proc.pid, signal.SIGHUP)
    assert poll(lambda: replaced() >= 2, timeout=90), two.server.output()[-3000:]
    with two.client("h1") as c:
        after = c.get(target)
    assert after.headers["cache-status"].startswith("Peregrine; hit")
    assert two.calls(target) == 1


@pytest.mark.parametrize("options,mentions", [
    (["--cache-size", "0"], "--cache-size"),
    (["--cache-size", "lots"], "--cache-size"),
    (["--cache-size", "4", "--cache-max-object", "0"], "--cache-max-object"),
    (["--cache-size", "4", "--cache-max-object", "2048"], "--cache-max-object"),
    (["--cache-size", "4", "--cache-ttl-max", "0"], "--cache-ttl-max"),
])
def test_a_bad_cache_option_is_one_line_and_exit_2(options, mentions):
    code, out = run_cli(*options, TARGET)
    lines = [line for line in out.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and mentions in lines[0], out


def test_a_response_fetched_over_http3_is_stored_and_a_hit_over_tcp(start_server, tmp_path, browser, certs):  # noqa: F811
    log = tmp_path / "calls.log"
    server = start_h3(start_server, certs, "--cache-size", "4", target=TARGET, env={"CACHE_APP_LOG": str(log)})
    h3 = CacheServer(server, log, None, 1)
    page = open_h3(browser, server.port, server=server)
    try:
        target = unique("cc=max-age%3D60")
        fetched = fetch_h3(page, "https://127.0.0.1:%d%s" % (server.port, target))
    finally:
        page.close()
    # fetch() asks with Cache-Control: no-cache (its cache mode no-store): the application answers, the cache stores
    assert fetched.status == 200
    assert fetched.headers["cache-status"] == "Peregrine; fwd=request; stored"
    with https_client(server, certs) as c:
        hit = c.get(target, headers={"host": "127.0.0.1:%d" % server.port})
    assert hit.headers["cache-status"].startswith("Peregrine; hit")
    assert h3.calls(target) == 1
