"""WebSocket over HTTP/2 (RFC 8441, issue 19): an extended CONNECT with ``:protocol websocket`` on one
stream of an HTTP/2 connection, answered 200, then WebSocket frames in the stream's DATA.

Clients: the ``h2`` library for the HTTP/2 framing and ``wsproto``'s frame protocol for the WebSocket
frames inside it (both independent, pure Python, so every CPython of the suite runs these), and
headless Chromium, which opens a WebSocket over HTTP/2 when its connection to the page's origin is
HTTP/2 and the server advertised SETTINGS_ENABLE_CONNECT_PROTOCOL.

Application: apps/raw_ws.py (plain ASGI), the same endpoints test_websocket.py uses over HTTP/1.1.
"""

import json
import socket
import time

import pytest

pytest.importorskip("h2", reason="the h2 package (src/test/python/requirements.txt) is not installed")
pytest.importorskip("wsproto", reason="the wsproto package (src/test/python/requirements.txt) is not installed")

from h2.config import H2Configuration  # noqa: E402
from h2.connection import H2Connection  # noqa: E402
from h2.events import (  # noqa: E402
    ConnectionTerminated,
    DataReceived,
    RemoteSettingsChanged,
    ResponseReceived,
    StreamEnded,
    StreamReset,
)
from h2.errors import ErrorCodes  # noqa: E402
from h2.settings import SettingCodes  # noqa: E402
from wsproto.extensions import PerMessageDeflate  # noqa: E402
from wsproto.frame_protocol import CloseReason, FrameProtocol, Opcode  # noqa: E402

import chromium  # noqa: E402
from conftest import poll  # noqa: E402
from test_http2 import certificate, tls_context, tolerate_graceful_goaway  # noqa: E402,F401

pytestmark = pytest.mark.peregrine_only  # uvicorn does not speak HTTP/2


class WsStream:
    """One WebSocket on one HTTP/2 stream, as the client sees it."""

    def __init__(self, stream_id):
        self.id = stream_id
        self.frames = FrameProtocol(client=True, extensions=[])
        self.status = None
        self.headers = {}
        self.body = b""
        self.messages = []  # (opcode, payload) of complete messages
        self.partial = None
        self.close = None  # (code, reason) of the server's close frame
        self.pings = 0
        self.ended = False
        self.reset = None
        self.plain = False  # a plain request: DATA is its body


