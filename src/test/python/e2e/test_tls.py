"""TLS end to end: certificates and SNI, ALPN, protocol versions, --tls-ciphers, bad inputs at
startup, --redirect-http, --hsts, --ktls, and certificate reloading on SIGHUP.

Every certificate is made here by the ``openssl`` command, signed by a private test CA that only
these tests trust; the clients are Python's ``ssl`` module (which shows what the handshake
chose: certificate, ALPN protocol, version, cipher), httpx, the ``h2`` library and ``websockets``.
Each certificate has a serial number of its own, which is how a test tells which one was served.

The reference servers have no equivalent of these options, so the whole module is Peregrine-only.
"""

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import warnings

import httpx
import pytest

from conftest import READY_TIMEOUT, RawConn, free_port, peregrine_cmd, poll, base_env, APPS_DIR

try:
    import h2.config
    import h2.connection
    import h2.events
except ImportError:  # the h2 library is in requirements.txt; a venv without it skips the HTTP/2 checks
    h2 = None

try:
    from websockets.sync.client import connect as ws_connect
except ImportError:  # CPython 3.13 on this machine has no websockets wheel
    ws_connect = None

pytestmark = pytest.mark.peregrine_only

needs_h2 = pytest.mark.skipif(h2 is None, reason="the h2 client library is not installed")
needs_websockets = pytest.mark.skipif(ws_connect is None, reason="the websockets client library is not installed")

APP = "tls_app:app"

# serial numbers: one per certificate, to tell from the client side which one the server chose
SERIALS = {
    "default": 0x1001,  # RSA 2048, PKCS#8 key; localhost and 127.0.0.1
    "rsa_traditional": 0x1002,  # RSA, "BEGIN RSA PRIVATE KEY"
    "ec": 0x1003,  # ECDSA P-256, "BEGIN EC PRIVATE KEY"
    "wild": 0x1004,  # *.wild.test
    "a": 0x1005,  # a.test, www.a.test
    "b": 0x1006,  # b.test
    "cn_only": 0x1007,  # no subjectAltName, CN cn-only.test
    "chain": 0x1008,  # chain.test, signed by an intermediate CA sent along in the chain file
    "reloaded": 0x1009,  # localhost and 127.0.0.1 again: what SIGHUP tests put in place
}

LOCAL_NAMES = "DNS:localhost,IP:127.0.0.1"


# ---------------------------------------------------------------------------
# Certificates


class Certs:
    """Paths of the generated files: certs.cert(name), certs.key(name), certs.ca, and broken inputs."""

    def __init__(self, directory):
        self.dir = directory
        self.ca = str(directory / "ca.pem")

    def cert(self, name):
        return str(self.dir / (name + ".pem"))

    def key(self, name):
        return str(self.dir / (name + ".key"))

    def pair(self, name):
        return ["--tls-cert", self.cert(name), "--tls-key", self.key(name)]


def _openssl(directory, *args, stdin=None):
    # An empty configuration, so that the system's openssl.cnf adds no extension of its own and
    # the certificates are exactly what the arguments say.
    env = dict(os.environ, OPENSSL_CONF=str(directory / "openssl.cnf"))
    proc = subprocess.run(
        ["openssl", *[str(a) for a in args]],
        cwd=str(directory),
        env=env,
        input=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        timeout=60,
    )
    if proc.returncode != 0:
        raise RuntimeError("openssl %s failed:\n%s" % (" ".join(map(str, args)), proc.stderr.decode(errors="replace")))
    return proc.stdout


def _sign(directory, name, csr, issuer, serial, extensions):
    ext = directory / (name + ".ext")
    ext.write_text("\n".join(extensions) + "\n")
    _openssl(
        directory, "x509", "-req", "-in", csr, "-CA", issuer + ".pem", "-CAkey", issuer + ".key",
        "-set_serial", serial, "-days", 30, "-sha256", "-extfile", ext, "-out", name + ".pem",
    )


def _leaf(directory, name, serial, cn, san, key_kind="rsa", issuer="ca"):
    """A server certificate for the key kind: rsa (PKCS#8), rsa-traditional, or ec (SEC1)."""
    if key_kind == "ec":
        _openssl(directory, "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", name + ".key")
    else:
        _openssl(directory, "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", name + ".key")
        if key_kind == "rsa-traditional":
            _openssl(directory, "rsa", "-in", name + ".key", "-traditional", "-out", name + ".key")
    _openssl(directory, "req", "-new", "-key", name + ".key", "-subj", "/CN=" + cn, "-out", name + ".csr")
    extensions = [
        "basicConstraints = critical, CA:FALSE",
        "keyUsage = critical, digitalSignature" + (", keyEncipherment" if key_kind != "ec" else ""),
        "extendedKeyUsage = serverAuth",
        "subjectKeyIdentifier = hash",
        "authorityKeyIdentifier = keyid:always",
    ]
    if san:
        extensions.append("subjectAltName = " + san)
    _sign(directory, name, name + ".csr", issuer, serial, extensions)


def make_root_ca(directory, common_name="Peregrine Test Root CA"):
    """A self-signed root, ca.pem and ca.key in directory, for _leaf and _sign to sign with."""
    (directory / "openssl.cnf").write_text("[req]\ndistinguished_name = dn\n[dn]\n")
    _openssl(
        directory, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", 30, "-sha256", "-set_serial", 1, "-subj", "/CN=" + common_name,
        "-addext", "basicConstraints = critical, CA:TRUE",
        "-addext", "keyUsage = critical, keyCertSign, cRLSign",
        "-addext", "subjectKeyIdentifier = hash",
    )


