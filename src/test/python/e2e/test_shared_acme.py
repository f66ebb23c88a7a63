"""ACME across replicas (--acme-domain with --shared-store): the account, the certificates, the order
lock and the tls-alpn-01 certificates live in a real redis-server instead of --acme-cache, so that
servers sharing no directory place one order and all serve its certificate.

The CA is Pebble on loopback, as in test_acme.py (whose fixtures these tests use), validating by
tls-alpn-01 on the first server's port; the store is redis-server, as in test_shared_store.py.
"""

import hashlib
import os
import signal
import time

import test_acme
from conftest import free_port, poll
from test_acme import (ISSUANCE_TIMEOUT, NAME, acme_ca, acme_options, handshake, not_before_after, orders, pebble_https,  # noqa: F401
                       scrape, serial_number, serial_of, try_handshake)
from test_shared_store import STORE_TESTS, redis_factory  # noqa: F401
from test_workers import wait_workers

# The store's marks and the ACME tests' own (Debian's pebble and pebble-challtestsrv, which bin/test installs).
pytestmark = STORE_TESTS + test_acme.pytestmark

APP = "tls_app:app"


def store_options(redis):
    return ["--shared-store", "redis://127.0.0.1:%d" % redis.port]


def acme_keys(redis):
    return sorted(k.decode().split(":", 3)[3] for k in redis.command("KEYS", "peregrine:acme:*"))


def test_replicas_without_a_common_directory_place_one_order_through_the_store_and_all_serve_it(
        start_server, acme_ca, redis_factory, tmp_path):
    redis = redis_factory()
    port, other_port, metrics_port = free_port(), free_port(), free_port()
    pebble = acme_ca(port)
    # A lock of the test's own keeps both replicas from ordering until the one on Pebble's port is frozen:
    # the other then orders, and Pebble's validation reaches the frozen one once it thaws, which must
    # find the challenge in the store. Its key is named as the server names it, under the CA's prefix.
    prefix = "peregrine:acme:%s:" % hashlib.sha256(pebble.directory.encode()).hexdigest()[:16]
    lock_key = prefix + "lock:" + NAME
    redis.command("SET", lock_key, "the-test", "PX", "600000")
    first = start_server(APP, *acme_options(pebble, port, tmp_path / "first"), *store_options(redis))
    second = start_server(APP, "--workers", "2", "--metrics-port", str(metrics_port),
                          *acme_options(pebble, other_port, tmp_path / "second"), *store_options(redis))
    wait_workers(second, 2)
    os.killpg(first.proc.pid, signal.SIGSTOP)
    try:
        redis.command("DEL", lock_key)
        assert poll(lambda: "ACME: answering tls-alpn-01 for test.example" in second.output(), timeout=ISSUANCE_TIMEOUT), \
            second.output()[-4000:]
    finally:
        os.killpg(first.proc.pid, signal.SIGCONT)
    root = pebble.root()
    for p, server in ((other_port, second), (port, first)):
        assert poll(lambda: try_handshake(p, NAME, cafile=root), timeout=ISSUANCE_TIMEOUT), server.output()[-4000:]
    der = handshake(port, NAME, cafile=root)[0]
    # Every process serves it once those that did not order (the first replica, and the second's other
    # worker) have taken it from the store: a handshake may land on either worker of the second.
    stored = "ACME: certificate for test.example (serial %x) stored by another process" % serial_number(der)
    assert poll(lambda: stored in first.output() and stored in second.output(), timeout=10), \
        (first.output()[-2000:], second.output()[-3000:])
    assert serial_of(der) == serial_of(handshake(other_port, NAME, cafile=root)[0])
    assert pebble.output().count("POST /order-plz") == 1, pebble.output()[-4000:]
    assert "ACME: answering tls-alpn-01" not in first.output(), "the replica on Pebble's port answered a challenge it did not make"
    # Everything is in the store, nothing in either directory, and nothing of the order is left behind.
    assert acme_keys(redis) == ["account.key", "account.url", "cert:" + NAME], redis.command("KEYS", "*")
    # It expires with the certificate.
    assert 0 < redis.command("PTTL", prefix + "cert:" + NAME) / 1000 <= not_before_after(der)[1] - time.time() + 60
    for directory in (tmp_path / "first", tmp_path / "second"):
        assert not directory.exists() or not list(directory.rglob("*.pem")), list(directory.rglob("*"))
    # The supervisor of the second replica reads neither store nor directory: its workers' expiry is in the shared metrics.
    scraped = poll(lambda: (lambda text: 'domain="test.example"} NaN' not in text and text)(scrape(metrics_port)), timeout=10)
    gauge = next(l for l in scraped.splitlines() if l.startswith('peregrine_certificate_expiry_timestamp_seconds{domain="test.example"}'))
    assert float(gauge.split()[-1]) == not_before_after(der)[1], gauge
    assert orders(scraped) == {("test.example", "issued"): 1.0, ("test.example", "failed"): 0.0}, scraped

    # A store that lost everything (restarted without persistence) gets the certificate back from a replica
    # that serves it, and a new replica with an empty directory serves it too, without an order.
    redis.command("FLUSHALL")
    assert poll(lambda: ("cert:" + NAME) in acme_keys(redis), timeout=10), redis.command("KEYS", "*")
    third_port = free_port()
    third = start_server(APP, *acme_options(pebble, third_port, tmp_path / "third"), *store_options(redis))
    assert serial_of(handshake(third_port, NAME, cafile=root)[0]) == serial_of(der), third.output()[-4000:]
    assert pebble.output().count("POST /order-plz") == 1


def test_a_store_down_at_start_leaves_the_name_without_a_certificate_until_it_answers_then_orders_once(
        start_server, acme_ca, redis_factory, tmp_path):
    port, store_port = free_port(), free_port()
    pebble = acme_ca(port)
    server = start_server(APP, *acme_options(pebble, port, tmp_path / "acme"),
                          "--shared-store", "redis://127.0.0.1:%d" % store_port, "--metrics-port", str(free_port()))
    assert poll(lambda: "The shared store at" in server.output() and "failed" in server.output(), timeout=20), server.output()[-4000:]
    # Without the store there is no lock to take: nothing is ordered, the CA is never asked.
    assert "POST /order-plz" not in pebble.output()
    assert not try_handshake(port, NAME, cafile=pebble.root())
    redis_factory(port=store_port)
    root = pebble.root()
    assert poll(lambda: try_handshake(port, NAME, cafile=root), timeout=ISSUANCE_TIMEOUT), server.output()[-4000:]
    assert pebble.output().count("POST /order-plz") == 1
    assert "answers again" in server.output() or "answers: this worker shares its ACME certificates" in server.output()
