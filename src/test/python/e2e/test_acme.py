"""ACME end to end (--acme-domain): certificates from a real ACME CA on loopback, Pebble, validated
by tls-alpn-01 on the server's own TLS port.

Each test starts ``pebble-challtestsrv`` as the DNS server (every name resolves to 127.0.0.1 unless a
test says otherwise) and ``pebble`` with its ``tlsPort`` set to the Peregrine port of that test, so
that Pebble's validation connects to Peregrine. Validation is real: PEBBLE_VA_ALWAYS_VALID is not set.
Pebble's own HTTPS certificate is made here with ``openssl`` and handed to Peregrine by
--acme-ca-bundle. Skipped when Debian's ``pebble`` package is not installed (bin/test installs it).

Pebble 2.4.0 has no ACME Renewal Information (RFC 9773): the renewal-information tests put
``ari_proxy.AriProxy`` in front of it, a reverse proxy that adds the renewalInfo resource and passes
everything else through to Pebble as it came, validation included.

The HTTP/3 test drives headless Chromium (``chromium.py``) over QUIC, resolving the test name to
127.0.0.1 and trusting nothing but the key of the ACME certificate it expects (by SPKI hash): a
page that loads over h3 was served that certificate.
"""

import calendar
import datetime
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.request

import pytest

import chromium
from ari_proxy import AriProxy, serial_of_cert_id
from chromium import DevToolsError
from conftest import free_port, poll, run_cli, RawConn
from test_http3 import free_udp_port
from test_workers import children, wait_workers

pytestmark = [
    pytest.mark.peregrine_only,
    pytest.mark.skipif(not (shutil.which("pebble") and shutil.which("pebble-challtestsrv")),
                       reason="Debian's pebble package is not installed"),
]

APP = "tls_app:app"
NAME = "test.example"
ISSUANCE_TIMEOUT = 90.0


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pebble_https(tmp_path_factory):
    """A test root and the certificate Pebble's HTTPS (its directory, its management API) serves."""
    d = tmp_path_factory.mktemp("pebble-https")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=peregrine acme test root", "-keyout", "root.key", "-out", "root.pem",
            # CPython 3.13 verifies with VERIFY_X509_STRICT, which wants a CA's key usage spelled out.
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=127.0.0.1",
            "-keyout", "pebble.key", "-out", "pebble.csr", cwd=d)
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nauthorityKeyIdentifier=keyid\n"
                               "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "pebble.csr", "-CA", "root.pem", "-CAkey", "root.key", "-CAcreateserial",
            "-days", "2", "-extfile", "ext.cnf", "-out", "pebble.pem", cwd=d)
    return d


