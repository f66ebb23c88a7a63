"""HTTP/2 (issue 5): h2c with prior knowledge on the plain port and h2 over TLS (ALPN).

Clients: the h2 library over a raw socket (H2Client below), raw frames written
with hyperframe where h2 will not misbehave on purpose (FrameConn: floods, the
first bytes of the server), curl, nghttp and h2load.

Applications: apps/h2_app.py (raw ASGI; every raw_asgi route plus the ones this
file needs: patterned downloads, uploads read slowly or not at all, barriers,
receive() recorders), raw_wsgi, Starlette, and FastAPI / Flask under CPython
3.11 (no 3.13 wheels on this machine's mirror: those tests skip there).

Every test is peregrine_only: the reference servers (uvicorn, gunicorn) do not
speak HTTP/2.
"""

import hashlib
import json
import os
import select
import shutil
import socket
import ssl
import subprocess
import threading
import time
import uuid

import pytest

pytest.importorskip("h2", reason="the h2 package (src/test/python/requirements.txt) is not installed")

import hpack  # noqa: E402
from h2.config import H2Configuration  # noqa: E402
from h2.connection import ConnectionInputs, ConnectionState, H2Connection  # noqa: E402
from h2.errors import ErrorCodes  # noqa: E402
from h2.events import (  # noqa: E402
    ConnectionTerminated,
    DataReceived,
    InformationalResponseReceived,
    PingAckReceived,
    RemoteSettingsChanged,
    ResponseReceived,
    SettingsAcknowledged,
    StreamEnded,
    StreamReset,
    TrailersReceived,
    WindowUpdated,
)
from h2.exceptions import StreamClosedError  # noqa: E402
from h2.settings import SettingCodes, Settings  # noqa: E402
from hyperframe.frame import (  # noqa: E402
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PriorityFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

from conftest import assert_clean_exit, poll, settled  # noqa: E402

pytestmark = pytest.mark.peregrine_only  # uvicorn and gunicorn do not speak HTTP/2

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DEFAULT_WINDOW = 65535
MiB = 1024 * 1024


def pattern(size):
    """What h2_app's /download sends: numbered 8-byte lines."""
    return b"".join(b"%07d\n" % i for i in range(size // 8 + 1))[:size]


def wsgi_file_bytes(size):
    """What raw_wsgi's /file sends."""
    return bytes(i % 251 for i in range(size))


# ---------------------------------------------------------------------------
# h2 client over a socket


class Stream:
    """What one stream received."""

    def __init__(self, stream_id):
        self.id = stream_id
        self.headers = None
        self.informational = []
        self.data = bytearray()
        self.data_frames = 0
        self.trailers = None
        self.ended = False
        self.reset_code = None

    @property
    def done(self):
        return self.ended or self.reset_code is not None

    @property
    def status(self):
        value = self.header(":status")
        return int(value) if value is not None else None

    def header(self, name):
        values = self.header_all(name)
        return ", ".join(values) if values else None

    def header_all(self, name):
        return [v for n, v in self.headers or () if n == name]

    def json(self):
        return json.loads(bytes(self.data))

    def __repr__(self):
        return "<Stream %d status=%s ended=%s reset=%s data=%r>" % (
            self.id, self.status, self.ended, self.reset_code, bytes(self.data[:200]))


def tolerate_graceful_goaway(conn):
    # h2 moves the whole connection to CLOSED on any GOAWAY and then raises on
    # the DATA still due on streams at or below its last-stream-id, which RFC
    # 9113 6.8 lets the server finish (the drain tests need exactly that).
    machine = conn.state_machine
    machine._transitions = dict(machine._transitions)
    for state in (ConnectionState.IDLE, ConnectionState.CLIENT_OPEN):
        machine._transitions[(state, ConnectionInputs.RECV_GOAWAY)] = (None, state)


class H2Client:
    """One HTTP/2 client connection (h2c prior knowledge, or h2 over TLS when
    `tls` is an ssl.SSLContext).

    `settings` are sent in the client's first SETTINGS frame.  `on_data` decides
    what happens to received DATA: "ack" (the default) gives the window back at
    once, None leaves it to the test (ack()), a callable(stream, event) is
    called instead.  h2 itself fails the test (FlowControlError) if the server
    sends beyond a window."""

    def __init__(self, port, tls=None, settings=None, on_data="ack", timeout=10, authority=None):
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.alpn = None
        if tls is not None:
            sock = tls.wrap_socket(sock, server_hostname="localhost")
            self.alpn = sock.selected_alpn_protocol()
        self.sock = sock
        self.timeout = timeout
        self.scheme = "https" if tls is not None else "http"
        self.authority = authority or "127.0.0.1:%d" % port
        self.on_data = on_data
        self.streams = {}
        self.goaways = []
        self.window_updates = []  # (stream id, increment) as received
        self.remote_settings_frames = 0
        self.settings_acks = 0
        self.ping_acks = []
        self.closed = False
        self.broken = False
        self.conn = H2Connection(H2Configuration(client_side=True, header_encoding="utf-8"))
        tolerate_graceful_goaway(self.conn)
        initial = {SettingCodes.MAX_CONCURRENT_STREAMS: 100, SettingCodes.MAX_HEADER_LIST_SIZE: 65536}
        initial.update(settings or {})
        self.conn.local_settings = Settings(client=True, initial_values=initial)
        self.conn.initiate_connection()
        self.flush()
        self.wait_for(lambda: self.remote_settings_frames and self.settings_acks, what="the server's SETTINGS and its ACK of ours")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if not self.closed:
            try:
                self.conn.close_connection()
                self.flush()
            except Exception:
                pass
        try:
            self.sock.close()
        except OSError:
            pass
        self.closed = True

    # -- wire ---------------------------------------------------------------
    def flush(self):
        data = self.conn.data_to_send()
        if data and not self.closed and not self.broken:
            try:
                self.sock.sendall(data)
            except OSError:
                # what the server sent before closing (a GOAWAY) may still be
                # waiting to be read: only the reading side decides `closed`
                self.broken = True

    def pump(self, timeout=0.5):
        """Handle what arrives within timeout (0: only what is already
        there); False once the server has closed the connection."""
        if self.closed:
            return False
        if timeout <= 0:
            pending = isinstance(self.sock, ssl.SSLSocket) and self.sock.pending()
            if not pending and not select.select([self.sock], [], [], 0)[0]:
                return True
            timeout = 0.5
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1 << 20)
        except (socket.timeout, ssl.SSLWantReadError):
            return True
        except (ConnectionError, ssl.SSLError, OSError):
            data = b""
        if not data:
            self.closed = True
            return False
        for event in self.conn.receive_data(data):
            self._handle(event)
        self.flush()
        return True

    def _stream(self, stream_id):
        stream = self.streams.get(stream_id)
        if stream is None:
            stream = self.streams[stream_id] = Stream(stream_id)
        return stream

    def _handle(self, event):
        if isinstance(event, ResponseReceived):
            self._stream(event.stream_id).headers = event.headers
        elif isinstance(event, InformationalResponseReceived):
            self._stream(event.stream_id).informational.append(event.headers)
        elif isinstance(event, DataReceived):
            stream = self._stream(event.stream_id)
            stream.data += event.data
            stream.data_frames += 1
            if self.on_data == "ack":
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif callable(self.on_data):
                self.on_data(stream, event)
        elif isinstance(event, TrailersReceived):
            self._stream(event.stream_id).trailers = event.headers
        elif isinstance(event, StreamEnded):
            self._stream(event.stream_id).ended = True
        elif isinstance(event, StreamReset):
            self._stream(event.stream_id).reset_code = event.error_code
        elif isinstance(event, ConnectionTerminated):
            self.goaways.append(event)
        elif isinstance(event, RemoteSettingsChanged):
            self.remote_settings_frames += 1
        elif isinstance(event, SettingsAcknowledged):
            self.settings_acks += 1
        elif isinstance(event, WindowUpdated):
            self.window_updates.append((event.stream_id, event.delta))
        elif isinstance(event, PingAckReceived):
            self.ping_acks.append(event.ping_data)

    def wait_for(self, predicate, timeout=None, what="a condition"):
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            if predicate():
                return
            if self.closed:
                raise AssertionError("the server closed the connection while waiting for %s (GOAWAYs: %r)" % (what, self.goaways))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError("timed out waiting for %s; streams: %r" % (what, self.streams))
            self.pump(min(remaining, 0.5))

    def quiet(self, seconds):
        """Handle whatever arrives during `seconds`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.pump(deadline - time.monotonic()):
            pass

    # -- requests -----------------------------------------------------------
    def request(self, method="GET", path="/", headers=(), body=None, end_stream=True, authority=None):
        stream_id = self.conn.get_next_available_stream_id()
        self.streams[stream_id] = Stream(stream_id)
        fields = [(":method", method), (":scheme", self.scheme), (":authority", authority or self.authority), (":path", path)]
        self.conn.send_headers(stream_id, fields + list(headers), end_stream=end_stream and body is None)
        self.flush()
        if body is not None:
            self.send_body(stream_id, body, end_stream=end_stream)
        return stream_id

    def send_body(self, stream_id, data, end_stream=True, stall=None, timeout=20):
        """Send data as the windows allow.  With stall=S, give up once the
        window has stayed shut for S seconds; returns the bytes sent."""
        stream = self.streams[stream_id]
        if not data:
            if end_stream:
                self.conn.end_stream(stream_id)
                self.flush()
            return 0
        deadline = time.monotonic() + timeout
        pos = 0
        while pos < len(data) and stream.reset_code is None and not self.closed and not self.broken:
            try:
                window = min(self.conn.local_flow_control_window(stream_id), self.conn.max_outbound_frame_size)
            except StreamClosedError:
                break
            if window <= 0:
                shut_since = time.monotonic()
                while True:
                    if self.closed or self.broken or stream.reset_code is not None:
                        return pos
                    try:
                        if self.conn.local_flow_control_window(stream_id) > 0:
                            break
                    except StreamClosedError:
                        return pos
                    now = time.monotonic()
                    if stall is not None and now - shut_since >= stall:
                        return pos
                    if now > deadline:
                        raise AssertionError("the window of stream %d stayed shut; %d of %d bytes sent" % (stream_id, pos, len(data)))
                    self.pump(0.2)
                continue
            piece = data[pos:pos + window]
            try:
                self.conn.send_data(stream_id, piece, end_stream=end_stream and pos + len(piece) == len(data))
            except StreamClosedError:
                break
            pos += len(piece)
            self.flush()
            self.pump(0)
        return pos

    def ack(self, stream_id, size):
        self.conn.acknowledge_received_data(size, stream_id)
        self.flush()

    def reset(self, stream_id, code=ErrorCodes.CANCEL):
        self.conn.reset_stream(stream_id, code)
        self.flush()

    def response(self, stream_id, timeout=None):
        stream = self.streams[stream_id]
        self.wait_for(lambda: stream.done, timeout, "the response on stream %d" % stream_id)
        return stream

    def get(self, path, headers=(), timeout=None, **kwargs):
        return self.response(self.request("GET", path, headers, **kwargs), timeout)

    def post(self, path, body, headers=(), timeout=None, **kwargs):
        return self.response(self.request("POST", path, headers, body=body, **kwargs), timeout)

    def acked_on(self, stream_id):
        return sum(delta for sid, delta in self.window_updates if sid == stream_id)


# ---------------------------------------------------------------------------
# raw frames


class FrameConn:
    """Raw HTTP/2 frames over a socket, for what h2 will not send (floods),
    and to see the server's very first bytes.  A reader thread collects the
    server's frames as they come, so a GOAWAY written just before the server
    closes is seen even while a flood is still being written."""

    def __init__(self, port, timeout=10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.frames = []
        self.raw = bytearray()
        self.eof = False
        self.broken = False
        self._stop = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._stop = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self._reader.join(5)

    def _read(self):
        buf = bytearray()
        while not self._stop:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                data = b""
            if not data:
                self.eof = True
                return
            self.raw += data
            buf += data
            while len(buf) >= 9:
                frame, length = Frame.parse_frame_header(memoryview(bytes(buf[:9])))
                if len(buf) < 9 + length:
                    break
                frame.parse_body(memoryview(bytes(buf[9:9 + length])))
                del buf[:9 + length]
                self.frames.append(frame)

    def send(self, data):
        """False once the server no longer takes bytes."""
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            self.broken = True
            return False

    def wait(self, predicate, timeout=10.0):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def goaway(self):
        return next((f for f in self.frames if isinstance(f, GoAwayFrame)), None)


def request_block(encoder, path="/", port=0, extra=()):
    return encoder.encode(
        [(":method", "GET"), (":scheme", "http"), (":authority", "127.0.0.1:%d" % port), (":path", path)] + list(extra)
    )


# ---------------------------------------------------------------------------
# servers


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A throwaway self-signed certificate for localhost and 127.0.0.1: (cert, key) paths."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-days", "2",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=30,
    )
    return str(cert), str(key)


def tls_options(certificate):
    return ["--tls-cert", certificate[0], "--tls-key", certificate[1]]


def tls_context(certificate, alpn=("h2",)):
    ctx = ssl.create_default_context(cafile=certificate[0])
    ctx.set_alpn_protocols(list(alpn))
    return ctx


CONFIGS = {
    # name: (target, options, needs TLS)
    "asgi": ("h2_app:app", ["--health-check-path", "/healthz", "--access-log"], False),
    "wsgi": ("raw_wsgi:app", ["--wsgi-threads", "4"], False),
    "asgi-tls": ("h2_app:app", [], True),
    "wsgi-tls": ("raw_wsgi:app", ["--wsgi-threads", "4"], True),
    "starlette": ("starlette_app:app", [], False),
    "fastapi": ("fastapi_app:app", [], False),
    "flask": ("flask_app:app", [], False),
    # the limits and the JSON access log share servers, to save start-ups
    "asgi-limits": ("h2_app:app", ["--max-body", "1000", "--max-header-size", "8192", "--access-log-format", "json"], False),
    "wsgi-limits": ("raw_wsgi:app", ["--max-body", "1000"], False),
}


class Served:
    """served(name) -> (server, tls context or None); started on first use,
    shared by the module's tests (restarted if it died)."""

    def __init__(self, factory, certificate):
        self.factory = factory
        self.certificate = certificate
        self.cache = {}

    def __call__(self, name):
        target, options, tls = CONFIGS[name]
        server = self.cache.get(name)
        if server is None or not server.running():
            if name == "fastapi":
                pytest.importorskip("fastapi", reason="FastAPI has no wheels for this CPython on this machine's mirror")
            if name == "flask":
                pytest.importorskip("flask", reason="Flask has no wheels for this CPython on this machine's mirror")
            extra = tls_options(self.certificate) if tls else []
            server = self.cache[name] = self.factory(target, *(options + extra))
        return server, (tls_context(self.certificate) if tls else None)

    def client(self, name, **kwargs):
        server, ctx = self(name)
        return H2Client(server.port, tls=ctx, **kwargs)


@pytest.fixture(scope="module")
def served(start_module_server, certificate):
    return Served(start_module_server, certificate)


def result(client, key):
    r = client.get("/result?id=" + key)
    assert r.status == 200, r
    return r.json()


# ---------------------------------------------------------------------------
# connection preface and SETTINGS


def test_server_preface_is_a_settings_frame_with_the_advertised_values(served):
    server, _ = served("asgi")
    with FrameConn(server.port) as fc:
        assert fc.send(PREFACE + SettingsFrame(0).serialize())
        assert fc.wait(lambda: fc.frames), "no frame within 10 s of the preface (got %r)" % bytes(fc.raw[:100])
        first = fc.frames[0]
        assert isinstance(first, SettingsFrame) and first.stream_id == 0 and "ACK" not in first.flags, first
        settings = first.settings
        assert settings.get(SettingCodes.MAX_CONCURRENT_STREAMS) == 100, settings
        assert settings.get(SettingCodes.INITIAL_WINDOW_SIZE, DEFAULT_WINDOW) == DEFAULT_WINDOW, settings
        assert settings.get(SettingCodes.MAX_HEADER_LIST_SIZE) == 32 * 1024, settings
        # and it acknowledges the client's SETTINGS
        assert fc.wait(lambda: any(isinstance(f, SettingsFrame) and "ACK" in f.flags for f in fc.frames)), fc.frames
        assert fc.goaway() is None, fc.goaway()
        assert not fc.eof


def test_max_header_size_is_the_advertised_header_list_size(served):
    with served.client("asgi-limits") as c:
        assert c.conn.remote_settings.max_header_list_size == 8192
        assert c.conn.remote_settings.max_concurrent_streams == 100
        assert c.get("/").status == 200


def test_h2c_prior_knowledge_hello_and_ping(served):
    with served.client("asgi") as c:
        assert c.alpn is None
        assert c.conn.remote_settings.max_concurrent_streams == 100
        assert c.conn.remote_settings.initial_window_size == DEFAULT_WINDOW
        assert c.conn.remote_settings.max_header_list_size == 32 * 1024
        r = c.get("/")
        assert r.status == 200
        assert bytes(r.data) == b"hello, asgi"
        assert r.header("content-length") == "11"
        c.conn.ping(b"peregrin")
        c.flush()
        c.wait_for(lambda: c.ping_acks, what="the PING ACK")
        assert c.ping_acks == [b"peregrin"]
        # the connection stays usable
        assert bytes(c.get("/").data) == b"hello, asgi"


def test_tls_alpn_h2(served):
    with served.client("asgi-tls") as c:
        assert c.alpn == "h2"
        r = c.get("/")
        assert r.status == 200 and bytes(r.data) == b"hello, asgi"


def test_tls_client_without_h2_in_alpn_gets_http11(served, certificate):
    server, _ = served("asgi-tls")
    ctx = tls_context(certificate, alpn=("http/1.1",))
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            assert s.selected_alpn_protocol() == "http/1.1"
            s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                more = s.recv(65536)
                if not more:
                    break
                data += more
    assert data.startswith(b"HTTP/1.1 200"), data[:200]
    assert data.endswith(b"hello, asgi"), data[-200:]


# ---------------------------------------------------------------------------
# multiplexing


def test_concurrent_asgi_streams_on_one_connection(served):
    key = uuid.uuid4().hex
    n = 10
    with served.client("asgi") as c:
        barrier = [c.request("GET", "/barrier?id=%s&n=%d&tag=b%d" % (key, n, i)) for i in range(n)]
        bodies = {}
        for i in range(n):
            sid = c.request("POST", "/echo", headers=[("content-type", "application/octet-stream")], end_stream=False)
            bodies[sid] = (b"stream %d body;" % i) * (100 + 37 * i)
        # the bodies interleave on the wire
        for piece in range(3):
            for sid, body in bodies.items():
                third = -(-len(body) // 3)
                c.send_body(sid, body[piece * third:(piece + 1) * third], end_stream=piece == 2)
        for i, sid in enumerate(barrier):
            r = c.response(sid)
            assert r.status == 200
            # every barrier request was in the application at the same time
            assert bytes(r.data) == b"passed b%d" % i, r
        for sid, body in bodies.items():
            r = c.response(sid)
            assert r.status == 200
            assert bytes(r.data) == body, "stream %d got another stream's body or a damaged one" % sid


def test_concurrent_starlette_streams(served):
    with served.client("starlette") as c:
        sids = {c.request("GET", "/users/user%d?q=%d" % (i, i * i)): i for i in range(20)}
        echo = c.request("POST", "/echo", body=b"abcdef" * 1000)
        for sid, i in sids.items():
            r = c.response(sid)
            assert r.status == 200
            assert r.json() == {"name": "user%d" % i, "q": str(i * i)}
        r = c.response(echo)
        assert bytes(r.data) == (b"abcdef" * 1000)[::-1]
        r = c.get("/stream")
        assert bytes(r.data) == b"part 0\npart 1\npart 2\npart 3\n"


def test_concurrent_fastapi_streams(served):
    with served.client("fastapi") as c:
        sids = {c.request("GET", "/items/%d?q=q%d&limit=%d" % (i, i, i + 1)): i for i in range(20)}
        posts = {}
        for i in range(5):
            item = json.dumps({"name": "thing %d" % i, "price": i + 0.5, "tags": ["t%d" % i]}).encode()
            posts[c.request("POST", "/items", headers=[("content-type", "application/json")], body=item)] = i
        for sid, i in sids.items():
            r = c.response(sid)
            assert r.status == 200
            assert r.json() == {"item_id": i, "q": "q%d" % i, "limit": i + 1}
        for sid, i in posts.items():
            r = c.response(sid)
            assert r.status == 200
            assert r.json()["received"] == {"name": "thing %d" % i, "price": i + 0.5, "tags": ["t%d" % i]}
        assert bytes(c.get("/stream?n=3").data) == b"line 0\nline 1\nline 2\n"


def test_concurrent_wsgi_streams(served):
    key = uuid.uuid4().hex
    with served.client("wsgi") as c:
        # --wsgi-threads 4: the four barrier calls run at once, on their own streams
        barrier = [c.request("GET", "/barrier?id=%s&n=4&tag=%d" % (key, i)) for i in range(4)]
        echoes = {}
        for i in range(8):
            body = (b"wsgi stream %d;" % i) * (50 + 91 * i)
            echoes[c.request("POST", "/echo", body=body)] = body
        for sid in barrier:
            r = c.response(sid)
            assert r.status == 200 and bytes(r.data) == b"passed", r
        for sid, body in echoes.items():
            r = c.response(sid)
            assert r.status == 200
            assert bytes(r.data) == body


def test_concurrent_flask_streams(served):
    with served.client("flask") as c:
        sids = {c.request("GET", "/stream?n=3&word=w%d" % i): i for i in range(10)}
        for sid, i in sids.items():
            r = c.response(sid)
            assert r.status == 200
            assert bytes(r.data) == b"w%d 0\nw%d 1\nw%d 2\n" % (i, i, i)
        r = c.get("/get-cookie", headers=[("cookie", "flavour=ginger")])
        assert r.json() == {"flavour": "ginger"}


# ---------------------------------------------------------------------------
# what the application sees


def _header_values(scope, name):
    return [v for n, v in scope["headers"] if n == name]


@pytest.mark.parametrize("name,scheme", [("asgi", "http"), ("asgi-tls", "https")])
def test_asgi_scope_over_h2(served, name, scheme):
    with served.client(name, authority="example.test:8443") as c:
        r = c.post(
            "/scope/a%20b?x=1&y=2",
            b"payload",
            headers=[("cookie", "a=1"), ("x-custom", "Value"), ("cookie", "b=2; c=3"), ("content-type", "text/plain")],
        )
    assert r.status == 200, r
    scope = r.json()
    assert scope["type"] == "http"
    assert scope["http_version"] == "2"
    assert scope["scheme"] == scheme
    assert scope["method"] == "POST"
    assert scope["path"] == "/scope/a b"
    assert scope["raw_path"] == "/scope/a%20b"
    assert scope["query_string"] == "x=1&y=2"
    assert _header_values(scope, "host") == ["example.test:8443"]
    # RFC 9113 8.2.3: the cookie fields are joined into one
    assert _header_values(scope, "cookie") == ["a=1; b=2; c=3"]
    assert _header_values(scope, "x-custom") == ["Value"]
    assert not any(n.startswith(":") for n, _ in scope["headers"]), scope["headers"]
    assert scope["_headers_lowercase"] is True
    assert scope["_body"] == "payload"


@pytest.mark.parametrize("name,scheme", [("wsgi", "http"), ("wsgi-tls", "https")])
def test_wsgi_environ_over_h2(served, name, scheme):
    with served.client(name, authority="example.test:8443") as c:
        r = c.post(
            "/environ/p?q=1",
            b"wsgi payload",
            headers=[("cookie", "a=1"), ("cookie", "b=2"), ("x-custom", "v"), ("content-length", "12")],
        )
    assert r.status == 200, r
    environ = r.json()
    assert environ["SERVER_PROTOCOL"] == "HTTP/2"
    assert environ["wsgi.url_scheme"] == scheme
    assert environ["REQUEST_METHOD"] == "POST"
    assert environ["PATH_INFO"] == "/environ/p"
    assert environ["QUERY_STRING"] == "q=1"
    assert environ["HTTP_HOST"] == "example.test:8443"
    assert environ["HTTP_COOKIE"] == "a=1; b=2"
    assert environ["HTTP_X_CUSTOM"] == "v"
    assert environ["CONTENT_LENGTH"] == "12"
    assert environ["_body"] == "wsgi payload"
    assert not any(k.startswith("HTTP_:") for k in environ), sorted(environ)


# ---------------------------------------------------------------------------
# bodies and flow control


@pytest.mark.parametrize("name", ["asgi", "asgi-tls"])
def test_large_upload_asgi(served, name):
    body = os.urandom(6 * MiB)
    with served.client(name) as c:
        r = c.post("/digest", body, timeout=60)
    assert r.status == 200, r
    assert r.json()["length"] == len(body)
    assert r.json()["sha256"] == hashlib.sha256(body).hexdigest()


def test_large_upload_wsgi(served):
    body = os.urandom(4 * MiB)
    with served.client("wsgi") as c:
        r = c.post("/echo?mode=pieces", body, timeout=60)
    assert r.status == 200, r
    assert len(r.data) == len(body)
    assert bytes(r.data) == body


def test_flask_upload_without_content_length(served):
    # H2Client sends no content-length: the body ends with the stream, and Werkzeug
    # reads it only when the environ says wsgi.input ends by itself.
    body = bytes(range(256)) * 400
    with served.client("flask") as c:
        r = c.post("/echo", body, timeout=30)
    assert r.status == 200, r
    assert bytes(r.data) == body


@pytest.mark.parametrize("name", ["asgi", "asgi-tls", "wsgi"])
def test_download_with_a_small_window_read_slowly(served, name):
    size = 2 * MiB
    window = 16 * 1024
    path, expected = ("/file?size=%d" % size, wsgi_file_bytes(size)) if name.startswith("wsgi") else (
        "/download?size=%d&chunk=50000" % size, pattern(size))
    consumed = {"n": 0}

    def read_slowly(stream, event):
        # the first 256 KiB are taken in slowly, the rest at once
        if consumed["n"] < 256 * 1024:
            time.sleep(0.003)
        consumed["n"] += event.flow_controlled_length
        c.ack(stream.id, event.flow_controlled_length)

    with served.client(name, settings={SettingCodes.INITIAL_WINDOW_SIZE: window}, on_data=read_slowly) as c:
        r = c.get(path, timeout=60)
        assert r.status == 200, r
        assert len(r.data) == size
        assert bytes(r.data) == expected, "the body arrived damaged or out of order"
        # no DATA frame larger than the window
        assert r.data_frames >= size // window
        assert bytes(c.get("/").data) == (b"hello, wsgi" if name.startswith("wsgi") else b"hello, asgi")


def test_tiny_window_without_window_update_gets_only_that_much(served):
    key = uuid.uuid4().hex
    size, piece, window = 4 * MiB, 16384, 1000
    with served.client("asgi", settings={SettingCodes.INITIAL_WINDOW_SIZE: window}, on_data=None) as c:
        sid = c.request("GET", "/download?size=%d&chunk=%d&id=%s" % (size, piece, key))
        stream = c.streams[sid]
        c.wait_for(lambda: len(stream.data) >= window, what="the first window of data")
        c.quiet(1.0)
        assert len(stream.data) == window, "the server sent %d bytes into a window of %d" % (len(stream.data), window)
        # the application's send() is held back: it has not sent everything
        sent = result(c, key)
        assert sent["sent"] < sent["pieces"], sent
        # opening the windows lets the rest flow
        c.conn.increment_flow_control_window(8 * MiB, stream_id=sid)
        c.conn.increment_flow_control_window(8 * MiB)
        c.flush()
        c.response(sid, timeout=30)
        assert stream.ended
        assert bytes(stream.data) == pattern(size)
        assert poll(lambda: result(c, key)["sent"] == size // piece)


def test_upload_is_acknowledged_only_as_far_as_the_application_read(served):
    key = uuid.uuid4().hex
    pause_after = 100_000
    body = os.urandom(MiB)
    with served.client("asgi") as c:
        initial = c.conn.remote_settings.initial_window_size
        sid = c.request("POST", "/digest?id=%s&pause_after=%d" % (key, pause_after), end_stream=False)
        sent = c.send_body(sid, body, end_stream=True, stall=1.5)
        assert sent < len(body), "the whole body went through while the application had stopped reading"
        state = poll(lambda: result(c, key), timeout=10)
        assert state["state"] == "paused", state
        read = state["read"]
        assert read >= pause_after
        acked = c.acked_on(sid)
        assert acked <= read, "the server acknowledged %d bytes of a body the application had read %d of" % (acked, read)
        assert sent == initial + acked, (sent, initial, acked)
        # another stream, with a body of its own, still completes meanwhile
        other = c.post("/echo", b"o" * 20000)
        assert other.status == 200 and bytes(other.data) == b"o" * 20000
        assert c.get("/release?id=" + key).status == 200
        rest = c.send_body(sid, body[sent:], end_stream=True)
        assert sent + rest == len(body)
        r = c.response(sid, timeout=30)
        assert r.status == 200, r
        assert r.json()["length"] == len(body)
        assert r.json()["sha256"] == hashlib.sha256(body).hexdigest()


def test_unread_upload_leaves_the_stream_window_exhausted(served):
    key = uuid.uuid4().hex
    with served.client("asgi") as c:
        initial = c.conn.remote_settings.initial_window_size
        sid = c.request("POST", "/no-read?id=%s" % key, end_stream=False)
        sent = c.send_body(sid, os.urandom(256 * 1024), end_stream=True, stall=1.5)
        assert c.acked_on(sid) == 0, "the server gave back window for a body nobody read"
        assert sent == initial, "sent %d bytes into a stream window of %d" % (sent, initial)
        assert result(c, key) == {"state": "started"}
        # the connection is not stuck: other streams, with bodies, complete
        for i in range(3):
            body = b"%d" % i * 30000
            r = c.post("/echo", body)
            assert r.status == 200 and bytes(r.data) == body
        assert c.get("/release?id=" + key).status == 200
        r = c.response(sid)
        assert r.status == 200, r
        # a RST_STREAM(NO_ERROR) that stops the upload may follow, but only after the whole response
        assert bytes(r.data) == b"answered without reading", "the response body was lost: %r" % r
        assert r.ended, r
        assert bytes(c.get("/").data) == b"hello, asgi"


@pytest.mark.parametrize("name", ["asgi", "wsgi"])
def test_request_trailers_are_accepted(served, name):
    body = b"0123456789" * 5000
    with served.client(name) as c:
        path = "/digest" if name == "asgi" else "/echo?mode=all"
        sid = c.request("POST", path, headers=[("te", "trailers")], end_stream=False)
        c.send_body(sid, body, end_stream=False)
        c.conn.send_headers(sid, [("x-checksum", "abc"), ("x-trailer-two", "2")], end_stream=True)
        c.flush()
        r = c.response(sid)
        assert r.status == 200, r
        if name == "asgi":
            assert r.json()["length"] == len(body)
            assert r.json()["sha256"] == hashlib.sha256(body).hexdigest()
        else:
            assert bytes(r.data) == body
        # the connection goes on
        assert c.get("/").status == 200


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_max_body_gets_413(served, kind):
    with served.client(kind + "-limits") as c:
        r = c.post("/echo", b"a" * 1000)
        assert r.status == 200 and bytes(r.data) == b"a" * 1000, "a body of exactly --max-body is accepted"
        # a declared length over the limit
        sid = c.request("POST", "/echo", headers=[("content-length", "2000")], end_stream=False)
        c.send_body(sid, b"b" * 2000)
        r = c.response(sid)
        assert r.status == 413, r
        # no content-length: the DATA runs over the limit
        sid = c.request("POST", "/echo", end_stream=False)
        for _ in range(6):
            c.send_body(sid, b"c" * 500, end_stream=False)
            c.pump(0.05)
            if c.streams[sid].done:
                break
        c.wait_for(lambda: c.streams[sid].headers is not None or c.streams[sid].reset_code is not None, what="the answer to an oversized body")
        r = c.streams[sid]
        assert r.status == 413, r
        c.wait_for(lambda: r.done, what="the end of the oversized stream")
        # the connection is still usable
        r = c.get("/")
        assert r.status == 200


# ---------------------------------------------------------------------------
# cancellation and attacks


def test_rst_stream_after_the_body_gives_the_app_http_disconnect(served):
    key = uuid.uuid4().hex
    with served.client("asgi") as c:
        sid = c.request("GET", "/wait-disconnect?id=" + key)
        assert poll(lambda: result(c, key) == {"type": "waiting"}, timeout=10), result(c, key)
        c.reset(sid, ErrorCodes.CANCEL)
        assert poll(lambda: result(c, key) == {"type": "http.disconnect"}, timeout=10), result(c, key)


def test_rst_stream_during_the_body_gives_the_app_http_disconnect(served):
    key = uuid.uuid4().hex
    with served.client("asgi") as c:
        sid = c.request("POST", "/record?id=" + key, end_stream=False)
        c.send_body(sid, b"x" * 1000, end_stream=False)
        assert poll(lambda: len((result(c, key) or {}).get("messages", [])) >= 1, timeout=10), result(c, key)
        c.reset(sid, ErrorCodes.CANCEL)
        assert poll(lambda: any(m["type"] == "http.disconnect" for m in result(c, key)["messages"]), timeout=10), result(c, key)
        messages = result(c, key)["messages"]
        assert messages[-1]["type"] == "http.disconnect", messages
        assert sum(m["length"] for m in messages if m["type"] == "http.request") == 1000
        assert all(m["more_body"] for m in messages if m["type"] == "http.request")


def test_rapid_reset_gets_goaway_enhance_your_calm(served):
    server, _ = served("asgi")
    sent = []
    with H2Client(server.port) as c:
        for batch in range(40):
            for _ in range(25):
                sid = c.request("GET", "/?rapid-reset")
                c.conn.reset_stream(sid, ErrorCodes.CANCEL)
                sent.append(sid)
            c.flush()
            if c.broken or c.closed or c.goaways:
                break
            c.pump(0)
        c.wait_for(lambda: c.goaways or c.closed, timeout=10, what="a GOAWAY after 1000 reset streams")
        assert c.goaways, "the server closed the connection without a GOAWAY"
        assert c.goaways[-1].error_code == ErrorCodes.ENHANCE_YOUR_CALM, c.goaways
        # the last stream the server took up: past the 200 resets allowed, not beyond what was sent (nor 2^31-1)
        assert sent[200] <= c.goaways[-1].last_stream_id <= sent[-1], (c.goaways, sent[-1])
    # others are still served
    with served.client("asgi") as c:
        assert bytes(c.get("/").data) == b"hello, asgi"


@pytest.mark.parametrize("fill", [0, 1024], ids=["empty", "filled"])
def test_continuation_flood_gets_goaway_and_close(served, fill):
    server, _ = served("asgi")
    encoder = hpack.Encoder()
    with FrameConn(server.port) as fc:
        assert fc.send(PREFACE + SettingsFrame(0).serialize())
        headers = HeadersFrame(1, data=request_block(encoder, "/?flood", server.port))  # no END_HEADERS
        fc.send(headers.serialize())
        filler = encoder.encode([("x-filler", "f" * fill)]) if fill else b""
        # at most 200 000 empty frames (1.8 MB) or 5000 filled ones (5 MB)
        frames_per_batch, batches = (500, 400) if not fill else (50, 100)
        for _ in range(batches):
            batch = b"".join(ContinuationFrame(1, data=filler).serialize() for _ in range(frames_per_batch))
            if not fc.send(batch) or fc.goaway() is not None or fc.eof:
                break
        assert fc.wait(lambda: fc.goaway() is not None or fc.eof, timeout=10), "the server took an endless CONTINUATION flood"
        goaway = fc.goaway()
        assert goaway is not None, "the server closed the connection without a GOAWAY"
        assert goaway.error_code != ErrorCodes.NO_ERROR, goaway
        if not fill:
            # stream 1's header block never ended, so the server took up no stream
            assert goaway.error_code == ErrorCodes.ENHANCE_YOUR_CALM and goaway.last_stream_id == 0, goaway
        assert fc.wait(lambda: fc.eof, timeout=10), "the connection was not closed after the GOAWAY"
    with served.client("asgi") as c:
        assert bytes(c.get("/").data) == b"hello, asgi"


MALFORMED = {
    "upper-case name": [("X-Upper", "1")],
    "connection-specific field": [("connection", "close")],
    "te other than trailers": [("te", "gzip")],
    "CR LF in a value": [("x-split", "a\r\nx-injected: 1")],
    "NUL in a value": [("x-nul", "a\x00b")],
    "space around a value": [("x-space", " padded ")],
    "letters in content-length": [("content-length", "12a")],
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_request_headers_reset_the_stream_and_the_app_is_not_called(served, case):
    server, _ = served("asgi")
    marker = "malformed-" + uuid.uuid4().hex
    encoder = hpack.Encoder()
    with FrameConn(server.port) as fc:
        assert fc.send(PREFACE + SettingsFrame(0).serialize())
        block = request_block(encoder, "/record?id=" + marker, server.port, MALFORMED[case])
        fc.send(HeadersFrame(1, data=block, flags=["END_HEADERS", "END_STREAM"]).serialize())
        assert fc.wait(lambda: any(isinstance(f, RstStreamFrame) for f in fc.frames), timeout=10), fc.frames
        reset = next(f for f in fc.frames if isinstance(f, RstStreamFrame))
        assert (reset.stream_id, reset.error_code) == (1, ErrorCodes.PROTOCOL_ERROR), reset
        assert not any(isinstance(f, HeadersFrame) for f in fc.frames), "a response came for a malformed request"
        assert fc.goaway() is None, "one malformed stream must not end the connection"
    with served.client("asgi") as c:
        assert result(c, marker) is None, "the application was called"


def test_header_list_too_large_gets_431_or_a_stream_reset(served):
    with served.client("asgi") as c:
        # 34 fields of 1000 bytes: about 34.5 KiB as HPACK counts (name + value + 32 each),
        # over the advertised 32 KiB but not wildly so
        big = [("x-big-%02d" % i, chr(ord("a") + i % 26) * 1000) for i in range(34)]
        sid = c.request("GET", "/mirror", headers=big)
        r = c.response(sid)
        assert r.status == 431 or r.reset_code is not None, r
        assert not c.goaways, c.goaways
        # the connection stays usable and its HPACK state in step (the big fields went into the dynamic table)
        # (x-big-33 is among the last fields the client's encoder indexed: this request refers to it)
        r = c.get("/mirror", headers=[("x-echo-after", "yes"), big[33]])
        assert r.status == 200, r
        assert r.header("x-echo-after") == "yes"
        assert list(big[33]) in r.json()["headers"]
        # under the limit is fine
        r = c.get("/mirror", headers=big[:24])
        assert r.status == 200, r
        assert len([h for h in r.json()["headers"] if h[0].startswith("x-big-")]) == 24


def test_hpack_dynamic_table_across_requests_and_table_size_changes(served):
    with served.client("asgi") as c:

        def check(i):
            sent = [("x-echo-constant", "-".join(["the same value every time"] * 4)), ("x-echo-counter", "value %d" % i),
                    ("x-echo-seen", "seen-%d" % (i % 3))]
            r = c.get("/mirror?i=%d" % i, headers=sent)
            assert r.status == 200, r
            for name, value in sent:
                assert r.header(name) == value, (name, r.headers)
                assert [name, value] in r.json()["headers"]
            assert r.json()["query"] == "i=%d" % i

        for i in range(10):
            check(i)
        # the client's encoder indexed those fields: later requests refer to the dynamic table
        assert len(c.conn.encoder.header_table.dynamic_entries) > 0
        # the server's encoder must shrink its table to what the client now allows
        c.conn.update_settings({SettingCodes.HEADER_TABLE_SIZE: 0})
        c.flush()
        c.wait_for(lambda: c.settings_acks >= 2, what="the ACK of the new SETTINGS_HEADER_TABLE_SIZE")
        for i in range(10, 15):
            check(i)
        assert c.conn.decoder.header_table_size == 0, "the server's encoder did not signal the smaller table"
        c.conn.update_settings({SettingCodes.HEADER_TABLE_SIZE: 4096})
        c.flush()
        for i in range(15, 20):
            check(i)
        # the client's own encoder shrinks and grows its table (dynamic table size updates in the header block)
        c.conn.encoder.header_table_size = 256
        for i in range(20, 25):
            check(i)
        c.conn.encoder.header_table_size = 4096
        for i in range(25, 30):
            check(i)


# ---------------------------------------------------------------------------
# responses


def test_head_over_h2_has_no_data(served):
    with served.client("asgi") as c:
        r = c.response(c.request("HEAD", "/"))
        assert r.status == 200 and r.ended
        assert r.header("content-length") == "11"
        assert bytes(r.data) == b""
        r = c.response(c.request("HEAD", "/stream?n=3"))
        assert r.status == 200 and bytes(r.data) == b""
        assert bytes(c.get("/stream?n=3").data) == b"chunk 0\nchunk 1\nchunk 2\n"


def test_health_check_path_over_h2(served):
    with served.client("asgi") as c:
        r = c.get("/healthz")
        assert r.status == 200, r
        r = c.response(c.request("HEAD", "/healthz"))
        assert r.status == 200 and bytes(r.data) == b""
        # answered by the server: the application never saw it
        seen = c.get("/seen").json()
        assert not any(p.startswith("/healthz") for p in seen), seen


def test_wsgi_streamed_responses_over_h2(served):
    with served.client("wsgi") as c:
        before = c.get("/closed-count").json()["stream"]
        r = c.get("/stream?n=50")
        assert r.status == 200
        assert bytes(r.data) == b"".join(b"chunk %d\n" % i for i in range(50))
        assert poll(lambda: c.get("/closed-count").json()["stream"] == before + 1), "close() of the iterable was not called once"
        r = c.get("/write")
        assert bytes(r.data) == b"part1;part2;end"
        r = c.get("/lazy-start")
        assert r.header("x-lazy") == "yes" and bytes(r.data) == b"lazy body"
        r = c.get("/file?size=300000")
        assert bytes(r.data) == wsgi_file_bytes(300000)
        r = c.get("/empty-blocks")
        assert bytes(r.data) == b"abc"


def test_asgi_streamed_response_and_empty_chunks_over_h2(served):
    with served.client("asgi") as c:
        r = c.get("/stream?n=20")
        assert bytes(r.data) == b"".join(b"chunk %d\n" % i for i in range(20))
        assert bytes(c.get("/empty-chunks").data) == b"abc"
        r = c.get("/status/204")
        assert r.status == 204 and bytes(r.data) == b""
        r = c.get("/error")
        assert r.status == 500


def test_access_log_says_http2(served):
    server, _ = served("asgi")
    probe = uuid.uuid4().hex
    with served.client("asgi") as c:
        assert c.get("/?probe=" + probe).status == 200
    assert server.wait_for_output('"GET /?probe=%s HTTP/2" 200' % probe, timeout=5), server.output()[-2000:]


def test_json_access_log_says_http2(served):
    server, _ = served("asgi-limits")
    probe = uuid.uuid4().hex
    with served.client("asgi-limits") as c:
        assert c.get("/?probe=" + probe).status == 200
    out = server.wait_for_output(probe)
    assert out, server.output()[-2000:]
    line = next(json.loads(line) for line in out.splitlines() if probe in line and line.startswith("{"))
    assert line["protocol"] == "HTTP/2", line
    assert line["path"] == "/?probe=" + probe


# ---------------------------------------------------------------------------
# stream states (RFC 9113 5.1, 5.1.1, 5.1.2), with raw frames: h2 refuses to send what these send


class RawSession(FrameConn):
    """A client connection that has sent its preface and acknowledged the server's SETTINGS, so
    that the server applies its own (MAX_CONCURRENT_STREAMS), and sends whatever frames it is told."""

    def __init__(self, port):
        super().__init__(port)
        self.port = port
        self.encoder = hpack.Encoder()
        assert self.send(PREFACE + SettingsFrame(0).serialize())
        assert self.wait(lambda: any(isinstance(f, SettingsFrame) and "ACK" not in f.flags for f in self.frames)), self.frames
        assert self.send(SettingsFrame(0, flags=["ACK"]).serialize())

    def headers(self, sid, path="/", end_stream=True, method="GET", extra=()):
        block = self.encoder.encode(
            [(":method", method), (":scheme", "http"), (":authority", "127.0.0.1:%d" % self.port), (":path", path)] + list(extra))
        self.send(HeadersFrame(sid, data=block, flags=["END_HEADERS"] + (["END_STREAM"] if end_stream else [])).serialize())

    def trailers(self, sid, end_stream=True):
        block = self.encoder.encode([("x-trailer", "late")])
        self.send(HeadersFrame(sid, data=block, flags=["END_HEADERS"] + (["END_STREAM"] if end_stream else [])).serialize())

    def of(self, kind, sid):
        return [f for f in self.frames if isinstance(f, kind) and f.stream_id == sid]

    def ended(self, sid):
        """Waits for the end of the server's response on a stream."""
        assert self.wait(lambda: any("END_STREAM" in f.flags for f in self.of(DataFrame, sid) + self.of(HeadersFrame, sid))), self.frames
        return b"".join(f.data for f in self.of(DataFrame, sid))

    def connection_error(self):
        """The GOAWAY the server closes the connection with."""
        assert self.wait(lambda: self.goaway() is not None), "no GOAWAY: %r" % self.frames
        assert self.wait(lambda: self.eof), "the connection stayed open after its GOAWAY"
        return self.goaway().error_code

    def stream_error(self, sid):
        """The RST_STREAM the server ends a stream with; the connection goes on."""
        assert self.wait(lambda: self.of(RstStreamFrame, sid)), "no RST_STREAM on stream %d: %r" % (sid, self.frames)
        assert self.goaway() is None, self.goaway()
        return self.of(RstStreamFrame, sid)[0].error_code

    def still_serves(self, sid):
        self.headers(sid)
        assert self.ended(sid) == b"hello, asgi"
        assert self.goaway() is None and not self.eof, self.frames


def _held(served, probe, key):
    """Waits until h2_app's /no-read?id=key has the request (it answers once /release?id=key)."""
    assert poll(lambda: result(probe, key) == {"state": "started"}, timeout=10), result(probe, key)


@pytest.mark.parametrize("end_stream", [True, False], ids=["with END_STREAM", "without"])
def test_headers_on_a_half_closed_remote_stream_is_a_stream_error_stream_closed(served, end_stream):
    server, _ = served("asgi")
    key = uuid.uuid4().hex
    with RawSession(server.port) as s, served.client("asgi") as probe:
        s.headers(1, "/no-read?id=" + key)  # END_STREAM: the stream is half-closed (remote) while the application holds it
        _held(served, probe, key)
        s.trailers(1, end_stream=end_stream)
        assert s.stream_error(1) == ErrorCodes.STREAM_CLOSED
        assert not s.of(HeadersFrame, 1), "a response came on the reset stream"
        s.still_serves(3)
        probe.get("/release?id=" + key)


def test_data_on_a_half_closed_remote_stream_is_a_stream_error_stream_closed(served):
    server, _ = served("asgi")
    key = uuid.uuid4().hex
    with RawSession(server.port) as s, served.client("asgi") as probe:
        s.headers(1, "/no-read?id=" + key)
        _held(served, probe, key)
        s.send(DataFrame(1, data=b"late", flags=["END_STREAM"]).serialize())
        assert s.stream_error(1) == ErrorCodes.STREAM_CLOSED
        s.still_serves(3)
        probe.get("/release?id=" + key)


@pytest.mark.parametrize("frame", ["HEADERS", "DATA"])
def test_headers_or_data_on_a_stream_that_ended_is_a_connection_error_stream_closed(served, frame):
    server, _ = served("asgi")
    with RawSession(server.port) as s:
        s.headers(1)
        assert s.ended(1) == b"hello, asgi"  # END_STREAM both ways: the stream is closed
        if frame == "HEADERS":
            s.headers(1)
        else:
            s.send(DataFrame(1, data=b"late", flags=["END_STREAM"]).serialize())
        assert s.connection_error() == ErrorCodes.STREAM_CLOSED
        assert len(s.of(HeadersFrame, 1)) == 1, "the closed stream was served again"


@pytest.mark.parametrize("frame", ["WINDOW_UPDATE", "RST_STREAM", "PRIORITY"])
def test_window_update_rst_stream_and_priority_on_a_stream_that_ended_are_ignored(served, frame):
    server, _ = served("asgi")
    with RawSession(server.port) as s:
        s.headers(1)
        s.ended(1)
        s.send({"WINDOW_UPDATE": WindowUpdateFrame(1, window_increment=1024),
                "RST_STREAM": RstStreamFrame(1, error_code=ErrorCodes.CANCEL),
                "PRIORITY": PriorityFrame(1, depends_on=0, stream_weight=16)}[frame].serialize())
        s.still_serves(3)
        assert not s.of(RstStreamFrame, 1), s.frames


@pytest.mark.parametrize("frame", ["HEADERS", "DATA", "WINDOW_UPDATE"])
def test_frames_on_a_stream_the_client_reset_are_a_stream_error_stream_closed(served, frame):
    server, _ = served("asgi")
    key = uuid.uuid4().hex
    with RawSession(server.port) as s, served.client("asgi") as probe:
        s.headers(1, "/record?id=" + key, method="POST", end_stream=False)
        s.send(DataFrame(1, data=b"part").serialize())
        assert poll(lambda: len((result(probe, key) or {}).get("messages", [])) >= 1, timeout=10), result(probe, key)
        s.send(RstStreamFrame(1, error_code=ErrorCodes.CANCEL).serialize())
        assert poll(lambda: any(m["type"] == "http.disconnect" for m in result(probe, key)["messages"]), timeout=10)
        if frame == "HEADERS":
            s.headers(1)
        elif frame == "DATA":
            s.send(DataFrame(1, data=b"late").serialize())
        else:
            s.send(WindowUpdateFrame(1, window_increment=1024).serialize())
        assert s.stream_error(1) == ErrorCodes.STREAM_CLOSED
        s.still_serves(3)


def test_data_still_arriving_after_the_server_reset_the_stream_is_borne(served):
    # 413 for a declared length over --max-body: the server answers and resets the stream (NO_ERROR);
    # the client's DATA already on its way must not cost it the connection (RFC 9113 5.1, closed)
    server, _ = served("asgi-limits")
    with RawSession(server.port) as s:
        s.headers(1, "/echo", method="POST", end_stream=False, extra=[("content-length", "4000")])
        assert s.wait(lambda: s.of(RstStreamFrame, 1)), s.frames
        assert s.of(HeadersFrame, 1), "no 413 before the reset"
        for _ in range(3):
            s.send(DataFrame(1, data=b"d" * 1000).serialize())
        s.send(DataFrame(1, data=b"d" * 1000, flags=["END_STREAM"]).serialize())
        s.still_serves(3)
        assert [f.error_code for f in s.of(RstStreamFrame, 1)][0] == ErrorCodes.NO_ERROR


@pytest.mark.parametrize("held", [False, True], ids=["after it ended", "while it is open"])
def test_a_stream_id_lower_than_one_already_used_is_a_connection_error_protocol_error(served, held):
    server, _ = served("asgi")
    key, marker = uuid.uuid4().hex, "lower-" + uuid.uuid4().hex
    with RawSession(server.port) as s, served.client("asgi") as probe:
        if held:
            s.headers(5, "/no-read?id=" + key)
            _held(served, probe, key)
        else:
            s.headers(5)
            s.ended(5)
        s.headers(3, "/record?id=" + marker)
        assert s.connection_error() == ErrorCodes.PROTOCOL_ERROR
        assert not s.of(HeadersFrame, 3)
        assert result(probe, marker) is None, "the application was called for the lower stream id"
        probe.get("/release?id=" + key)


def test_an_even_stream_id_from_the_client_is_a_connection_error_protocol_error(served):
    server, _ = served("asgi")
    with RawSession(server.port) as s:
        s.headers(2)
        assert s.connection_error() == ErrorCodes.PROTOCOL_ERROR
        assert not s.of(HeadersFrame, 2)


IDLE_FRAMES = {
    "DATA": lambda: DataFrame(1, data=b"x", flags=["END_STREAM"]),
    "RST_STREAM": lambda: RstStreamFrame(1, error_code=ErrorCodes.CANCEL),
    "WINDOW_UPDATE": lambda: WindowUpdateFrame(1, window_increment=1024),
    "CONTINUATION": lambda: ContinuationFrame(1, data=b"", flags=["END_HEADERS"]),
}


@pytest.mark.parametrize("frame", sorted(IDLE_FRAMES))
def test_frames_other_than_headers_and_priority_on_an_idle_stream_are_a_connection_error_protocol_error(served, frame):
    server, _ = served("asgi")
    with RawSession(server.port) as s:
        s.send(IDLE_FRAMES[frame]().serialize())
        assert s.connection_error() == ErrorCodes.PROTOCOL_ERROR


def test_priority_on_an_idle_stream_is_accepted(served):
    server, _ = served("asgi")
    with RawSession(server.port) as s:
        s.send(PriorityFrame(3, depends_on=0, stream_weight=16).serialize())
        s.still_serves(1)
        s.still_serves(3)  # the stream PRIORITY named can still be opened


def test_streams_over_the_concurrency_limit_are_refused(served):
    server, _ = served("asgi")
    key = uuid.uuid4().hex
    with RawSession(server.port) as s, served.client("asgi") as probe:
        for i in range(101):  # the advertised limit is 100
            s.headers(1 + 2 * i, "/no-read?id=%s" % key)
        refused = 1 + 2 * 100
        assert s.stream_error(refused) in (ErrorCodes.REFUSED_STREAM, ErrorCodes.PROTOCOL_ERROR)
        assert not any(s.of(RstStreamFrame, 1 + 2 * i) for i in range(100)), "a stream within the limit was reset"
        probe.get("/release?id=" + key)
        assert s.wait(lambda: all(s.of(HeadersFrame, 1 + 2 * i) for i in range(100)), timeout=30), "not every held stream was answered"
        s.still_serves(refused + 2)


@pytest.mark.parametrize("preface", [b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n", b"PRI * HTTP/2.0\r\nHost: x\r\n\r\n"], ids=["corrupt", "http1-like"])
def test_a_corrupt_preface_on_the_plain_port_gets_goaway_protocol_error(served, preface):
    # it starts with the preface's request line, which no HTTP/1.1 client sends: the client meant HTTP/2
    server, _ = served("asgi")
    with FrameConn(server.port) as fc:
        fc.send(preface)
        assert fc.wait(lambda: fc.goaway() is not None), "no GOAWAY: %r" % bytes(fc.raw[:200])
        assert fc.goaway().error_code == ErrorCodes.PROTOCOL_ERROR
        assert fc.wait(lambda: fc.eof), "the connection stayed open after its GOAWAY"
        assert not fc.raw.startswith(b"HTTP/1"), bytes(fc.raw[:200])


def test_a_preface_followed_by_another_frame_than_settings_gets_goaway_protocol_error(served):
    server, _ = served("asgi")
    with FrameConn(server.port) as fc:
        fc.send(PREFACE + WindowUpdateFrame(0, window_increment=1024).serialize())
        assert fc.wait(lambda: fc.goaway() is not None), "no GOAWAY: %r" % bytes(fc.raw[:200])
        assert fc.goaway().error_code == ErrorCodes.PROTOCOL_ERROR
        assert fc.wait(lambda: fc.eof)


# ---------------------------------------------------------------------------
# drain


def test_sigterm_sends_goaway_and_the_open_stream_completes(start_server, tmp_path):
    server = start_server("h2_app:app")
    marker = tmp_path / "go-on"
    with H2Client(server.port) as c:
        sid = c.request("GET", "/stream-wait?marker=%s" % marker)
        stream = c.streams[sid]
        c.wait_for(lambda: bytes(stream.data) == b"first\n", what="the first part of the slow response")
        server.terminate()
        c.wait_for(lambda: c.goaways, what="a GOAWAY after SIGTERM")
        assert all(g.error_code == ErrorCodes.NO_ERROR for g in c.goaways), c.goaways
        assert c.goaways[-1].last_stream_id >= sid, c.goaways
        marker.write_text("go")
        c.response(sid, timeout=15)
        assert stream.ended and stream.reset_code is None, stream
        assert bytes(stream.data) == b"first\nsecond: seen-marker\n"
        # then the connection closes
        deadline = time.monotonic() + 10
        while c.pump(0.5) and time.monotonic() < deadline:
            pass
        assert c.closed, "the connection stayed open after its last stream"
    code = server.wait_exit(30)
    assert code is not None, "the server did not exit within 30 s of SIGTERM"
    assert_clean_exit(server, code)


# ---------------------------------------------------------------------------
# --no-http2, --http2-only, Upgrade: h2c


def test_upgrade_h2c_is_ignored(served):
    server, _ = served("asgi")
    with server.raw() as raw:
        r = raw.request(
            "GET", "/",
            headers=[("Connection", "Upgrade, HTTP2-Settings"), ("Upgrade", "h2c"), ("HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA")],
        )
        assert r.version == "HTTP/1.1" and r.status == 200, r
        assert r.body == b"hello, asgi"
        # still HTTP/1.1 on that connection
        r = raw.request("GET", "/")
        assert r.status == 200 and r.version == "HTTP/1.1"


def test_no_http2_answers_the_preface_as_a_bad_http11_request(start_server):
    server = start_server("h2_app:app", "--no-http2")
    with server.raw() as raw:
        raw.send(PREFACE + SettingsFrame(0).serialize())
        r = raw.read_head()
        assert r.version.startswith("HTTP/1"), r
        assert 400 <= r.status < 500 or r.status == 505, r
        raw.read_until_close(5)
    assert server.get("/").status_code == 200


def test_no_http2_over_tls_offers_only_http11(start_server, certificate):
    server = start_server("h2_app:app", "--no-http2", *tls_options(certificate))
    ctx = tls_context(certificate, alpn=("h2", "http/1.1"))
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            assert s.selected_alpn_protocol() == "http/1.1"
    only_h2 = tls_context(certificate, alpn=("h2",))
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
            with only_h2.wrap_socket(raw, server_hostname="localhost") as s:
                assert s.selected_alpn_protocol() != "h2"
    except ssl.SSLError:
        pass  # no_application_protocol: as good as not selecting h2


def test_http2_only_closes_http11_and_serves_h2c(start_server):
    server = start_server("h2_app:app", "--http2-only")
    with server.raw() as raw:
        raw.send_request("GET", "/")
        data = raw.read_until_close(5)
        assert b"HTTP/1.1 200" not in data and b"hello, asgi" not in data, data[:200]
    with H2Client(server.port) as c:
        assert bytes(c.get("/").data) == b"hello, asgi"


def test_http2_only_over_tls_offers_only_h2(start_server, certificate):
    server = start_server("h2_app:app", "--http2-only", *tls_options(certificate))
    with H2Client(server.port, tls=tls_context(certificate, alpn=("h2", "http/1.1"))) as c:
        assert c.alpn == "h2"
        assert bytes(c.get("/").data) == b"hello, asgi"
    only_h1 = tls_context(certificate, alpn=("http/1.1",))
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
            with only_h1.wrap_socket(raw, server_hostname="localhost") as s:
                assert s.selected_alpn_protocol() != "http/1.1"
    except ssl.SSLError:
        pass  # no_application_protocol


# ---------------------------------------------------------------------------
# independent clients: curl, nghttp, h2load


def _need(tool):
    if shutil.which(tool) is None:
        pytest.skip("%s is not installed" % tool)


def _curl(*args):
    proc = subprocess.run(["curl", "-sS", "--max-time", "20", *args], capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout


def test_curl_h2c_prior_knowledge(served, tmp_path):
    _need("curl")
    server, _ = served("asgi")
    out = _curl("--http2-prior-knowledge", "-w", "\n%{http_version}", server.url + "/")
    body, version = out.rsplit(b"\n", 1)
    assert version == b"2" and body == b"hello, asgi", out
    upload = tmp_path / "upload.bin"
    data = os.urandom(3 * MiB)
    upload.write_bytes(data)
    out = _curl("--http2-prior-knowledge", "-w", "\n%{http_version}", "--data-binary", "@%s" % upload, server.url + "/digest")
    body, version = out.rsplit(b"\n", 1)
    assert version == b"2"
    assert json.loads(body)["sha256"] == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("name", ["asgi-tls", "wsgi-tls"])
def test_curl_over_tls(served, name):
    _need("curl")
    server, _ = served(name)
    url = "https://127.0.0.1:%d/%s" % (server.port, "scope" if name == "asgi-tls" else "environ")
    out = _curl("--http2", "-k", "-w", "\n%{http_version}", url)
    body, version = out.rsplit(b"\n", 1)
    assert version == b"2", out[-300:]
    if name == "asgi-tls":
        assert json.loads(body)["scheme"] == "https"
        assert json.loads(body)["http_version"] == "2"
    else:
        assert json.loads(body)["wsgi.url_scheme"] == "https"
        assert json.loads(body)["SERVER_PROTOCOL"] == "HTTP/2"
    out = _curl("--http1.1", "-k", "-w", "\n%{http_version}", url)
    assert out.rsplit(b"\n", 1)[1] == b"1.1"


def test_nghttp(served):
    _need("nghttp")
    server, _ = served("asgi")
    proc = subprocess.run(["nghttp", "-nv", server.url + "/"], capture_output=True, timeout=30)
    out = proc.stdout.decode(errors="replace")
    assert proc.returncode == 0, out + proc.stderr.decode(errors="replace")
    assert "recv SETTINGS frame" in out, out
    assert "SETTINGS_MAX_CONCURRENT_STREAMS(0x03):100" in out, out
    assert ":status: 200" in out, out
    proc = subprocess.run(["nghttp", server.url + "/echo", "-d", "-"], input=b"nghttp body", capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"nghttp body"


def test_nghttp_over_tls(served):
    _need("nghttp")
    server, _ = served("asgi-tls")
    proc = subprocess.run(["nghttp", "https://127.0.0.1:%d/" % server.port], capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"hello, asgi"


def _h2load(*args):
    proc = subprocess.run(["h2load", *args], capture_output=True, timeout=60)
    out = proc.stdout.decode(errors="replace")
    assert proc.returncode == 0, out + proc.stderr.decode(errors="replace")
    return out


@pytest.mark.parametrize("name,n", [("asgi", 3000), ("wsgi", 1000), ("asgi-tls", 1000)])
def test_h2load_smoke(served, name, n):
    _need("h2load")
    server, ctx = served(name)
    url = ("https://127.0.0.1:%d/" if ctx else "http://127.0.0.1:%d/") % server.port
    out = _h2load("-n", str(n), "-c", "4", "-m", "10", url)
    assert "requests: %d total, %d started, %d done, %d succeeded, 0 failed, 0 errored" % (n, n, n, n) in out, out
    assert "status codes: %d 2xx" % n in out, out
    assert "Application protocol: %s\n" % ("h2" if ctx else "h2c") in out, out


def test_streams_whose_client_never_opens_its_window_leave_memory_bounded(served):
    """100 streams (10 connections of 10) each ask for a 1 GiB response and never give window back:
    each connection gets at most its 64 KiB window, the application's sends wait, and memory stays
    bounded."""
    from test_hardening import tree_rss_kib

    server, _ = served("asgi")
    connections, streams, chunks, size = 10, 10, 16384, 65536
    baseline = tree_rss_kib(server.proc.pid)
    stalled = []
    try:
        for c in range(connections):
            client = H2Client(server.port, on_data=None)
            for s in range(streams):
                client.request("GET", "/big?id=h2stall-%d-%d&chunks=%d&size=%d" % (c, s, chunks, size), end_stream=True)
            stalled.append(client)
        for client in stalled:
            client.pump(0.2)

        def progress():
            with served.client("asgi") as probe:
                return [result(probe, "h2stall-%d-%d" % (c, s)) for c in (0, connections - 1) for s in (0, streams - 1)]

        # every application call has started (a stream whose connection window is used up by the others
        # may not get even its first send through), and then stopped
        assert poll(lambda: all(p is not None for p in progress()), timeout=60), progress()

        def progress_after_reading():
            for client in stalled:
                client.pump(0.1)
            return progress()

        first = settled(progress_after_reading, "a response kept going although its client gives no window")
        peak = tree_rss_kib(server.proc.pid)
        grown_mib = (peak - baseline) / 1024
        received = [sum(len(st.data) for st in client.streams.values()) for client in stalled]
        print("\n%d HTTP/2 streams not opening their windows for a 1 GiB response each: RSS %.0f MiB -> %.0f MiB (+%.0f MiB); "
              "sends returned per stream: %s; bytes per connection: %s"
              % (connections * streams, baseline / 1024, peak / 1024, grown_mib, [p["sent"] for p in first], max(received)))
        assert all(p["sent"] < chunks // 100 for p in first), first
        assert max(received) <= DEFAULT_WINDOW, "the server sent beyond the client's connection window"
        assert grown_mib < 256, "memory grew by %.0f MiB for %d stalled streams" % (grown_mib, connections * streams)
        # a client that reads is served meanwhile
        with served.client("asgi") as reader:
            r = reader.get("/big?id=h2reader&chunks=64&size=65536")
            assert r.status == 200 and len(r.data) == 64 * 65536
    finally:
        for client in stalled:
            client.close()