def make_certs(directory):
    make_root_ca(directory)
    _openssl(directory, "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "intermediate.key")
    _openssl(directory, "req", "-new", "-key", "intermediate.key", "-subj", "/CN=Peregrine Test Intermediate CA",
             "-out", "intermediate.csr")
    _sign(directory, "intermediate", "intermediate.csr", "ca", 2, [
        "basicConstraints = critical, CA:TRUE, pathlen:0",
        "keyUsage = critical, keyCertSign, cRLSign",
        "subjectKeyIdentifier = hash",
        "authorityKeyIdentifier = keyid:always",
    ])

    _leaf(directory, "default", SERIALS["default"], "default.test", LOCAL_NAMES)
    _leaf(directory, "rsa_traditional", SERIALS["rsa_traditional"], "localhost", LOCAL_NAMES, "rsa-traditional")
    _leaf(directory, "ec", SERIALS["ec"], "localhost", LOCAL_NAMES, "ec")
    _leaf(directory, "wild", SERIALS["wild"], "wild.test", "DNS:*.wild.test")
    _leaf(directory, "a", SERIALS["a"], "a.test", "DNS:a.test,DNS:www.a.test")
    _leaf(directory, "b", SERIALS["b"], "b.test", "DNS:b.test")
    _leaf(directory, "cn_only", SERIALS["cn_only"], "cn-only.test", None)
    _leaf(directory, "chain_leaf", SERIALS["chain"], "chain.test", "DNS:chain.test", issuer="intermediate")
    (directory / "chain.pem").write_bytes((directory / "chain_leaf.pem").read_bytes()
                                          + (directory / "intermediate.pem").read_bytes())
    shutil.copy(directory / "chain_leaf.key", directory / "chain.key")
    _leaf(directory, "reloaded", SERIALS["reloaded"], "localhost", LOCAL_NAMES)

    # broken inputs
    (directory / "not_pem.txt").write_text("this is not a PEM file\nat all\n")
    (directory / "empty.pem").write_bytes(b"")
    (directory / "corrupt.pem").write_text(
        "-----BEGIN CERTIFICATE-----\nnot*base64*at*all\n-----END CERTIFICATE-----\n")
    (directory / "corrupt.key").write_text(
        "-----BEGIN PRIVATE KEY-----\nnot*base64*at*all\n-----END PRIVATE KEY-----\n")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make the test certificates")
    directory = tmp_path_factory.mktemp("tls-certs")
    make_certs(directory)
    made = Certs(directory)
    # the file formats the tests claim to cover
    assert open(made.key("default")).read().startswith("-----BEGIN PRIVATE KEY-----")
    assert open(made.key("rsa_traditional")).read().startswith("-----BEGIN RSA PRIVATE KEY-----")
    assert open(made.key("ec")).read().startswith("-----BEGIN EC PRIVATE KEY-----")
    assert open(made.cert("chain")).read().count("BEGIN CERTIFICATE") == 2
    return made


# ---------------------------------------------------------------------------
# Clients


def client_context(certs, alpn=None, minimum=None, maximum=None, ciphers=None, check_hostname=True):
    """A client context trusting only the test CA."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(certs.ca)
    ctx.check_hostname = check_hostname
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # TLS 1.0/1.1 are deprecated: that is the point
        if minimum is not None:
            ctx.minimum_version = minimum
        if maximum is not None:
            ctx.maximum_version = maximum
    if ciphers is not None:
        ctx.set_ciphers(ciphers)
    if alpn is not None:
        ctx.set_alpn_protocols(alpn)
    return ctx


def tls_socket(port, ctx, server_hostname="localhost", timeout=10):
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        return ctx.wrap_socket(raw, server_hostname=server_hostname)
    except BaseException:
        raw.close()
        raise


class Handshake:
    """What the server chose in one handshake."""

    def __init__(self, sock):
        self.cert = sock.getpeercert()
        self.serial = int(self.cert["serialNumber"], 16)
        self.alpn = sock.selected_alpn_protocol()
        self.version = sock.version()
        self.cipher = sock.cipher()[0]
        self.subject = dict(item for rdn in self.cert["subject"] for item in rdn)
        self.san = [value for kind, value in self.cert.get("subjectAltName", ()) if kind == "DNS"]


def handshake(port, ctx, server_hostname="localhost"):
    with tls_socket(port, ctx, server_hostname) as sock:
        return Handshake(sock)


class TlsConn(RawConn):
    """RawConn (raw HTTP/1.x with framing) over a TLS connection."""

    def __init__(self, port, ctx, server_hostname="localhost", timeout=10):
        self.timeout = timeout
        self.sock = tls_socket(port, ctx, server_hostname, timeout)
        self.buf = bytearray()
        self.eof = False
        self.reset = False


def https_client(server, certs, **kwargs):
    # a fresh context each time: httpx sets the ALPN protocols on the context it is given
    kwargs.setdefault("timeout", 15)
    return httpx.Client(base_url="https://localhost:%d" % server.port, verify=client_context(certs), **kwargs)


def h2_request(port, certs, path, method="GET", authority="localhost", server_hostname="localhost"):
    """One request over HTTP/2 (ALPN h2) with the h2 library: (status, [(name, value)], body)."""
    ctx = client_context(certs, alpn=["h2"])
    with tls_socket(port, ctx, server_hostname) as sock:
        assert sock.selected_alpn_protocol() == "h2"
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        conn.initiate_connection()
        stream = conn.get_next_available_stream_id()
        conn.send_headers(
            stream,
            [(":method", method), (":path", path), (":scheme", "https"), (":authority", authority)],
            end_stream=True,
        )
        sock.sendall(conn.data_to_send())
        headers, body = None, bytearray()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                raise AssertionError("the server closed the HTTP/2 connection before the response ended")
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived) and event.stream_id == stream:
                    headers = list(event.headers)
                elif isinstance(event, h2.events.DataReceived) and event.stream_id == stream:
                    body += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, stream)
                elif isinstance(event, h2.events.StreamReset) and event.stream_id == stream:
                    raise AssertionError("stream reset by the server: error code %r" % event.error_code)
                elif isinstance(event, h2.events.ConnectionTerminated):
                    raise AssertionError("GOAWAY from the server: error code %r" % event.error_code)
                elif isinstance(event, h2.events.StreamEnded) and event.stream_id == stream:
                    status = int(dict(headers)[":status"])
                    return status, [(n, v) for n, v in headers if not n.startswith(":")], bytes(body)
            sock.sendall(conn.data_to_send())
        raise AssertionError("no complete HTTP/2 response within 10 s")


def header_values(headers, name):
    return [v for n, v in headers if n.lower() == name]


# ---------------------------------------------------------------------------
# Servers


def start_tls(start, certs, *options, target=APP, pairs=("default",)):
    args = []
    for name in pairs:
        args += certs.pair(name)
    return wait_tls_ready(start(target, *args, *options), certs)


def wait_tls_ready(server, certs):
    """Readiness by the fixtures is a TCP connect, which a supervisor (or a loaded machine) can
    accept well before a worker answers handshakes: wait for a first complete handshake."""

    def handshake_done():
        try:
            with tls_socket(server.port, client_context(certs, check_hostname=False), timeout=5):
                return True
        except (OSError, ssl.SSLError):
            return not server.running()  # a server that died is reported by the test's first request

    assert poll(handshake_done, timeout=READY_TIMEOUT, interval=0.2), "no TLS handshake within %.0f s" % READY_TIMEOUT
    return server


@pytest.fixture(scope="module")
def sni_server(start_module_server, certs):
    """Every certificate as a pair of its own; the first (default) is the default one."""
    return start_tls(start_module_server, certs, pairs=("default", "a", "b", "wild", "cn_only", "chain"))


@pytest.fixture(scope="module")
def hsts_server(start_module_server, certs):
    redirect_port = free_port()
    server = start_tls(start_module_server, certs, "--hsts", "3600", "--redirect-http", redirect_port)
    server.redirect_port = redirect_port
    return server


def run_to_exit(*args, timeout=READY_TIMEOUT):
    """Run Peregrine, expecting it to exit by itself: (exit status, stdout, stderr)."""
    argv = peregrine_cmd() + ["--port", str(free_port()), "--venv", sys.prefix] + [str(a) for a in args]
    proc = subprocess.Popen(
        argv, cwd=str(APPS_DIR), env=base_env(), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(
            "still running %.0f s after start instead of refusing %s:\n%s" % (timeout, args, (out + err).decode(errors="replace")[-3000:]))
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def assert_refused(args, *mentions):
    """Startup fails: exit status 2, one line on stderr naming each of `mentions`, no stack trace."""
    code, out, err = run_to_exit(*args)
    everything = out + err
    assert code == 2, "exit status %r for %s\n%s" % (code, args, everything[-3000:])
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, "expected one line on stderr, got:\n" + err
    for mention in mentions:
        if isinstance(mention, tuple):  # any one of these
            assert any(m in lines[0] for m in mention), (mention, lines[0])
        else:
            assert mention in lines[0], (mention, lines[0])
    for trace in ("Traceback", "\tat ", "Caused by:", "Exception in thread"):
        assert trace not in everything, everything[-3000:]
    # the line is for someone deploying a Python application: no Java class names
    assert "java." not in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------------------
# HTTPS requests and the application's view


def test_https_request_with_httpx_verifying_the_test_ca(sni_server, certs):
    with https_client(sni_server, certs) as client:
        response = client.get("/")
        assert response.status_code == 200
        assert response.text == "hello, tls"
        assert response.http_version == "HTTP/1.1"
        scope = client.get("/scope?x=1").json()
    assert scope["scheme"] == "https"
    assert scope["http_version"] == "1.1"
    assert scope["query_string"] == "x=1"


def test_plain_ip_connection_gets_the_default_certificate_and_http11(sni_server, certs):
    # no SNI (an IP address is never sent as a server name) and no ALPN: the default pair, HTTP/1.1
    with TlsConn(sni_server.port, client_context(certs), server_hostname="127.0.0.1") as conn:
        assert conn.sock.selected_alpn_protocol() is None
        assert int(conn.sock.getpeercert()["serialNumber"], 16) == SERIALS["default"]
        response = conn.request("GET", "/scope")
        assert response.status == 200
        assert response.json()["scheme"] == "https"
        # the connection stays usable for a second request
        assert conn.request("GET", "/").body == b"hello, tls"


def test_wsgi_url_scheme_is_https(start_server, certs):
    server = start_tls(start_server, certs, target="raw_wsgi:app")
    with https_client(server, certs) as client:
        response = client.get("/environ")
    assert response.status_code == 200
    environ = response.json()
    assert environ["wsgi.url_scheme"] == "https"
    assert environ["SERVER_PROTOCOL"] == "HTTP/1.1"


def test_certificate_chain_with_intermediate_is_sent_whole(sni_server, certs):
    # the client trusts only the root: the handshake verifies only if the intermediate came along
    info = handshake(sni_server.port, client_context(certs), "chain.test")
    assert info.serial == SERIALS["chain"]
    assert info.san == ["chain.test"]


# ---------------------------------------------------------------------------
# SNI


@pytest.mark.parametrize(
    "name, expected",
    [
        ("a.test", "a"),
        ("www.a.test", "a"),
        ("b.test", "b"),
        ("one.wild.test", "wild"),
        ("other.wild.test", "wild"),
        ("localhost", "default"),
    ],
)
def test_sni_picks_the_certificate_for_the_name(sni_server, certs, name, expected):
    info = handshake(sni_server.port, client_context(certs), name)  # check_hostname verifies the name too
    assert info.serial == SERIALS[expected], (name, info.subject, info.san)
    response_ctx = client_context(certs)
    with TlsConn(sni_server.port, response_ctx, server_hostname=name) as conn:
        response = conn.request("GET", "/")
    assert response.status == 200 and response.body == b"hello, tls"


def test_sni_falls_back_to_cn_when_there_is_no_subject_alt_name(sni_server, certs):
    # Python's hostname check ignores the CN, so this one checks the serial number only
    info = handshake(sni_server.port, client_context(certs, check_hostname=False), "cn-only.test")
    assert info.serial == SERIALS["cn_only"]
    assert info.subject["commonName"] == "cn-only.test"


@pytest.mark.parametrize(
    "name",
    [
        "unknown.test",
        "wild.test",  # *.wild.test does not cover wild.test itself
        "two.labels.wild.test",  # nor more than one label
        "a.test.evil",
        None,  # no SNI at all
    ],
)
def test_unknown_or_missing_server_name_gets_the_first_pair(sni_server, certs, name):
    ctx = client_context(certs, check_hostname=False)
    info = handshake(sni_server.port, ctx, name)
    assert info.serial == SERIALS["default"], (name, info.subject, info.san)


# ---------------------------------------------------------------------------
# ALPN


@pytest.mark.parametrize(
    "offered, chosen",
    [
        (["h2", "http/1.1"], "h2"),
        (["h2"], "h2"),
        (["http/1.1"], "http/1.1"),
        (None, None),
    ],
)
def test_alpn(sni_server, certs, offered, chosen):
    info = handshake(sni_server.port, client_context(certs, alpn=offered))
    assert info.alpn == chosen


@pytest.mark.parametrize("offered", [["acme-tls/1"], ["spdy/3.1", "h2c"]])
def test_alpn_offering_nothing_served_gets_the_no_application_protocol_alert(sni_server, certs, offered):
    """RFC 7301 3.2, rather than a handshake with no protocol that is then answered with HTTP/1.1."""
    with pytest.raises(ssl.SSLError, match="(?i)no.application.protocol"):
        handshake(sni_server.port, client_context(certs, alpn=offered))
    # the connection after it is served as usual
    assert handshake(sni_server.port, client_context(certs, alpn=["http/1.1"])).alpn == "http/1.1"


def test_alpn_http11_and_no_alpn_serve_http11(sni_server, certs):
    for offered in (["http/1.1"], None):
        with TlsConn(sni_server.port, client_context(certs, alpn=offered)) as conn:
            response = conn.request("GET", "/scope")
            assert response.version == "HTTP/1.1"
            assert response.json()["http_version"] == "1.1"


@needs_h2
def test_alpn_h2_serves_http2_with_https_scheme(sni_server, certs):
    status, headers, body = h2_request(sni_server.port, certs, "/scope")
    assert status == 200
    scope = json.loads(body)
    assert scope["scheme"] == "https"
    assert scope["http_version"] == "2"


@needs_h2  # httpx speaks HTTP/2 through it
def test_httpx_http2_over_tls(sni_server, certs):
    with https_client(sni_server, certs, http2=True) as client:
        response = client.get("/scope")
    assert response.http_version == "HTTP/2"
    assert response.json()["scheme"] == "https"


def test_no_http2_answers_alpn_with_http11(start_server, certs):
    server = start_tls(start_server, certs, "--no-http2")
    info = handshake(server.port, client_context(certs, alpn=["h2", "http/1.1"]))
    assert info.alpn == "http/1.1"
    with TlsConn(server.port, client_context(certs, alpn=["h2", "http/1.1"])) as conn:
        assert conn.request("GET", "/").body == b"hello, tls"


def test_http2_only_answers_alpn_with_h2(start_server, certs):
    server = start_tls(start_server, certs, "--http2-only")
    info = handshake(server.port, client_context(certs, alpn=["http/1.1", "h2"]))
    assert info.alpn == "h2"


# ---------------------------------------------------------------------------
# Protocol versions and ciphers


def _legacy_tls_possible(certs, version):
    """Whether this Python + OpenSSL can handshake at `version` at all (checked against a server of
    its own, in process): if not, a refusal by Peregrine would prove nothing."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(certs.cert("default"), certs.key("default"))
    client_ctx = legacy_client_context(certs, version)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            server_ctx.minimum_version = version
            server_ctx.maximum_version = version
            server_ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
        except (ValueError, ssl.SSLError):
            return False
    left, right = socket.socketpair()
    left.settimeout(5)
    right.settimeout(5)
    outcome = {}

    def serve():
        try:
            with server_ctx.wrap_socket(right, server_side=True) as s:
                outcome["server"] = s.version()
        except (ssl.SSLError, OSError) as e:
            outcome["server_error"] = e

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client_ctx.wrap_socket(left, server_hostname="localhost") as s:
            ok = s.version() is not None
    except (ssl.SSLError, OSError):
        ok = False
    finally:
        left.close()
        thread.join(10)
        right.close()
    return ok


def legacy_client_context(certs, version):
    ctx = client_context(certs, minimum=version, maximum=version)
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # OpenSSL 3 refuses the SHA-1 these versions need above level 0
    return ctx


@pytest.mark.parametrize("version", ["TLSv1", "TLSv1_1"])
def test_tls_10_and_11_refused(sni_server, certs, version):
    version = getattr(ssl.TLSVersion, version)
    if not _legacy_tls_possible(certs, version):
        pytest.skip("this Python/OpenSSL cannot handshake with %s even with itself" % version.name)
    with pytest.raises((ssl.SSLError, OSError)):
        handshake(sni_server.port, legacy_client_context(certs, version))
    # a client accepting up to TLS 1.1 (the downgrade a man in the middle would want) is refused as well
    ctx = client_context(certs, minimum=ssl.TLSVersion.TLSv1, maximum=ssl.TLSVersion.TLSv1_1)
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    with pytest.raises((ssl.SSLError, OSError)):
        handshake(sni_server.port, ctx)
    assert handshake(sni_server.port, client_context(certs)).serial == SERIALS["default"]


@pytest.mark.parametrize("version, name", [("TLSv1_2", "TLSv1.2"), ("TLSv1_3", "TLSv1.3")])
def test_tls_12_and_13_work(sni_server, certs, version, name):
    version = getattr(ssl.TLSVersion, version)
    ctx = client_context(certs, minimum=version, maximum=version)
    with TlsConn(sni_server.port, ctx) as conn:
        assert conn.sock.version() == name
        assert conn.request("GET", "/").body == b"hello, tls"


def test_a_default_client_gets_tls13(sni_server, certs):
    assert handshake(sni_server.port, client_context(certs)).version == "TLSv1.3"


ALLOWED_CIPHER = "ECDHE-RSA-AES128-GCM-SHA256"
OTHER_CIPHER = "ECDHE-RSA-AES256-GCM-SHA384"


def test_tls_ciphers_limits_tls12(start_server, certs):
    server = start_tls(start_server, certs, "--tls-ciphers", ALLOWED_CIPHER)
    tls12 = ssl.TLSVersion.TLSv1_2
    with pytest.raises((ssl.SSLError, OSError)):
        handshake(server.port, client_context(certs, minimum=tls12, maximum=tls12, ciphers=OTHER_CIPHER))
    ctx = client_context(certs, minimum=tls12, maximum=tls12, ciphers=ALLOWED_CIPHER)
    with TlsConn(server.port, ctx) as conn:
        assert conn.sock.cipher()[0] == ALLOWED_CIPHER
        assert conn.request("GET", "/").body == b"hello, tls"
    # a client offering both gets the allowed one
    both = client_context(certs, minimum=tls12, maximum=tls12, ciphers=OTHER_CIPHER + ":" + ALLOWED_CIPHER)
    assert handshake(server.port, both).cipher == ALLOWED_CIPHER
    # the list is for TLS 1.2: TLS 1.3 keeps its own suites
    assert handshake(server.port, client_context(certs)).version == "TLSv1.3"


# ---------------------------------------------------------------------------
# Key formats


@pytest.mark.parametrize("name", ["default", "rsa_traditional", "ec"])
def test_key_formats_start_and_serve(start_server, sni_server, certs, name):
    # the default pair (PKCS#8) is what sni_server already runs with
    server = sni_server if name == "default" else start_tls(start_server, certs, pairs=(name,))
    with TlsConn(server.port, client_context(certs)) as conn:
        assert int(conn.sock.getpeercert()["serialNumber"], 16) == SERIALS[name]
        assert conn.request("GET", "/").body == b"hello, tls"


def test_ec_certificate_negotiates_an_ecdsa_cipher_in_tls12(start_server, certs):
    server = start_tls(start_server, certs, pairs=("ec",))
    tls12 = ssl.TLSVersion.TLSv1_2
    info = handshake(server.port, client_context(certs, minimum=tls12, maximum=tls12))
    assert info.serial == SERIALS["ec"]
    assert "ECDSA" in info.cipher, info.cipher


# ---------------------------------------------------------------------------
# Bad inputs at startup


def bad_pairs(certs):
    d = certs.dir
    missing = str(d / "no-such-file.pem")
    return {
        # id: (options, what the line must name)
        "mismatched-key": (["--tls-cert", certs.cert("a"), "--tls-key", certs.key("b")],
                           [("--tls-cert", "--tls-key"), (certs.cert("a"), certs.key("b"))]),
        "mismatched-second-pair": (certs.pair("default") + ["--tls-cert", certs.cert("a"), "--tls-key", certs.key("b")],
                                   [("--tls-cert", "--tls-key"), (certs.cert("a"), certs.key("b"))]),
        "cert-not-pem": (["--tls-cert", str(d / "not_pem.txt"), "--tls-key", certs.key("default")],
                         ["--tls-cert", str(d / "not_pem.txt")]),
        "key-not-pem": (["--tls-cert", certs.cert("default"), "--tls-key", str(d / "not_pem.txt")],
                        ["--tls-key", str(d / "not_pem.txt")]),
        "cert-empty": (["--tls-cert", str(d / "empty.pem"), "--tls-key", certs.key("default")],
                       ["--tls-cert", str(d / "empty.pem")]),
        "key-empty": (["--tls-cert", certs.cert("default"), "--tls-key", str(d / "empty.pem")],
                      ["--tls-key", str(d / "empty.pem")]),
        "cert-corrupt-base64": (["--tls-cert", str(d / "corrupt.pem"), "--tls-key", certs.key("default")],
                                ["--tls-cert", str(d / "corrupt.pem")]),
        "key-corrupt-base64": (["--tls-cert", certs.cert("default"), "--tls-key", str(d / "corrupt.key")],
                               ["--tls-key", str(d / "corrupt.key")]),
        "cert-missing": (["--tls-cert", missing, "--tls-key", certs.key("default")], ["--tls-cert", missing]),
        "key-missing": (["--tls-cert", certs.cert("default"), "--tls-key", missing], ["--tls-key", missing]),
        "key-given-as-cert": (["--tls-cert", certs.key("default"), "--tls-key", certs.key("default")],
                              ["--tls-cert", certs.key("default")]),
        "cert-without-key": (["--tls-cert", certs.cert("default")], ["--tls-key"]),
        "key-without-cert": (["--tls-key", certs.key("default")], ["--tls-cert"]),
        "second-cert-without-key": (certs.pair("default") + ["--tls-cert", certs.cert("a")], ["--tls-key"]),
    }


BAD_PAIR_IDS = [
    "mismatched-key", "mismatched-second-pair", "cert-not-pem", "key-not-pem", "cert-empty", "key-empty",
    "cert-corrupt-base64", "key-corrupt-base64", "cert-missing", "key-missing", "key-given-as-cert",
    "cert-without-key", "key-without-cert", "second-cert-without-key",
]


@pytest.mark.parametrize("case", BAD_PAIR_IDS)
def test_bad_tls_input_exits_2_with_one_line(certs, case):
    options, mentions = bad_pairs(certs)[case]
    assert_refused(options + [APP], *mentions)


def test_an_ed25519_key_is_refused_at_startup(tmp_path):
    # such a pair loads, but netty-tcnative's BoringSSL then fails every handshake: refused with a reason instead
    cert, key = tmp_path / "ed.pem", tmp_path / "ed.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ed25519", "-nodes", "-subj", "/CN=localhost", "-days", "2",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    line = assert_refused(["--tls-cert", str(cert), "--tls-key", str(key), APP], "--tls-key", str(key))
    assert "RSA and ECDSA" in line, line


def test_bad_cipher_list_exits_2(certs):
    assert_refused(certs.pair("default") + ["--tls-ciphers", "NO-SUCH-CIPHER-AT-ALL", APP], "--tls-ciphers")


def test_ktls_is_refused_with_a_reason(certs):
    line = assert_refused(certs.pair("default") + ["--ktls", APP], "--ktls")
    assert "kernel" in line.lower(), line


def test_ktls_without_tls_is_refused_too():
    assert_refused(["--ktls", APP], "--ktls")


def test_redirect_http_without_tls_exits_2():
    assert_refused(["--redirect-http", str(free_port()), APP], "--redirect-http")


@pytest.mark.parametrize("value", ["3600", "0"])
def test_hsts_without_tls_exits_2(value):
    assert_refused(["--hsts", value, APP], "--hsts")


@pytest.mark.parametrize("value", ["-1", "soon"])
def test_bad_hsts_value_exits_2(certs, value):
    assert_refused(certs.pair("default") + ["--hsts=" + value, APP], "--hsts")


# ---------------------------------------------------------------------------
# --redirect-http


def redirect_conn(server):
    # the redirect listener may bind a moment after the TLS port
    assert poll(lambda: _connectable(server.redirect_port), timeout=10), "nothing listens on --redirect-http"
    return RawConn(server.redirect_port)


def _connectable(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.mark.parametrize(
    "method, status",
    [("GET", 301), ("HEAD", 301), ("POST", 308), ("PUT", 308), ("DELETE", 308), ("PATCH", 308), ("OPTIONS", 308)],
)
def test_redirect_status_by_method(hsts_server, method, status):
    with redirect_conn(hsts_server) as conn:
        body = b"x=1" if method in ("POST", "PUT", "PATCH") else b""
        conn.send_request(method, "/some/path?q=1&r=two", body=body, host="example.test")
        response = conn.read_response(method)
    assert response.status == status, response
    assert response.header("location") == "https://example.test:%d/some/path?q=1&r=two" % hsts_server.port


@pytest.mark.parametrize(
    "host, location_host",
    [
        ("example.test:8080", "example.test"),  # the port of the Host header is dropped
        ("Example.TEST", "Example.TEST"),
        ("127.0.0.1:%d", "127.0.0.1"),
        ("[::1]:8080", "[::1]"),
    ],
)
def test_redirect_location_host(hsts_server, host, location_host):
    if "%d" in host:
        host = host % hsts_server.redirect_port
    with redirect_conn(hsts_server) as conn:
        conn.send_request("GET", "/", host=host)
        response = conn.read_response()
    assert response.status == 301
    assert response.header("location") == "https://%s:%d/" % (location_host, hsts_server.port)


def test_redirect_keeps_the_raw_path_and_query(hsts_server):
    target = "/a%20b/c%2Fd?x=%41&empty=&flag"
    with redirect_conn(hsts_server) as conn:
        conn.send_request("GET", target, host="example.test")
        response = conn.read_response()
    assert response.status == 301
    assert response.header("location") == "https://example.test:%d%s" % (hsts_server.port, target)


def test_redirect_followed_by_httpx_reaches_the_https_port(hsts_server, certs):
    with httpx.Client(verify=client_context(certs), follow_redirects=True, timeout=15) as client:
        response = client.get("http://localhost:%d/scope?from=plain" % hsts_server.redirect_port)
    assert response.status_code == 200
    assert str(response.url) == "https://localhost:%d/scope?from=plain" % hsts_server.port
    assert response.json()["scheme"] == "https"
    assert [r.status_code for r in response.history] == [301]


@pytest.mark.parametrize("version", ["HTTP/1.1", "HTTP/1.0"])
def test_redirect_without_host_is_400(hsts_server, version):
    with redirect_conn(hsts_server) as conn:
        conn.send_request("GET", "/path", version=version, host=None)
        response = conn.read_response()
    assert response.status == 400, response
    assert response.header("location") is None


def test_redirect_response_carries_no_hsts(hsts_server):
    # RFC 6797 7.2: never over plain HTTP
    with redirect_conn(hsts_server) as conn:
        conn.send_request("GET", "/", host="example.test")
        response = conn.read_response()
    assert response.status == 301
    assert response.header("strict-transport-security") is None


def test_redirect_port_is_not_the_application(hsts_server):
    # even the paths the application would answer are redirected
    for path in ("/", "/scope", "/own-hsts"):
        with redirect_conn(hsts_server) as conn:
            conn.send_request("GET", path, host="example.test")
            response = conn.read_response()
        assert response.status == 301
        assert response.header("location") == "https://example.test:%d%s" % (hsts_server.port, path)


def test_redirect_to_443_has_no_port(start_server, certs):
    # needs to bind 443, which only works as root (or with the capability) and when nobody has it
    try:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(("127.0.0.1", 443))
    except OSError as e:
        pytest.skip("cannot bind 127.0.0.1:443 here (%s)" % e)
    redirect_port = free_port()
    server = start_tls(start_server, certs, "--port", "443", "--host", "127.0.0.1", "--redirect-http", redirect_port)
    server.redirect_port = redirect_port
    with redirect_conn(server) as conn:
        conn.send_request("GET", "/x?y=1", host="example.test:%d" % redirect_port)
        response = conn.read_response()
    assert response.status == 301
    assert response.header("location") == "https://example.test/x?y=1"


# ---------------------------------------------------------------------------
# --hsts


def test_hsts_on_https_http11(hsts_server, certs):
    with TlsConn(hsts_server.port, client_context(certs, alpn=["http/1.1"])) as conn:
        for method, path, status in (("GET", "/", 200), ("HEAD", "/", 200), ("GET", "/missing", 404)):
            response = conn.request(method, path)
            assert response.status == status
            assert response.header_all("strict-transport-security") == ["max-age=3600"], response.headers


def test_hsts_not_duplicated_when_the_app_sets_it_http11(hsts_server, certs):
    with https_client(hsts_server, certs) as client:
        response = client.get("/own-hsts")
    assert response.status_code == 200
    assert response.headers.get_list("strict-transport-security") == ["max-age=60; includeSubDomains"]


@needs_h2
def test_hsts_on_https_h2(hsts_server, certs):
    for path, status in (("/", 200), ("/missing", 404)):
        got_status, headers, _ = h2_request(hsts_server.port, certs, path)
        assert got_status == status
        assert header_values(headers, "strict-transport-security") == ["max-age=3600"], headers


@needs_h2
def test_hsts_not_duplicated_when_the_app_sets_it_h2(hsts_server, certs):
    status, headers, body = h2_request(hsts_server.port, certs, "/own-hsts")
    assert status == 200 and body == b"own hsts"
    assert header_values(headers, "strict-transport-security") == ["max-age=60; includeSubDomains"], headers


def test_hsts_with_curl_http2(hsts_server):
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    proc = subprocess.run(
        ["curl", "--http2", "-k", "-sS", "-I", "-o", "/dev/null", "-D", "-", "-w", "%{http_version}\n",
         "https://127.0.0.1:%d/" % hsts_server.port],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20,
    )
    out = proc.stdout.decode("latin-1")
    assert proc.returncode == 0, proc.stderr
    assert out.rstrip().splitlines()[-1] == "2", out
    assert [line.split(":", 1)[1].strip() for line in out.splitlines()
            if line.lower().startswith("strict-transport-security:")] == ["max-age=3600"], out


def test_no_hsts_without_the_option(sni_server, certs):
    with https_client(sni_server, certs) as client:
        assert "strict-transport-security" not in client.get("/").headers


# ---------------------------------------------------------------------------
# WebSocket over TLS


@needs_websockets
def test_websocket_over_tls(sni_server, certs):
    with ws_connect("wss://localhost:%d/ws" % sni_server.port, ssl=client_context(certs), open_timeout=10) as ws:
        first = json.loads(ws.recv(timeout=10))
        assert first["scheme"] == "wss"
        ws.send("ping over tls")
        assert ws.recv(timeout=10) == "echo: ping over tls"


# ---------------------------------------------------------------------------
# Hostile or confused clients


@pytest.mark.parametrize(
    "payload",
    [
        b"\x00" * 64,
        b"\xff" * 300,
        # a handshake record holding a ClientHello cut short inside its random
        b"\x16\x03\x01\x00\x08\x01\x00\x00\x04\x03\x03\x00\x00",
        # a handshake record announcing 65535 bytes, far beyond the 2^14 (+2048) a record may hold
        b"\x16\x03\x01\xff\xff" + b"\x01" * 16,
    ],
    ids=["zeros", "ff", "truncated-client-hello", "oversized-record"],
)
def test_garbage_instead_of_client_hello_is_closed(sni_server, certs, payload):
    with RawConn(sni_server.port) as conn:
        conn.send(payload)
        data = conn.read_until_close(timeout=10)
    # nothing but (perhaps) a TLS alert record
    assert data == b"" or data[:1] == b"\x15", data[:100]
    assert handshake(sni_server.port, client_context(certs)).serial == SERIALS["default"]
    with https_client(sni_server, certs) as client:
        assert client.get("/").status_code == 200


def test_plain_http_to_the_tls_port_is_closed_or_refused(sni_server, certs):
    with RawConn(sni_server.port) as conn:
        conn.send_request("GET", "/", host="localhost")
        data = conn.read_until_close(timeout=10)
    # closed, a TLS alert, or an HTTP error; never the application's answer
    assert data == b"" or data[:1] == b"\x15" or data.startswith(b"HTTP/1.1 4") or data.startswith(b"HTTP/1.0 4"), data[:200]
    assert b"hello, tls" not in data
    with https_client(sni_server, certs) as client:
        assert client.get("/").text == "hello, tls"


def test_client_that_closes_midway_through_the_handshake(sni_server, certs):
    # a real ClientHello, then the client goes away before finishing
    ctx = client_context(certs)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    hello = outgoing.read()
    assert hello[:1] == b"\x16"
    for _ in range(5):
        with RawConn(sni_server.port) as conn:
            conn.send(hello)
            assert conn.read_some(timeout=10)[:1] == b"\x16"  # the ServerHello
    assert handshake(sni_server.port, client_context(certs)).serial == SERIALS["default"]


@pytest.mark.parametrize("payload", [b"", b"\x16\x03\x01\x00\x50\x01"], ids=["nothing", "part-of-a-hello"])
def test_stalled_handshake_is_closed_after_the_request_timeout(start_server, certs, payload):
    server = start_tls(start_server, certs, "--request-timeout", "1000")
    with RawConn(server.port) as conn:
        if payload:
            conn.send(payload)
        conn.expect_closed(timeout=10)
    assert handshake(server.port, client_context(certs)).serial == SERIALS["default"]


# ---------------------------------------------------------------------------
# SIGHUP: certificates read again


def _copy_pair(certs, name, cert_path, key_path):
    # each file is replaced whole (written aside, then renamed), as a deploy hook would
    for source, target in ((certs.cert(name), cert_path), (certs.key(name), key_path)):
        staging = str(target) + ".new"
        shutil.copy(source, staging)
        os.replace(staging, target)


class NewConnectionLoad:
    """Opens a new TLS connection per request in a thread, recording failures and serials seen."""

    def __init__(self, port, certs):
        self.port = port
        self.certs = certs
        self.failures = []
        self.serials = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopped.set()
        self.thread.join(20)

    def _run(self):
        ctx = client_context(self.certs)
        while not self.stopped.is_set():
            try:
                with TlsConn(self.port, ctx) as conn:
                    serial = int(conn.sock.getpeercert()["serialNumber"], 16)
                    response = conn.request("GET", "/", headers=[("Connection", "close")])
                    if response.status != 200:
                        self.failures.append("status %d" % response.status)
                    self.serials.append(serial)
            except Exception as e:  # noqa: BLE001 -- every failure is what the test reports
                self.failures.append(repr(e))
            time.sleep(0.01)


def _served_serial(port, certs):
    return handshake(port, client_context(certs)).serial


def test_sighup_reloads_the_certificate_in_place(start_server, certs, tmp_path):
    cert_path, key_path = tmp_path / "live.pem", tmp_path / "live.key"
    _copy_pair(certs, "default", cert_path, key_path)
    server = wait_tls_ready(start_server(APP, "--tls-cert", cert_path, "--tls-key", key_path), certs)
    assert _served_serial(server.port, certs) == SERIALS["default"]

    established = TlsConn(server.port, client_context(certs))
    try:
        assert established.request("GET", "/").status == 200
        with NewConnectionLoad(server.port, certs) as load:
            assert poll(lambda: len(load.serials) >= 5, timeout=10)
            _copy_pair(certs, "reloaded", cert_path, key_path)
            os.kill(server.proc.pid, signal.SIGHUP)
            assert poll(lambda: _served_serial(server.port, certs) == SERIALS["reloaded"], timeout=15), \
                server.output()[-3000:]
            seen = len(load.serials)
            assert poll(lambda: len(load.serials) >= seen + 5, timeout=10)
        assert load.failures == [], load.failures[:5]
        assert load.serials[0] == SERIALS["default"]
        # once the new certificate is served, no new connection gets the old one again
        first_new = load.serials.index(SERIALS["reloaded"])
        assert set(load.serials[first_new:]) == {SERIALS["reloaded"]}
        # the connection made before keeps its certificate and still works
        assert int(established.sock.getpeercert()["serialNumber"], 16) == SERIALS["default"]
        assert established.request("GET", "/").body == b"hello, tls"
    finally:
        established.close()
    assert server.running()


def test_sighup_with_workers_serves_the_new_certificate(start_server, certs, tmp_path):
    cert_path, key_path = tmp_path / "live.pem", tmp_path / "live.key"
    _copy_pair(certs, "default", cert_path, key_path)
    server = wait_tls_ready(start_server(APP, "--workers", "2", "--tls-cert", cert_path, "--tls-key", key_path), certs)
    assert _served_serial(server.port, certs) == SERIALS["default"]
    with NewConnectionLoad(server.port, certs) as load:
        _copy_pair(certs, "reloaded", cert_path, key_path)
        os.kill(server.proc.pid, signal.SIGHUP)

        def every_worker_replaced():
            # several connections in a row, so that both workers had their turn
            return all(_served_serial(server.port, certs) == SERIALS["reloaded"] for _ in range(8))

        assert poll(every_worker_replaced, timeout=30, interval=0.2), server.output()[-3000:]
    assert load.failures == [], load.failures[:5]
    assert server.running()