class Pebble:
    """pebble-challtestsrv (DNS) and pebble, validating on tls_port."""

    def __init__(self, https, tls_port, work, validity_seconds=None, start=True):
        self.https = https
        self.work = work
        self.dns_port = free_port()
        self.challtest_port = free_port()
        self.port = free_port()
        self.management_port = free_port()
        self.challtest_log = work / "challtestsrv.log"
        self.log = work / "pebble.log"
        self.tls_port = tls_port
        self.validity_seconds = validity_seconds
        self.proc = self.challtest = None
        if start:
            self.start()

    def start(self):
        https, work, tls_port, validity_seconds = self.https, self.work, self.tls_port, self.validity_seconds
        self.challtest = subprocess.Popen(
            ["pebble-challtestsrv", "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "",
             "-dns01", "127.0.0.1:%d" % self.dns_port, "-http01", "", "-https01", "", "-tlsalpn01", "",
             "-management", "127.0.0.1:%d" % self.challtest_port],
            stdout=open(self.challtest_log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
        config = {"pebble": {
            "listenAddress": "127.0.0.1:%d" % self.port,
            "managementListenAddress": "127.0.0.1:%d" % self.management_port,
            "certificate": str(https / "pebble.pem"),
            "privateKey": str(https / "pebble.key"),
            "httpPort": free_port(),
            "tlsPort": tls_port,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": False,
        }}
        if validity_seconds:
            config["pebble"]["certificateValidityPeriod"] = validity_seconds
        (work / "pebble.json").write_text(json.dumps(config))
        env = dict(os.environ, PEBBLE_VA_NOSLEEP="1", PEBBLE_WFE_NONCEREJECT="0", PEBBLE_AUTHZREUSE="0")
        env.pop("PEBBLE_VA_ALWAYS_VALID", None)
        self.proc = subprocess.Popen(
            ["pebble", "-config", str(work / "pebble.json"), "-dnsserver", "127.0.0.1:%d" % self.dns_port],
            stdout=open(self.log, "wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True)
        assert poll(lambda: self._listening(self.port) and self._listening(self.challtest_port), timeout=20), self.output()

    @staticmethod
    def _listening(port):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    @property
    def directory(self):
        return "https://127.0.0.1:%d/dir" % self.port

    @property
    def ca_bundle(self):
        return str(self.https / "root.pem")

    def _https(self):
        return ssl.create_default_context(cafile=self.ca_bundle)

    def root(self):
        """The root of the certificates Pebble issues (a new one each time Pebble starts)."""
        url = "https://127.0.0.1:%d/roots/0" % self.management_port
        with urllib.request.urlopen(url, context=self._https(), timeout=10) as response:
            return response.read().decode()

    def resolve(self, host, address):
        """Makes challtestsrv answer A queries for host with address."""
        request = urllib.request.Request("http://127.0.0.1:%d/add-a" % self.challtest_port, method="POST",
                                         data=json.dumps({"host": host + ".", "addresses": [address]}).encode())
        urllib.request.urlopen(request, timeout=10).read()

    def output(self):
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self):
        for proc in (self.proc, self.challtest):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@pytest.fixture
def acme_ca(pebble_https, tmp_path):
    """A factory: acme_ca(tls_port) starts a Pebble that validates on tls_port."""
    started = []

    def start(tls_port, validity_seconds=None, start=True):
        work = tmp_path / ("pebble-%d" % len(started))
        work.mkdir()
        pebble = Pebble(pebble_https, tls_port, work, validity_seconds, start)
        started.append(pebble)
        return pebble

    yield start
    for pebble in started:
        pebble.stop()


@pytest.fixture
def ari(pebble_https):
    """A factory: ari(pebble) starts an AriProxy in front of that Pebble; its directory is the proxy's."""
    started = []

    def start(pebble):
        proxy = AriProxy(pebble.port, pebble_https / "pebble.pem", pebble_https / "pebble.key", pebble_https / "root.pem")
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.stop()


def acme_options(pebble, port, cache, *names, directory=None):
    options = ["--port", str(port), "--acme-cache", str(cache), "--acme-directory", directory or pebble.directory,
               "--acme-ca-bundle", pebble.ca_bundle, "--acme-email", "admin@test.example"]
    for name in names or (NAME,):
        options += ["--acme-domain", name]
    return options


def handshake(port, name, cafile=None, alpn=None):
    """The served certificate (DER) after a handshake with SNI name, verified against cafile when given."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if cafile:
        context.load_verify_locations(cadata=cafile)
    else:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if alpn:
        context.set_alpn_protocols(alpn)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=name) as tls:
            return tls.getpeercert(binary_form=True), tls.selected_alpn_protocol()


def try_handshake(port, name, cafile=None):
    try:
        return handshake(port, name, cafile)[0]
    except (OSError, ssl.SSLError):
        return None


def serial_of(der):
    pem = ssl.DER_cert_to_PEM_cert(der)
    out = subprocess.run(["openssl", "x509", "-noout", "-serial"], input=pem.encode(), capture_output=True, check=True)
    return out.stdout.decode().strip()


def serial_number(der):
    return int(serial_of(der).split("=", 1)[1], 16)


def not_before_after(der):
    """The validity of a certificate in DER, as Unix times."""
    out = subprocess.run(["openssl", "x509", "-noout", "-startdate", "-enddate"], input=ssl.DER_cert_to_PEM_cert(der).encode(),
                         capture_output=True, check=True).stdout.decode()
    dates = dict(line.split("=", 1) for line in out.split("\n") if line)
    return tuple(calendar.timegm(time.strptime(dates[key], "%b %d %H:%M:%S %Y GMT")) for key in ("notBefore", "notAfter"))


def instant(text):
    """A Java Instant as the log prints it (ISO 8601, up to nanoseconds, Z) as a Unix time."""
    whole, _, fraction = text.rstrip("Z").partition(".")
    seconds = calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S"))
    return seconds + (float("0." + fraction) if fraction else 0.0)


def log_line(output, *parts):
    """The last line of output that holds every one of parts, or None."""
    lines = [line for line in output.splitlines() if all(part in line for part in parts)]
    return lines[-1] if lines else None


def read_hello(tls):
    """One response of tls_app's "/" on a kept-alive connection: up to its body."""
    data = b""
    while not data.endswith(b"hello, tls"):
        chunk = tls.recv(65536)
        assert chunk, data
        data += chunk
    return data


def get_over_tls(port, name, cafile):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cadata=cafile)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=name) as tls:
            tls.sendall(b"GET / HTTP/1.1\r\nHost: " + name.encode() + b"\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := tls.recv(65536):
                data += chunk
            return data


def scrape(metrics_port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % metrics_port, timeout=10) as response:
        return response.read().decode()


def orders(scraped):
    """peregrine_acme_orders_total by (domain, outcome)."""
    counts = {}
    for line in scraped.splitlines():
        if line.startswith("peregrine_acme_orders_total{"):
            labels, value = line[len("peregrine_acme_orders_total{"):].rsplit("} ", 1)
            fields = dict(field.split("=", 1) for field in labels.split(","))
            counts[(fields["domain"].strip('"'), fields["outcome"].strip('"'))] = float(value)
    return counts


def spki_of(der, directory):
    """What --ignore-certificate-errors-spki-list takes, for a certificate in DER."""
    path = directory / ("served-%d.pem" % time.monotonic_ns())
    path.write_text(ssl.DER_cert_to_PEM_cert(der))
    return chromium.spki_sha256_base64(path)


def test_first_issuance_is_validated_by_tls_alpn_01_and_chains_to_the_ca_root(start_server, acme_ca, tmp_path):
    port = free_port()
    pebble = acme_ca(port)
    cache = tmp_path / "acme"
    metrics_port = free_port()
    server = start_server(APP, "--metrics-port", str(metrics_port), *acme_options(pebble, port, cache))
    # Served at once, before any certificate exists: a handshake for the name fails with an alert.
    with pytest.raises(ssl.SSLError):
        handshake(port, NAME)
    root = pebble.root()
    der = poll(lambda: try_handshake(port, NAME, cafile=root), timeout=ISSUANCE_TIMEOUT)
    assert der, "no certificate for %s\nserver:\n%s\npebble:\n%s" % (NAME, server.output()[-4000:], pebble.output()[-4000:])
    response = get_over_tls(port, NAME, root)
    assert response.startswith(b"HTTP/1.1 200") and response.endswith(b"hello, tls"), response
    out = server.output()
    assert "ACME: answering tls-alpn-01 for test.example" in out
    assert "ACME: test.example validated" in out
    assert "no certificate for test.example yet" in out, "the early handshake's refusal is logged"
    # The cache holds the account and the certificate, readable by the owner only.
    for name in ("account.key", "account.url", NAME + ".pem"):
        assert (cache / name).stat().st_mode & 0o777 == 0o600, name
    assert not (cache / (NAME + ".lock")).exists()
    _, expected = not_before_after(der)
    scraped = scrape(metrics_port)
    gauge = next(l for l in scraped.splitlines() if l.startswith('peregrine_certificate_expiry_timestamp_seconds{domain="test.example"}'))
    assert float(gauge.split()[-1]) == expected, gauge
    assert orders(scraped) == {("test.example", "issued"): 1.0, ("test.example", "failed"): 0.0}, scraped
    assert not list((cache / "challenges").iterdir()), "the challenge certificate is removed after validation"


def test_a_handshake_offering_acme_tls_without_a_pending_challenge_never_gets_the_challenge_protocol(start_server, acme_ca, tmp_path):
    port = free_port()
    pebble = acme_ca(port)
    start_server(APP, *acme_options(pebble, port, tmp_path / "acme"))
    root = pebble.root()
    assert poll(lambda: try_handshake(port, NAME, cafile=root), timeout=ISSUANCE_TIMEOUT)
    _, protocol = handshake(port, NAME, cafile=root, alpn=["acme-tls/1", "http/1.1"])
    assert protocol == "http/1.1"
    # Offered alone, it is refused with RFC 7301's alert rather than answered with HTTP (RFC 8737 3).
    with pytest.raises(ssl.SSLError, match="(?i)no.application.protocol"):
        handshake(port, NAME, cafile=root, alpn=["acme-tls/1"])


def test_a_pending_challenge_answers_every_acme_tls_handshake_on_either_worker_and_reads_no_request(start_server, pebble_https, tmp_path):
    # The challenge file as the ordering process writes it, and a CA that never answers: nothing
    # removes it, and every handshake below is answered from the cache directory, by either worker.
    cache = tmp_path / "acme"
    (cache / "challenges").mkdir(parents=True)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=" + NAME, "-addext", "subjectAltName=DNS:" + NAME, "-set_serial", "0x5151",
            "-keyout", "challenge.key", "-out", "challenge.pem", cwd=tmp_path)
    (cache / "challenges" / (NAME + ".pem")).write_text((tmp_path / "challenge.key").read_text() + (tmp_path / "challenge.pem").read_text())
    port = free_port()
    server = start_server(APP, "--workers", "2", "--port", str(port), "--acme-cache", str(cache), "--acme-domain", NAME,
                          "--acme-directory", "https://127.0.0.1:%d/dir" % free_port(), "--acme-ca-bundle", str(pebble_https / "root.pem"))
    wait_workers(server, 2)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["acme-tls/1", "h2", "http/1.1"])
    # Like a CA validating several times from several addresses: each attempt gets the challenge.
    for _ in range(8):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, context.wrap_socket(raw, server_hostname=NAME) as tls:
            assert tls.selected_alpn_protocol() == "acme-tls/1"
            assert serial_of(tls.getpeercert(binary_form=True)) == "serial=5151"
            # Nothing falls through to HTTP: the server closes the connection, and a request gets no answer.
            try:
                tls.sendall(b"GET / HTTP/1.1\r\nHost: test.example\r\n\r\n")
                answer = tls.recv(65536)
            except OSError:
                answer = b""
            assert answer == b"", answer
    assert server.running()