class H2WebSockets:
    """An HTTP/2 client connection that opens WebSockets (h2c prior knowledge, or TLS with `tls`)."""

    def __init__(self, port, tls=None, timeout=10):
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            sock = tls.wrap_socket(sock, server_hostname="localhost")
            assert sock.selected_alpn_protocol() == "h2"
        self.sock = sock
        self.scheme = "https" if tls is not None else "http"
        self.authority = "127.0.0.1:%d" % port
        # The server is never trusted to advertise what a test sends anyway (the refusals below).
        self.conn = H2Connection(H2Configuration(client_side=True, header_encoding="utf-8", validate_outbound_headers=False))
        tolerate_graceful_goaway(self.conn)
        self.conn.initiate_connection()
        self.settings = None
        self.streams = {}
        self.terminated = None
        self.flush()
        self.wait_for(lambda: self.settings is not None, "the server's SETTINGS")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.sock.close()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def pump(self, timeout):
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return
        if not data:
            raise EOFError("the server closed the connection")
        for event in self.conn.receive_data(data):
            self.on_event(event)
        self.flush()

    def on_event(self, event):
        if isinstance(event, RemoteSettingsChanged):
            self.settings = dict(self.settings or {})
            self.settings.update({code: value.new_value for code, value in event.changed_settings.items()})
        elif isinstance(event, ConnectionTerminated):
            self.terminated = event
        stream = self.streams.get(getattr(event, "stream_id", None))
        if stream is None:
            return
        if isinstance(event, ResponseReceived):
            headers = dict(event.headers)
            stream.status = int(headers.pop(":status"))
            stream.headers = headers
        elif isinstance(event, DataReceived):
            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            if stream.plain or stream.status != 200:
                stream.body += event.data
                return
            stream.frames.receive_bytes(event.data)
            for frame in stream.frames.received_frames():
                if frame.opcode == Opcode.CLOSE:
                    stream.close = (int(frame.payload[0]), frame.payload[1])
                elif frame.opcode == Opcode.PING:
                    stream.pings += 1
                    self.conn.send_data(stream.id, stream.frames.pong(frame.payload))
                else:  # wsproto hands over a frame's payload as it arrives: a message is complete at message_finished
                    if stream.partial is None:
                        stream.partial = (frame.opcode, frame.payload)
                    else:
                        stream.partial = (stream.partial[0], stream.partial[1] + frame.payload)
                    if frame.message_finished:
                        stream.messages.append(stream.partial)
                        stream.partial = None
        elif isinstance(event, StreamEnded):
            stream.ended = True
        elif isinstance(event, StreamReset):
            stream.reset = event.error_code

    def wait_for(self, predicate, what, timeout=10):
        deadline = time.monotonic() + timeout
        while not predicate():
            left = deadline - time.monotonic()
            assert left > 0, "waited %.0f s for %s" % (timeout, what)
            self.pump(min(left, 0.5))

    def open(self, path, headers=(), protocol="websocket", end_stream=False):
        stream = WsStream(self.conn.get_next_available_stream_id())
        self.streams[stream.id] = stream
        self.conn.send_headers(stream.id, [
            (":method", "CONNECT"), (":protocol", protocol), (":scheme", self.scheme), (":path", path),
            (":authority", self.authority), ("sec-websocket-version", "13"),
        ] + list(headers), end_stream=end_stream)
        self.flush()
        return stream

    def accepted(self, path, **kwargs):
        stream = self.open(path, **kwargs)
        self.wait_for(lambda: stream.status is not None or stream.reset is not None, "the answer to CONNECT %s" % path)
        assert stream.status == 200, (stream.status, stream.reset, stream.body)
        return stream

    def send(self, stream, data, end_stream=False):
        """Sends as the server's windows allow, waiting for WINDOW_UPDATEs."""
        data = bytes(data)
        while True:
            room = min(self.conn.local_flow_control_window(stream.id), self.conn.max_outbound_frame_size)
            chunk, data = data[:room], data[room:]
            if chunk or not data:
                self.conn.send_data(stream.id, chunk, end_stream=end_stream and not data)
                self.flush()
            if not data:
                return
            self.wait_for(lambda: self.conn.local_flow_control_window(stream.id) > 0, "the server to open stream %d's window" % stream.id)

    def send_text(self, stream, text):
        self.send(stream, stream.frames.send_data(text, fin=True))

    def send_bytes(self, stream, payload):
        self.send(stream, stream.frames.send_data(payload, fin=True))

    def close_ws(self, stream, code, reason=""):
        self.send(stream, stream.frames.close(code, reason))

    def wait_messages(self, stream, n, timeout=10):
        self.wait_for(lambda: len(stream.messages) >= n, "%d messages on stream %d (got %d)" % (n, stream.id, len(stream.messages)), timeout)
        return stream.messages

    def get(self, path):
        """A plain GET on the same connection: (status, body)."""
        stream = WsStream(self.conn.get_next_available_stream_id())
        stream.plain = True
        self.streams[stream.id] = stream
        self.conn.send_headers(stream.id, [(":method", "GET"), (":scheme", self.scheme), (":path", path),
                                           (":authority", self.authority)], end_stream=True)
        self.flush()
        self.wait_for(lambda: stream.ended or stream.reset is not None, "the answer to GET %s" % path)
        return stream.body


@pytest.fixture(scope="module")
def ws_server(start_module_server):
    return start_module_server("raw_ws:app", "--access-log")


@pytest.fixture(scope="module")
def wss_server(start_module_server, certificate):
    return start_module_server("raw_ws:app", "--tls-cert", certificate[0], "--tls-key", certificate[1])


def stats(client):
    return json.loads(client.get("/stats"))


# ---------------------------------------------------------------------------
# advertising and refusals


def test_asgi_server_advertises_extended_connect(ws_server):
    with H2WebSockets(ws_server.port) as c:
        assert c.settings.get(SettingCodes.ENABLE_CONNECT_PROTOCOL) == 1, c.settings


