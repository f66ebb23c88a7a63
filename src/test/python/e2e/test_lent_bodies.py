"""How response bodies leave the application (issue 14). Large bytes objects are lent to the server
rather than copied: a bytes object of 1 MiB sent by ASGI send(), a WSGI list, write() or generator
arrives intact, also when many are in flight at once, and the server gives every reference back once
the responses are written (the application's sys.getrefcount of the object returns to what it was).
Smaller bodies are copied, into the Java heap up to 2 KiB and into pooled buffers above, and on
HTTP/1.1 a small one goes into the buffer of the response head: bodies of every size around those
limits arrive whole, as bytes or bytearray, in one piece or several, with a Content-Length or
chunked."""

import concurrent.futures
import sys

import httpx
import pytest

from conftest import APPS_DIR, poll

sys.path.insert(0, str(APPS_DIR))
from raw_asgi import sized_body  # noqa: E402

LENT = bytes(range(256)) * 4096


@pytest.fixture(scope="module")
def asgi(raw_servers):
    return raw_servers("asgi")


@pytest.fixture(scope="module")
def wsgi(raw_servers):
    return raw_servers("wsgi")


def refcount(server):
    return int(server.get("/lent-refcount").text)


def fetch_many(server, path, count, clients=8):
    """count GETs of path spread over several connections at once; the bodies as received."""
    url = "http://127.0.0.1:%d%s" % (server.port, path)

    def one(_):
        with httpx.Client(timeout=60) as client:
            r = client.get(url)
            assert r.status_code == 200
            return r.content

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        return list(pool.map(one, range(count)))


def assert_references_returned(server, before):
    # The I/O threads release the last buffer after the response is written; the server drops its
    # references the next time the application's thread passes by, which each poll makes happen.
    assert poll(lambda: refcount(server) == before, timeout=15), (refcount(server), before)


def test_asgi_large_bodies_arrive_whole_and_are_given_back(asgi):
    before = refcount(asgi)
    # 24 responses of 4 MiB: far more than the 16 MiB after which released bodies ask for a drain.
    for body in fetch_many(asgi, "/lent?n=4", 24):
        assert body == LENT * 4
    assert_references_returned(asgi, before)


@pytest.mark.parametrize("how", ["list", "write", "iter"])
def test_wsgi_large_bodies_arrive_whole_and_are_given_back(wsgi, how):
    before = refcount(wsgi)
    for body in fetch_many(wsgi, "/lent?n=3&how=%s" % how, 16):
        assert body == LENT * 3
    assert_references_returned(wsgi, before)


def test_a_client_that_leaves_mid_body_returns_the_references(asgi):
    import socket

    before = refcount(asgi)
    for _ in range(4):
        s = socket.create_connection(("127.0.0.1", asgi.port))
        s.sendall(b"GET /lent?n=16 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 200")
        s.close()
    assert_references_returned(asgi, before)


# Around the limits of the server's copies: 2 KiB (heap copy, body into the head's buffer) and 16 KiB
# (the smallest body lent rather than copied).
SIZES = [0, 1, 2047, 2048, 2049, 4096, 16383, 16384, 16385, 70000]


@pytest.mark.parametrize("kind", ["bytes", "bytearray"])
def test_asgi_bodies_of_every_size_arrive_whole(asgi, kind):
    with httpx.Client(base_url="http://127.0.0.1:%d" % asgi.port, timeout=30) as client:
        for size in SIZES:
            for parts in (1, 3):
                for length in ("1", "0"):
                    r = client.get("/sized", params={"size": size, "parts": parts, "kind": kind, "length": length})
                    what = (size, parts, kind, length)
                    assert r.status_code == 200, what
                    if length == "1":
                        assert r.headers["content-length"] == str(size), what
                    assert r.content == sized_body(size), what