def test_a_restart_reuses_the_cached_account_and_certificate(start_server, acme_ca, tmp_path):
    port = free_port()
    pebble = acme_ca(port)
    cache = tmp_path / "acme"
    first = start_server(APP, *acme_options(pebble, port, cache))
    root = pebble.root()
    der = poll(lambda: try_handshake(port, NAME, cafile=root), timeout=ISSUANCE_TIMEOUT)
    assert der, first.output()[-4000:]
    assert first.stop() == 0
    orders = pebble.output().count("POST /order-plz")
    accounts = pebble.output().count("POST /sign-me-up")
    assert orders == 1 and accounts == 1, pebble.output()[-4000:]

    second = start_server(APP, *acme_options(pebble, port, cache))
    assert serial_of(handshake(port, NAME, cafile=root)[0]) == serial_of(der), "served at once, from the cache"
    assert second.wait_for_output("ACME: serving the cached certificate for test.example")
    assert "ACME: ordering" not in second.output()
    assert pebble.output().count("POST /order-plz") == orders
    assert pebble.output().count("POST /sign-me-up") == accounts


def test_a_corrupt_cached_certificate_is_named_and_ordered_anew(start_server, acme_ca, tmp_path):
    port = free_port()
    pebble = acme_ca(port)
    cache = tmp_path / "acme"
    cache.mkdir()
    (cache / (NAME + ".pem")).write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    server = start_server(APP, *acme_options(pebble, port, cache))
    root = pebble.root()
    assert poll(lambda: try_handshake(port, NAME, cafile=root), timeout=ISSUANCE_TIMEOUT), server.output()[-4000:]
    assert "%s is corrupt" % (cache / (NAME + ".pem")) in server.output()