@pytest.mark.parametrize("target, options", [("raw_wsgi:app", []), ("raw_ws:app", ["--no-websockets"])], ids=["wsgi", "no-websockets"])
def test_without_websockets_nothing_is_advertised_and_a_connect_gets_501(start_server, target, options):
    server = start_server(target, *options)
    with H2WebSockets(server.port) as c:
        assert SettingCodes.ENABLE_CONNECT_PROTOCOL not in c.settings, c.settings
        stream = c.open("/echo")
        c.wait_for(lambda: stream.ended, "the 501 to end the stream")
        assert stream.status == 501 and b"WebSocket" in stream.body, (stream.status, stream.body)
        # Only the stream was refused: the connection serves on.
        assert c.get("/") is not None and c.terminated is None


def test_another_protocol_over_extended_connect_gets_501(ws_server):
    with H2WebSockets(ws_server.port) as c:
        stream = c.open("/echo", protocol="webtransport")
        c.wait_for(lambda: stream.ended, "the 501 to end the stream")
        assert stream.status == 501 and b"webtransport" in stream.body, (stream.status, stream.body)


def test_a_connect_that_ends_its_stream_gets_400(ws_server):
    with H2WebSockets(ws_server.port) as c:
        stream = c.open("/echo", end_stream=True)
        c.wait_for(lambda: stream.status is not None, "the 400")
        assert stream.status == 400


# ---------------------------------------------------------------------------
# serving


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "h2-tls"])
def test_echo_text_and_binary(ws_server, wss_server, certificate, tls):
    server = wss_server if tls else ws_server
    with H2WebSockets(server.port, tls=tls_context(certificate) if tls else None) as c:
        ws = c.accepted("/echo")
        c.send_text(ws, "hello over h2")
        c.send_bytes(ws, bytes(range(256)) * 300)  # 76,800 bytes: more than one DATA frame and one window
        messages = c.wait_messages(ws, 2)
        assert messages[0] == (Opcode.TEXT, "hello over h2")
        assert messages[1] == (Opcode.BINARY, bytearray(bytes(range(256)) * 300))
        c.close_ws(ws, 1000, "done")
        c.wait_for(lambda: ws.ended, "the server to end the stream after the close handshake")
        assert ws.close[0] == CloseReason.NORMAL_CLOSURE and ws.reset is None


def test_scope_says_http2(ws_server, wss_server, certificate):
    for server, tls, scheme in ((ws_server, None, "ws"), (wss_server, tls_context(certificate), "wss")):
        with H2WebSockets(server.port, tls=tls) as c:
            ws = c.accepted("/scope?room=7", headers=[("sec-websocket-protocol", "chat.v1, chat.v2"), ("x-probe", "h2")])
            report = json.loads(c.wait_messages(ws, 1)[0][1])
        assert report["type"] == "websocket" and report["http_version"] == "2" and report["scheme"] == scheme
        assert report["path"] == "/scope" and report["query_string"] == "room=7"
        assert report["subprotocols"] == ["chat.v1", "chat.v2"]
        headers = dict(report["headers"])
        assert headers["host"] == c.authority and headers["x-probe"] == "h2" and headers["sec-websocket-version"] == "13"
        assert not any(name.startswith(":") for name, _ in report["headers"])
        assert report["has_method"] is False and report["has_state"] is True


def test_subprotocol_and_extra_headers_are_in_the_200(ws_server):
    with H2WebSockets(ws_server.port) as c:
        ws = c.accepted("/subprotocol", headers=[("sec-websocket-protocol", "chat.v1, chat.v2")])
        assert ws.headers.get("sec-websocket-protocol") == "chat.v2"
        assert c.wait_messages(ws, 1)[0] == (Opcode.TEXT, "chose chat.v2")
        extra = c.accepted("/headers")
        assert extra.headers.get("x-extra") == "yes" and extra.headers.get("set-cookie") == "session=abc"
        # No HTTP/1.1 handshake fields in a 200 over HTTP/2.
        assert "sec-websocket-accept" not in extra.headers and "upgrade" not in extra.headers