def test_two_workers_share_one_order_and_either_answers_the_validation(start_server, acme_ca, tmp_path):
    port = free_port()
    pebble = acme_ca(port)
    cache = tmp_path / "acme"
    server = start_server(APP, "--workers", "2", *acme_options(pebble, port, cache))
    root = pebble.root()
    der = poll(lambda: try_handshake(port, NAME, cafile=root), timeout=ISSUANCE_TIMEOUT)
    assert der, server.output()[-4000:]
    # Both workers serve it: new connections land on either, and the worker that did not order picks
    # the certificate up from the cache within its poll; then a run of handshakes all get it.
    def all_served():
        ders = [try_handshake(port, NAME, cafile=root) for _ in range(12)]
        return all(ders) and {serial_of(d) for d in ders} == {serial_of(der)}
    assert poll(all_served, timeout=30), server.output()[-4000:]
    assert server.output().count("ACME: ordering a certificate for test.example") == 1
    assert pebble.output().count("POST /order-plz") == 1


def test_a_short_lived_certificate_is_renewed_and_swapped_in_without_dropping_a_connection(start_server, acme_ca, tmp_path):
    port = free_port()
    pebble = acme_ca(port, validity_seconds=40)
    # A keep-alive longer than the wait for the renewal: the connection must outlive the swap.
    server = start_server(APP, "--keep-alive", "300000", *acme_options(pebble, port, tmp_path / "acme"))
    root = pebble.root()
    first = poll(lambda: try_handshake(port, NAME, cafile=root), timeout=ISSUANCE_TIMEOUT)
    assert first, server.output()[-4000:]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cadata=root)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, context.wrap_socket(raw, server_hostname=NAME) as kept:
        kept.sendall(b"GET / HTTP/1.1\r\nHost: test.example\r\n\r\n")
        assert read_hello(kept).startswith(b"HTTP/1.1 200")
        renewed = poll(lambda: (lambda der: der if der and serial_of(der) != serial_of(first) else None)(try_handshake(port, NAME, cafile=root)),
                       timeout=ISSUANCE_TIMEOUT)
        assert renewed, server.output()[-4000:]
        # The connection made before the swap keeps its certificate and is still served.
        assert serial_of(kept.getpeercert(binary_form=True)) == serial_of(first)
        kept.sendall(b"GET / HTTP/1.1\r\nHost: test.example\r\n\r\n")
        assert read_hello(kept).startswith(b"HTTP/1.1 200")
    assert "ACME: renewing a certificate for test.example" in server.output()
    assert "ACME: new certificate for test.example" in server.output()


def window_open_now(now):
    """A renewal window that opened a second ago and closes in three."""
    return now - datetime.timedelta(seconds=1), now + datetime.timedelta(seconds=3)


def window_in_a_month(now):
    return now + datetime.timedelta(days=30), now + datetime.timedelta(days=31)


def open_now_then_in_a_month(index, now):
    """The proxy's windows: open now for the first certificate, a month away for any later one."""
    return window_open_now(now) if index == 0 else window_in_a_month(now)


def served_serial(port, root):
    der = try_handshake(port, NAME, cafile=root)
    return serial_number(der) if der else None


@pytest.mark.timeout(300)  # a minute between the server's two questions: its floor on Retry-After
def test_renewal_information_moved_to_now_renews_at_once_naming_the_replaced_certificate(start_server, acme_ca, ari, tmp_path):
    port = free_port()
    pebble = acme_ca(port)
    proxy = ari(pebble)
    moved = threading.Event()
    # A month away at first; once moved (as before a mass revocation), the first certificate's window opens now.
    proxy.window = lambda index, now: window_open_now(now) if index == 0 and moved.is_set() else window_in_a_month(now)
    proxy.retry_after = 1  # the server asks again no sooner than a minute (RFC 9773 4.3's example limit)
    metrics_port = free_port()
    # Pebble's certificates last five years: the lifetime rule would not renew for more than three.
    server = start_server(APP, "--metrics-port", str(metrics_port), *acme_options(pebble, port, tmp_path / "acme", directory=proxy.directory))
    root = pebble.root()
    assert poll(lambda: proxy.cert_ids(), timeout=ISSUANCE_TIMEOUT), server.output()[-4000:]
    first_id, = proxy.cert_ids()
    assert poll(lambda: served_serial(port, root) == serial_of_cert_id(first_id), timeout=30), server.output()[-4000:]
    assert server.wait_for_output("ACME: the CA suggests renewing test.example (serial %x)" % serial_of_cert_id(first_id), timeout=30)
    moved.set()
    # The server asks again after Retry-After, sees the window open, and renews at once.
    assert poll(lambda: len(proxy.cert_ids()) == 2, timeout=90 + ISSUANCE_TIMEOUT), server.output()[-4000:]
    second_id = proxy.cert_ids()[1]
    assert poll(lambda: served_serial(port, root) == serial_of_cert_id(second_id), timeout=30), server.output()[-4000:]
    asked = proxy.asked_times(first_id)
    assert len(asked) == 2 and asked[1] - asked[0] >= 59, "asked again once, a minute later, not at every poll: %r" % asked
    # The renewal named the certificate it replaces (RFC 9773 5), by the certID the server asked about.
    assert [order.get("replaces") for order in proxy.orders] == [None, first_id], proxy.orders
    assert "ACME: renewing a certificate for test.example" in server.output()
    # The second certificate's window is a month away, and its renewal time was drawn inside it: not the
    # lifetime rule's (in years), and no third order.
    advice = "ACME: the CA suggests renewing test.example (serial %x)" % serial_of_cert_id(second_id)
    assert server.wait_for_output(advice, timeout=30), server.output()[-4000:]
    line = log_line(server.output(), advice)
    (start, end), = proxy.windows_for(second_id)
    assert start.timestamp() <= instant(line.rsplit("renewal at ", 1)[1]) <= end.timestamp(), line
    counted = orders(scrape(metrics_port))
    assert counted == {(NAME, "issued"): 2.0, (NAME, "failed"): 0.0}, counted
    assert pebble.output().count("POST /order-plz") == 2 and len(proxy.orders) == 2


def test_an_order_refused_as_already_replaced_is_placed_again_without_naming_the_certificate(start_server, acme_ca, ari, tmp_path):
    port = free_port()
    pebble = acme_ca(port)
    proxy = ari(pebble)
    proxy.window = open_now_then_in_a_month
    proxy.refuse_replaces = True
    metrics_port = free_port()
    server = start_server(APP, "--metrics-port", str(metrics_port), *acme_options(pebble, port, tmp_path / "acme", directory=proxy.directory))
    root = pebble.root()
    assert poll(lambda: len(proxy.cert_ids()) == 2, timeout=2 * ISSUANCE_TIMEOUT), server.output()[-4000:]
    first_id, second_id = proxy.cert_ids()
    assert poll(lambda: served_serial(port, root) == serial_of_cert_id(second_id), timeout=30), server.output()[-4000:]
    assert [order.get("replaces") for order in proxy.orders] == [None, first_id, None], proxy.orders
    line = log_line(server.output(), "the CA refused an order for test.example naming the certificate it replaces")
    assert line and "urn:ietf:params:acme:error:alreadyReplaced" in line and line.endswith("ordering without naming it"), line
    # The refused request is no failed order: the renewal went on at once.
    assert orders(scrape(metrics_port)) == {(NAME, "issued"): 2.0, (NAME, "failed"): 0.0}
    assert pebble.output().count("POST /order-plz") == 2


def test_a_failing_renewal_information_endpoint_leaves_the_lifetime_rule_and_warns(start_server, acme_ca, ari, tmp_path):
    port = free_port()
    pebble = acme_ca(port)
    proxy = ari(pebble)
    proxy.failing = True
    server = start_server(APP, *acme_options(pebble, port, tmp_path / "acme", directory=proxy.directory))
    root = pebble.root()
    first = poll(lambda: try_handshake(port, NAME, cafile=root), timeout=ISSUANCE_TIMEOUT)
    assert first, server.output()[-4000:]
    assert server.wait_for_output("ACME: no renewal information for test.example from the CA", timeout=30), server.output()[-4000:]
    line = log_line(server.output(), "no renewal information for test.example from the CA")
    assert " WARN " in line and "urn:ietf:params:acme:error:serverInternal" in line, line
    # The lifetime rule: a third of the lifetime before the end, less up to a thirtieth of it (that this
    # time does renew is test_a_short_lived_certificate_is_renewed_..., against a Pebble without renewalInfo).
    not_before, not_after = not_before_after(first)
    lifetime = not_after - not_before
    renewal = instant(line.split("renewal stays at ", 1)[1].split(",", 1)[0])
    assert not_after - lifetime / 3 - lifetime / 30 - 0.001 <= renewal <= not_after - lifetime / 3 + 0.001, (line, not_before, not_after)
    assert pebble.output().count("POST /order-plz") == 1
    # Asked again in a minute (then 2, 4... minutes), not at every poll of the manager.
    (_, asked_at), = proxy.asked
    asked_wall = time.time() - (time.monotonic() - asked_at)
    again = instant(line.rsplit("asking again at ", 1)[1])
    assert 55 <= again - asked_wall <= 65, (line, asked_wall)


def test_a_failed_authorization_is_logged_with_the_ca_reason_and_backed_off(start_server, acme_ca, tmp_path):
    port = free_port()
    pebble = acme_ca(port)
    # Resolves to an address nothing listens on: Pebble's validation cannot reach us.
    pebble.resolve("bad.example", "127.0.0.2")
    cache = tmp_path / "acme"
    metrics_port = free_port()
    server = start_server(APP, "--metrics-port", str(metrics_port), *acme_options(pebble, port, cache, "bad.example", NAME))
    out = server.wait_for_output("could not obtain a certificate for bad.example", timeout=ISSUANCE_TIMEOUT)
    assert out, server.output()[-4000:]
    line = next(l for l in out.splitlines() if "could not obtain a certificate for bad.example" in l)
    assert "failure 1 in a row" in line and "next attempt at" in line
    assert "urn:ietf:params:acme:error:" in line, "the CA's problem document: " + line
    assert (cache / "bad.example.backoff").read_text().split()[0] == "1"
    counted = orders(scrape(metrics_port))
    assert counted[("bad.example", "failed")] == 1.0 and counted[("bad.example", "issued")] == 0.0, counted
    # The other name is obtained meanwhile, and the server keeps serving.
    root = pebble.root()
    assert poll(lambda: try_handshake(port, NAME, cafile=root), timeout=ISSUANCE_TIMEOUT), server.output()[-4000:]
    assert server.running()
    with pytest.raises(ssl.SSLError):
        handshake(port, "bad.example")