def test_denial_response_and_rejection(ws_server):
    with H2WebSockets(ws_server.port) as c:
        denied = c.open("/deny")
        c.wait_for(lambda: denied.ended, "the denial response to end")
        assert denied.status == 401 and denied.headers.get("x-denied") == "1" and denied.body == b"not allowed"
        rejected = c.open("/reject")
        c.wait_for(lambda: rejected.ended or rejected.reset is not None, "the rejection")
        assert rejected.status == 403
        assert c.terminated is None


def test_close_codes_both_ways(ws_server):
    with H2WebSockets(ws_server.port) as c:
        c.get("/reset")
        ws = c.accepted("/echo")
        c.close_ws(ws, 4002, "client bye")
        c.wait_for(lambda: ws.close is not None, "the server's close frame")
        assert ws.close[0] == 4002  # echoed
        c.send(ws, b"", end_stream=True)
        c.wait_for(lambda: ws.ended, "the end of the stream")
        assert poll(lambda: [4002, "client bye"] in stats(c)["disconnects"]), stats(c)

        closing = c.accepted("/close")
        c.send_text(closing, "anything")
        c.wait_for(lambda: closing.close is not None, "the application's close")
        assert closing.close == (4001, "bye")
        c.close_ws(closing, 4001)
        c.send(closing, b"", end_stream=True)
        c.wait_for(lambda: closing.ended, "the end of the stream")
        assert closing.reset is None
        assert poll(lambda: [4001, ""] in stats(c)["disconnects"]), stats(c)


def test_many_websockets_and_requests_share_one_connection(ws_server):
    with H2WebSockets(ws_server.port) as c:
        sockets = [c.accepted("/echo") for _ in range(20)]
        for i, ws in enumerate(sockets):
            c.send_text(ws, "socket %d" % i)
        assert json.loads(c.get("/stats"))  # a plain request among them
        for i, ws in enumerate(sockets):
            assert c.wait_messages(ws, 1)[0] == (Opcode.TEXT, "socket %d" % i)
        for ws in sockets:
            c.close_ws(ws, 1000)
            c.send(ws, b"", end_stream=True)
        c.wait_for(lambda: all(ws.ended for ws in sockets), "every stream to end")


def test_an_application_that_does_not_read_stops_its_client_by_flow_control(ws_server):
    with H2WebSockets(ws_server.port) as c:
        c.get("/reset")
        ws = c.accepted("/slow")
        sent = 0
        payload = b"m" * 1024
        # The server stops taking DATA once the WebSocket's queue is full: the stream's window runs out.
        deadline = time.monotonic() + 20
        while c.conn.local_flow_control_window(ws.id) >= 1100:
            assert time.monotonic() < deadline, "the window never closed after %d messages" % sent
            c.send_bytes(ws, payload)
            sent += 1
            c.pump(0.01)
        assert sent < 4000, "the server took %d KiB that the application never read" % sent
        assert c.get("/release") == b"released"
        # Released, the application reads it all, and the window opens for the rest.
        c.wait_for(lambda: c.conn.local_flow_control_window(ws.id) >= 1100, "the window to reopen")
        c.send_text(ws, "done")
        count = int(c.wait_messages(ws, 1)[0][1])
        assert count == sent


def test_message_too_big_closes_1009(start_server):
    server = start_server("raw_ws:app", "--ws-max-message", "1000")
    with H2WebSockets(server.port) as c:
        ws = c.accepted("/echo")
        c.send_bytes(ws, b"x" * 2000)
        c.wait_for(lambda: ws.close is not None, "the close for a message over --ws-max-message")
        assert ws.close[0] == 1009


def test_permessage_deflate_over_h2(start_server):
    server = start_server("raw_ws:app", "--ws-compress")
    deflate = PerMessageDeflate()
    with H2WebSockets(server.port) as c:
        # wsproto's own offer: client_max_window_bits=15; server_max_window_bits=15.
        ws = c.accepted("/echo", headers=[("sec-websocket-extensions", "%s; %s" % (deflate.name, deflate.offer()))])
        agreed = ws.headers.get("sec-websocket-extensions", "")
        assert agreed.startswith("permessage-deflate"), ws.headers
        deflate.finalize(agreed)
        ws.frames = FrameProtocol(client=True, extensions=[deflate])  # wsproto keeps only the extensions agreed by then
        text = "compressible " * 500
        c.send_text(ws, text)
        assert c.wait_messages(ws, 1)[0] == (Opcode.TEXT, text)