def test_a_ca_down_at_startup_is_retried_until_it_answers(start_server, acme_ca, tmp_path):
    port = free_port()
    pebble = acme_ca(port, start=False)
    server = start_server(APP, *acme_options(pebble, port, tmp_path / "acme"))
    assert server.wait_for_output("could not obtain a certificate for test.example (failure 1 in a row)", timeout=60), server.output()[-4000:]
    assert server.running()
    assert subject_of(handshake(port, None)[0]) == "CN=peregrine-fallback.invalid", "meanwhile, no SNI gets the fallback"
    pebble.start()
    root = pebble.root()
    der = poll(lambda: try_handshake(port, NAME, cafile=root), timeout=ISSUANCE_TIMEOUT)
    assert der, server.output()[-4000:]
    assert not (tmp_path / "acme" / (NAME + ".backoff")).exists(), "a success clears the backoff"
    # Once the name has its certificate, a handshake without SNI gets it too, not the fallback.
    assert handshake(port, None)[0] == der


def no_sni_context():
    """What a kubelet HTTPS probe to the pod's IP does: no server name, no verification."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def read_response(tls):
    """One HTTP/1.1 response with a content-length, read off a kept-alive connection: (head, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = tls.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")[1:] if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        chunk = tls.recv(65536)
        assert chunk, head + body
        body += chunk
    return head.decode("latin-1"), body


def subject_of(der):
    return openssl_name(der, "-subject")


def issuer_of(der):
    return openssl_name(der, "-issuer")


def openssl_name(der, which):
    out = subprocess.run(["openssl", "x509", "-noout", which, "-nameopt", "RFC2253"], input=ssl.DER_cert_to_PEM_cert(der).encode(),
                         capture_output=True, check=True).stdout.decode().strip()
    return out.split("=", 1)[1]


def healthz_without_sni(port):
    """The status of GET /healthz over TLS without SNI, or None when the handshake fails."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                no_sni_context().wrap_socket(raw, server_hostname=None) as tls:
            tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return int(read_response(tls)[0].split(" ", 2)[1])
    except (OSError, ssl.SSLError):
        return None


def test_before_any_certificate_a_probe_without_sni_gets_a_self_signed_fallback_and_reaches_the_health_check(start_server, pebble_https, tmp_path):
    # A CA that never answers: no certificate for the name ever comes, as while Let's Encrypt is unreachable.
    port = free_port()
    server = start_server(APP, "--port", str(port), "--acme-cache", str(tmp_path / "acme"), "--acme-domain", NAME,
                          "--acme-directory", "https://127.0.0.1:%d/dir" % free_port(), "--acme-ca-bundle", str(pebble_https / "root.pem"),
                          "--health-check-path", "/healthz")
    # 503 until the application has started, then 200: the probe is answered, over TLS, without a certificate for the name.
    assert poll(lambda: healthz_without_sni(port) == 200, timeout=30), server.output()[-4000:]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            no_sni_context().wrap_socket(raw, server_hostname=None) as tls:
        der = tls.getpeercert(binary_form=True)
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: 10.1.2.3\r\n\r\n")
        head, _ = read_response(tls)
        assert head.startswith("HTTP/1.1 200"), head
        # The application is served on the same connection, as on any TLS port with a certificate.
        tls.sendall(b"GET / HTTP/1.1\r\nHost: 10.1.2.3\r\n\r\n")
        head, body = read_response(tls)
        assert head.startswith("HTTP/1.1 200") and body == b"hello, tls", (head, body)
    assert issuer_of(der) == subject_of(der) == "CN=peregrine-fallback.invalid", "self-signed"
    key = subprocess.run(["openssl", "x509", "-noout", "-text"], input=ssl.DER_cert_to_PEM_cert(der).encode(),
                         capture_output=True, check=True).stdout.decode()
    assert "id-ecPublicKey" in key and "prime256v1" in key, key
    # A handshake naming the name still waiting for its certificate is refused with an alert, as before.
    with pytest.raises(ssl.SSLError, match="ALERT_HANDSHAKE_FAILURE"):
        handshake(port, NAME)
    # And so is one naming an unknown name (unrecognized_name): only a client that sends no name gets the fallback.
    with pytest.raises(ssl.SSLError, match="UNRECOGNIZED_NAME"):
        handshake(port, "unknown.example")
    out = server.output()
    assert "no certificate for test.example yet, ACME is obtaining it" in out
    assert out.count("get a self-signed fallback certificate") == 1, "logged once"
    assert server.running()


def client_hello_records(name, split):
    """A ClientHello naming name, as TLS records: one, or its handshake message cut across two when split."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    tls = context.wrap_bio(ssl.MemoryBIO(), outgoing := ssl.MemoryBIO(), server_hostname=name)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    record = outgoing.read()
    assert record[0] == 22 and len(record) == 5 + int.from_bytes(record[3:5], "big"), "one handshake record"
    if not split:
        return record
    message = record[5:]
    half = len(message) // 2
    return b"".join(record[:3] + len(part).to_bytes(2, "big") + part for part in (message[:half], message[half:]))


def refused_with_an_alert(port, records):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(records)
        answer = b""
        while chunk := raw.recv(4096):
            answer += chunk
    return answer[:1] == b"\x15"


def test_refused_handshakes_leave_no_buffer_behind(start_server, pebble_https, tmp_path):
    # Netty's leak detector at its strictest: every buffer is tracked and one collected unreleased is
    # reported as "LEAK:" at the next allocation. The hello of a refused handshake was such a buffer.
    port = free_port()
    server = start_server(APP, "--port", str(port), "--acme-cache", str(tmp_path / "acme"), "--acme-domain", NAME,
                          "--acme-directory", "https://127.0.0.1:%d/dir" % free_port(), "--acme-ca-bundle", str(pebble_https / "root.pem"),
                          env={"PEREGRINE_JAVA_OPTS": "-Dio.netty.leakDetection.level=paranoid"})
    jcmd = os.path.join(os.path.dirname(os.path.realpath("/proc/%d/exe" % server.proc.pid)), "jcmd")
    if not os.access(jcmd, os.X_OK):
        pytest.skip("no jcmd beside the server's java")
    # Netty takes a hello in one record from the buffer it read into, and one cut across records from a buffer of its own.
    hellos = [client_hello_records(NAME, split) for split in (False, True)]
    for _ in range(3):
        for records in hellos * 5:
            assert refused_with_an_alert(port, records), server.output()[-4000:]
        subprocess.run([jcmd, str(server.proc.pid), "GC.run"], capture_output=True, check=True, timeout=60)
        if "LEAK:" in server.output():
            break
    assert refused_with_an_alert(port, hellos[0]), "an allocation after the last collection, where a leak is reported"
    assert "LEAK:" not in server.output(), server.output()[-6000:]
    assert "no certificate for test.example yet, ACME is obtaining it" in server.output()


def test_two_servers_sharing_a_cache_place_one_order(start_server, acme_ca, tmp_path):
    port, other_port = free_port(), free_port()
    pebble = acme_ca(port)
    cache = tmp_path / "acme"
    # Pebble validates on the first server's port; whichever server orders, the challenge is in the shared cache.
    # The second starts once the first accepts connections: had it ordered before, Pebble would have found
    # nobody on that port, failed the order and let a second one be placed 30 s later.
    first = start_server(APP, *acme_options(pebble, port, cache), wait=False)
    first.wait_ready()
    second = start_server(APP, *acme_options(pebble, other_port, cache))
    root = pebble.root()
    for p, server in ((port, first), (other_port, second)):
        assert poll(lambda: try_handshake(p, NAME, cafile=root), timeout=ISSUANCE_TIMEOUT), server.output()[-4000:]
    assert serial_of(handshake(port, NAME, cafile=root)[0]) == serial_of(handshake(other_port, NAME, cafile=root)[0])
    assert pebble.output().count("POST /order-plz") == 1, pebble.output()[-4000:]


def test_tls_cert_pairs_serve_other_names_beside_acme(start_server, acme_ca, tmp_path):
    port = free_port()
    pebble = acme_ca(port)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=other.test", "-addext", "subjectAltName=DNS:other.test", "-set_serial", "0x4242",
            "-keyout", "other.key", "-out", "other.pem", cwd=tmp_path)
    server = start_server(APP, "--tls-cert", str(tmp_path / "other.pem"), "--tls-key", str(tmp_path / "other.key"),
                          *acme_options(pebble, port, tmp_path / "acme"))
    # Served before ACME has anything: the pair, for its name and for clients naming nothing known.
    assert serial_of(handshake(port, "other.test")[0]) == "serial=4242"
    assert serial_of(handshake(port, "unknown.test")[0]) == "serial=4242"
    root = pebble.root()
    der = poll(lambda: try_handshake(port, NAME, cafile=root), timeout=ISSUANCE_TIMEOUT)
    assert der, server.output()[-4000:]
    assert serial_of(handshake(port, "other.test")[0]) == "serial=4242"


def test_sighup_with_workers_serves_the_cached_certificate_and_orders_nothing(start_server, acme_ca, tmp_path):
    port = free_port()
    pebble = acme_ca(port)
    metrics_port = free_port()
    server = start_server(APP, "--workers", "2", "--metrics-port", str(metrics_port), *acme_options(pebble, port, tmp_path / "acme"))
    first = set(wait_workers(server, 2))
    root = pebble.root()
    der = poll(lambda: try_handshake(port, NAME, cafile=root), timeout=ISSUANCE_TIMEOUT)
    assert der, server.output()[-4000:]
    assert pebble.output().count("POST /order-plz") == 1
    # The supervisor serves the metrics: the order counted by the worker that placed it.
    assert orders(scrape(metrics_port))[(NAME, "issued")] == 1.0

    os.kill(server.proc.pid, signal.SIGHUP)
    assert poll(lambda: server.output().count("Replaced worker") >= 2, timeout=90), server.output()[-4000:]
    assert poll(lambda: len(children(server.proc.pid)) == 2 and not set(children(server.proc.pid)) & first, timeout=30)
    # Each new worker read the certificate from the cache at its start, and both serve it.
    assert poll(lambda: server.output().count("ACME: serving the cached certificate for test.example") >= 2, timeout=30), \
        server.output()[-4000:]
    served = [try_handshake(port, NAME, cafile=root) for _ in range(12)]
    assert all(served) and {serial_of(d) for d in served} == {serial_of(der)}
    time.sleep(3)  # more than the managers' poll: an order would have started by now
    assert server.output().count("ACME: ordering") == 1, server.output()[-4000:]
    assert pebble.output().count("POST /order-plz") == 1, pebble.output()[-4000:]
    assert orders(scrape(metrics_port))[(NAME, "issued")] == 1.0