def test_client_reset_tells_the_application(ws_server):
    with H2WebSockets(ws_server.port) as c:
        c.get("/reset")
        ws = c.accepted("/wait")
        c.conn.reset_stream(ws.id, ErrorCodes.CANCEL)
        c.flush()
        assert poll(lambda: [1006, ""] in stats(c)["disconnects"]), stats(c)


def test_access_log_shows_the_connect(ws_server):
    with H2WebSockets(ws_server.port) as c:
        ws = c.accepted("/echo?probe=logged")
        c.close_ws(ws, 1000)
    assert ws_server.wait_for_output('"CONNECT /echo?probe=logged HTTP/2" 200', timeout=5), ws_server.output()[-2000:]


def test_rate_limit_refuses_a_connect_with_429_and_logs_it(start_server):
    server = start_server("raw_ws:app", "--rate-limit", "1/m", "--rate-limit-burst", "1", "--access-log")
    with H2WebSockets(server.port) as c:
        c.accepted("/echo")
        second = c.open("/echo?second")
        c.wait_for(lambda: second.ended, "the 429")
        assert second.status == 429 and "retry-after" in second.headers
    assert server.wait_for_output('"CONNECT /echo?second HTTP/2" 429', timeout=5), server.output()[-2000:]


def test_drain_closes_websockets_with_1001(start_server):
    server = start_server("raw_ws:app")
    with H2WebSockets(server.port) as c:
        ws = c.accepted("/wait")
        server.terminate()
        c.wait_for(lambda: ws.close is not None, "the server's close on drain")
        assert ws.close[0] == 1001
        c.close_ws(ws, 1001)
        c.send(ws, b"", end_stream=True)
        c.wait_for(lambda: ws.ended, "the stream to end")
    assert server.wait_exit(30) == 0, server.output()[-2000:]


def test_pings_keep_the_websocket_alive(start_server):
    server = start_server("raw_ws:app", "--ws-ping-interval", "1", "--ws-ping-timeout", "5")
    with H2WebSockets(server.port) as c:
        ws = c.accepted("/echo")
        c.wait_for(lambda: ws.pings >= 2, "two pings from the server")
        c.send_text(ws, "still here")
        assert c.wait_messages(ws, 1)[0] == (Opcode.TEXT, "still here")


# ---------------------------------------------------------------------------
# Chromium


@pytest.mark.skipif(not chromium.available(), reason="Chromium is not installed")
def test_chromium_opens_its_websocket_over_the_pages_http2_connection(wss_server, certificate):
    port = wss_server.port
    with chromium.Chromium(spki_hashes=[chromium.spki_sha256_base64(certificate[0])]) as browser:
        page = browser.open("https://127.0.0.1:%d/stats" % port)
        assert page.protocol == "h2", page.protocol
        script = """new Promise((resolve, reject) => {
            const results = {};
            const scope = new WebSocket("wss://127.0.0.1:%d/scope");
            scope.onmessage = (e) => { results.scope = JSON.parse(e.data); next(); };
            scope.onerror = () => reject("the /scope WebSocket failed");
            function next() {
                const echo = new WebSocket("wss://127.0.0.1:%d/echo");
                echo.onopen = () => echo.send("from chromium");
                echo.onmessage = (e) => { results.echo = e.data; echo.close(4100, "page done"); };
                echo.onclose = (e) => { results.close = [e.code, e.reason, e.wasClean]; resolve(results); };
                echo.onerror = () => reject("the /echo WebSocket failed");
            }
        })""" % (port, port)
        results = page.evaluate(script, timeout=20)
        recorded = json.loads(page.fetch("/stats").body)
    assert results["scope"]["http_version"] == "2", results
    assert results["scope"]["scheme"] == "wss"
    assert results["echo"] == "from chromium"
    # A clean close: the server echoes the code (without the reason) and ends the stream.
    assert results["close"][0] == 4100 and results["close"][2] is True, results
    assert [4100, "page done"] in recorded["disconnects"], recorded