def test_redirect_http_and_hsts_work_with_acme(start_server, acme_ca, tmp_path):
    port, redirect_port = free_port(), free_port()
    pebble = acme_ca(port)
    server = start_server(APP, "--redirect-http", str(redirect_port), "--hsts", "3600", *acme_options(pebble, port, tmp_path / "acme"))
    root = pebble.root()
    assert poll(lambda: try_handshake(port, NAME, cafile=root), timeout=ISSUANCE_TIMEOUT), server.output()[-4000:]
    response = get_over_tls(port, NAME, root)
    head = response.split(b"\r\n\r\n", 1)[0].decode().lower()
    assert head.startswith("http/1.1 200") and "\r\nstrict-transport-security: max-age=3600" in head, head
    with RawConn(redirect_port) as conn:
        conn.send_request("GET", "/some/path?q=1", host=NAME)
        redirect = conn.read_response()
    assert redirect.status == 301, redirect
    assert redirect.header("location") == "https://%s:%d/some/path?q=1" % (NAME, port)
    assert redirect.header("strict-transport-security") is None, "HSTS is for TLS answers only (RFC 6797 7.2)"


def open_h3(spki, origins, url, server):
    """A Chromium that accepts only the certificate of spki, and a page it loaded from url over HTTP/3.
    QUIC may answer a moment after TCP: the first loads are retried, at least twice, since one load that
    hangs (a page that never fires its load event, seen once with the machine loaded) spends the deadline alone."""
    browser = chromium.Chromium(force_quic=origins, spki_hashes=[spki],
                                extra_args=["--host-resolver-rules=MAP %s 127.0.0.1" % NAME])
    browser.start()
    try:
        deadline = time.monotonic() + 15
        attempts = 0
        while True:
            page = browser.new_page(isolated=True)
            attempts += 1
            try:
                page.navigate(url, timeout=20)
                return browser, page
            except DevToolsError as e:
                page.close()
                if time.monotonic() > deadline and attempts >= 2:
                    raise AssertionError("no page from %s over HTTP/3: %s\nQUIC closes: %s\nserver:\n%s"
                                         % (url, e, browser.quic_closes(), server.output()[-3000:]))
                time.sleep(0.3)
    except BaseException:
        browser.close()
        raise


@pytest.mark.skipif(not chromium.available(), reason="headless Chromium is the HTTP/3 client")
def test_http3_serves_the_acme_certificate_and_a_renewed_one_to_new_connections(start_server, acme_ca, tmp_path):
    port = free_udp_port()
    pebble = acme_ca(port, validity_seconds=45)
    server = start_server(APP, "--http3", *acme_options(pebble, port, tmp_path / "acme"))
    root = pebble.root()
    first = poll(lambda: try_handshake(port, NAME, cafile=root), timeout=ISSUANCE_TIMEOUT)
    assert first, server.output()[-4000:]
    origins = ["%s:%d" % (NAME, port), "127.0.0.1:%d" % port]
    # Chromium trusts nothing but the ACME certificate's key: a page over h3 means QUIC served that certificate,
    # for the name (SNI) and for the address, where Chromium sends no name and the first ACME name's certificate answers.
    browser, page = open_h3(spki_of(first, tmp_path), origins, "https://%s:%d/" % (NAME, port), server)
    try:
        assert page.protocol == "h3" and page.navigation_status in (200, None)
        assert page.fetch("/").text == "hello, tls"
        by_address = browser.new_page(isolated=True)
        by_address.navigate("https://127.0.0.1:%d/" % port, timeout=20)
        assert by_address.protocol == "h3"
    finally:
        browser.close()

    # A renewal brings a new key: a new connection over QUIC trusts only the new certificate.
    renewed = poll(lambda: (lambda der: der if der and serial_of(der) != serial_of(first) else None)(try_handshake(port, NAME, cafile=root)),
                   timeout=ISSUANCE_TIMEOUT)
    assert renewed, server.output()[-4000:]
    assert spki_of(renewed, tmp_path) != spki_of(first, tmp_path)
    browser, page = open_h3(spki_of(renewed, tmp_path), origins, "https://%s:%d/" % (NAME, port), server)
    try:
        assert page.protocol == "h3" and page.navigation_status in (200, None)
    finally:
        browser.close()
    # And the trust list does tell certificates apart: a browser that trusts only the old one fails now.
    with chromium.Chromium(force_quic=origins, spki_hashes=[spki_of(first, tmp_path)],
                           extra_args=["--host-resolver-rules=MAP %s 127.0.0.1" % NAME]) as old:
        with pytest.raises(DevToolsError, match="ERR_"):
            old.new_page(isolated=True).navigate("https://%s:%d/" % (NAME, port), timeout=20)
    assert "ACME: new certificate for test.example" in server.output()


@pytest.mark.parametrize("options, message", [
    (["--acme-domain", "192.0.2.1"], "is an IP address"),
    (["--acme-domain", "*.example.com"], "is a wildcard"),
    (["--acme-domain", "a..example.com"], "has an empty label"),
    (["--acme-email", "a@example.com"], "option '--acme-email' needs --acme-domain"),
    (["--acme-cache", "/proc/1/peregrine-acme", "--acme-domain", "example.com"], "option '--acme-cache'"),
    (["--acme-domain", "example.com", "--acme-directory", "http://ca.example/dir"], "is not an https URL"),
])
def test_a_bad_acme_option_is_one_line_and_status_2(options, message):
    code, out = run_cli(*options, APP)
    assert code == 2, out
    lines = [l for l in out.splitlines() if l.strip()]
    assert len(lines) == 1 and message in lines[0], out
