"""WebSocket over HTTP/1.1 upgrade for ASGI applications (RFC 6455, the ASGI WebSocket protocol).

Two kinds of client: the ``websockets`` library (an independent, complete implementation; CPython
3.11 here, skipped where it is not installed) and ``WsRaw`` below, which writes and reads frames
byte by byte so that tests can send what a well-behaved library never would (bad UTF-8, unmasked
frames, pings it never answers) and look at the wire (compressed payloads).
"""

import asyncio
import base64
import json
import os
import socket
import struct
import time
import zlib

import pytest

from conftest import REFERENCE, poll, settled

try:
    from websockets.sync.client import connect as ws_connect
    from websockets.exceptions import ConnectionClosed, InvalidStatus
except ImportError:  # CPython 3.13 on this machine has no websockets wheel
    ws_connect = None

needs_websockets = pytest.mark.skipif(ws_connect is None, reason="the websockets client library is not installed")

TEXT, BINARY, CLOSE, PING, PONG, CONTINUATION = 0x1, 0x2, 0x8, 0x9, 0xA, 0x0

# uvicorn (the reference) offers permessage-deflate by default; Peregrine only with --ws-compress.
COMPRESS = ["--ws-compress"]


class WsRaw:
    """A WebSocket client that writes frames by hand."""

    def __init__(self, port, path="/echo", headers=(), timeout=10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            "GET %s HTTP/1.1" % path,
            "Host: 127.0.0.1:%d" % port,
            "Upgrade: websocket",
            "Connection: Upgrade",
            "Sec-WebSocket-Key: " + key,
            "Sec-WebSocket-Version: 13",
        ] + ["%s: %s" % h for h in headers]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        head = self._read_until(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        self.status = int(status_line.split()[1])
        self.headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            self.headers.setdefault(name.strip().lower(), []).append(value.strip())

    def header(self, name):
        values = self.headers.get(name)
        return ", ".join(values) if values else None

    def _read_until(self, marker):
        while marker not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("connection closed; received %r" % self.buf[:300])
            self.buf += data
        head, _, self.buf = self.buf.partition(marker)
        return head

    def _read_exactly(self, n):
        while len(self.buf) < n:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("connection closed")
            self.buf += data
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def rest_of_body(self):
        """For a refused handshake: the response body (the server closes after it)."""
        while True:
            data = self.sock.recv(65536)
            if not data:
                return self.buf
            self.buf += data

    @staticmethod
    def frame(opcode, payload=b"", fin=True, rsv1=False, mask=True):
        first = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
        n = len(payload)
        mask_bit = 0x80 if mask else 0
        if n < 126:
            head = struct.pack("!BB", first, mask_bit | n)
        elif n < 65536:
            head = struct.pack("!BBH", first, mask_bit | 126, n)
        else:
            head = struct.pack("!BBQ", first, mask_bit | 127, n)
        if not mask:
            return head + payload
        key = os.urandom(4)
        masked = bytes(b ^ key[i % 4] for i, b in enumerate(payload)) if n < 4096 else _xor(payload, key)
        return head + key + masked

    def send(self, opcode, payload=b"", **kwargs):
        self.sock.sendall(self.frame(opcode, payload, **kwargs))

    def send_text(self, text):
        self.send(TEXT, text.encode())

    def send_close(self, code=1000, reason=""):
        self.send(CLOSE, struct.pack("!H", code) + reason.encode())

    def recv_frame(self):
        """(fin, rsv1, opcode, payload) of the next frame from the server (which must not mask)."""
        b1, b2 = self._read_exactly(2)
        assert not b2 & 0x80, "server frames must not be masked"
        n = b2 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", self._read_exactly(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", self._read_exactly(8))
        return bool(b1 & 0x80), bool(b1 & 0x40), b1 & 0x0F, self._read_exactly(n)

    def recv_data(self):
        """The next text or binary frame, answering nothing; pings and pongs are skipped."""
        while True:
            fin, rsv1, opcode, payload = self.recv_frame()
            if opcode in (PING, PONG):
                continue
            return opcode, payload

    def expect_close(self):
        """Reads up to the server's close frame; returns (code, reason) (code None when the frame is empty)."""
        while True:
            fin, rsv1, opcode, payload = self.recv_frame()
            if opcode == CLOSE:
                if not payload:
                    return None, ""
                return struct.unpack("!H", payload[:2])[0], payload[2:].decode()

    def expect_eof(self, timeout=10):
        """The server closes the TCP connection (after its close frame)."""
        self.sock.settimeout(timeout)
        while True:
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                return
            if not data:
                return

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _xor(payload, key):
    n = len(payload)
    whole = int.from_bytes(payload, "big")
    mask = int.from_bytes((key * (n // 4 + 1))[:n], "big")
    return (whole ^ mask).to_bytes(n, "big")


@pytest.fixture(scope="module")
def ws_server(start_module_server):
    return start_module_server("raw_ws:app")


def stats(server):
    return server.get("/stats").json()


# ---------------------------------------------------------------------------
# Echo, scope, handshake


@needs_websockets
def test_echo_text_and_binary_with_websockets_library(ws_server):
    with ws_connect("ws://127.0.0.1:%d/echo" % ws_server.port) as ws:
        ws.send("héllo")
        assert ws.recv() == "héllo"
        ws.send(b"\x00\x01\xff")
        assert ws.recv() == b"\x00\x01\xff"
        ws.send("")
        assert ws.recv() == ""


def test_echo_raw_frames(ws_server):
    with WsRaw(ws_server.port) as ws:
        assert ws.status == 101
        assert ws.header("upgrade").lower() == "websocket"
        ws.send_text("one")
        assert ws.recv_data() == (TEXT, b"one")
        ws.send(BINARY, b"\x01\x02")
        assert ws.recv_data() == (BINARY, b"\x01\x02")
        ws.send_close(1000)
        assert ws.expect_close() == (1000, "")
        ws.expect_eof()


def test_accept_key_is_rfc6455(ws_server):
    import hashlib

    sock = socket.create_connection(("127.0.0.1", ws_server.port), timeout=10)
    key = "dGhlIHNhbXBsZSBub25jZQ=="  # the example of RFC 6455 1.3
    sock.sendall(("GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % key).encode())
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    sock.close()
    assert data.startswith(b"HTTP/1.1 101 ")
    assert b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in data
    assert base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()) in data


def test_scope(ws_server):
    with WsRaw(ws_server.port, "/scope?x=1&y=%20", headers=[("X-Custom", "v"), ("Sec-WebSocket-Protocol", "a, b")]) as ws:
        assert ws.status == 101
        opcode, payload = ws.recv_data()
        scope = json.loads(payload)
    assert scope["type"] == "websocket"
    assert scope["http_version"] == "1.1"
    assert scope["scheme"] == "ws"
    assert scope["path"] == "/scope"
    assert scope["raw_path"] == "/scope"
    assert scope["query_string"] == "x=1&y=%20"
    assert scope["subprotocols"] == ["a", "b"]
    assert ["x-custom", "v"] in scope["headers"]
    assert scope["client"][0] == "127.0.0.1"
    assert scope["server"] == ["127.0.0.1", ws_server.port]
    assert scope["has_state"] is True
    assert scope["has_method"] is False
    assert "websocket.http.response" in scope["extensions"]
    assert scope["asgi"]["version"] == "3.0"


def test_scope_behind_a_trusted_proxy(ws_server):
    # 127.0.0.1 is trusted by default: the scheme and client come from its headers.
    headers = [("X-Forwarded-Proto", "https"), ("X-Forwarded-For", "203.0.113.7")]
    with WsRaw(ws_server.port, "/scope", headers=headers) as ws:
        scope = json.loads(ws.recv_data()[1])
    assert scope["scheme"] == "wss"
    assert scope["client"][0] == "203.0.113.7"


def test_subprotocol_negotiation(ws_server):
    with WsRaw(ws_server.port, "/subprotocol", headers=[("Sec-WebSocket-Protocol", "chat.v1, chat.v2")]) as ws:
        assert ws.status == 101
        assert ws.header("sec-websocket-protocol") == "chat.v2"
        assert ws.recv_data() == (TEXT, b"chose chat.v2")
    with WsRaw(ws_server.port, "/subprotocol") as ws:
        assert ws.status == 101
        assert ws.header("sec-websocket-protocol") is None
        assert ws.recv_data() == (TEXT, b"chose None")


@needs_websockets
def test_subprotocol_with_websockets_library(ws_server):
    with ws_connect("ws://127.0.0.1:%d/subprotocol" % ws_server.port, subprotocols=["chat.v1", "chat.v2"]) as ws:
        assert ws.subprotocol == "chat.v2"
        assert ws.recv() == "chose chat.v2"


def test_extra_headers(ws_server):
    with WsRaw(ws_server.port, "/headers") as ws:
        assert ws.status == 101
        assert ws.header("x-extra") == "yes"
        assert ws.header("set-cookie") == "session=abc"
        assert ws.recv_data() == (TEXT, b"hello")


@pytest.mark.peregrine_only
def test_unsupported_version_gets_426(ws_server):
    # RFC 6455 4.2.2: 426 naming the version the server speaks (uvicorn answers 400).
    sock = socket.create_connection(("127.0.0.1", ws_server.port), timeout=10)
    sock.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n")
    data = _read_to_close(sock)
    assert data.startswith(b"HTTP/1.1 426 ")
    assert b"sec-websocket-version: 13" in data.lower()


@pytest.mark.peregrine_only  # uvicorn (h11 + websockets) loses frames that arrive with the request
def test_frames_sent_with_the_handshake_are_read(ws_server):
    # A client may send its first frames right behind the request, before it sees the 101.
    sock = socket.create_connection(("127.0.0.1", ws_server.port), timeout=10)
    sock.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
                 + WsRaw.frame(TEXT, b"early") + WsRaw.frame(BINARY, b"bird"))
    data = b""
    while not data.endswith(b"bird"):
        chunk = sock.recv(65536)
        assert chunk, "closed early: %r" % data
        data += chunk
    sock.close()
    head, _, frames = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101 ")
    assert frames == b"\x81\x05early\x82\x04bird"


def test_bad_key_is_refused(ws_server):
    # A key that is not 16 bytes of base64: 400.
    sock = socket.create_connection(("127.0.0.1", ws_server.port), timeout=10)
    sock.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Key: short\r\nSec-WebSocket-Version: 13\r\n\r\n")
    assert _read_to_close(sock).startswith(b"HTTP/1.1 400 ")


def _read_to_close(sock):
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    sock.close()
    return data


def test_denial_response(ws_server):
    with WsRaw(ws_server.port, "/deny") as ws:
        assert ws.status == 401
        assert ws.header("x-denied") == "1"
        assert ws.header("content-length") == "11"
        assert ws.rest_of_body() == b"not allowed"


@needs_websockets
def test_denial_response_with_websockets_library(ws_server):
    with pytest.raises(InvalidStatus) as refused:
        ws_connect("ws://127.0.0.1:%d/deny" % ws_server.port)
    assert refused.value.response.status_code == 401
    assert bytes(refused.value.response.body) == b"not allowed"


def test_close_before_accept_is_403(ws_server):
    with WsRaw(ws_server.port, "/reject") as ws:
        assert ws.status == 403


# ---------------------------------------------------------------------------
# Messages: fragments, control frames, sizes, UTF-8


def test_fragmented_message_with_interleaved_ping(ws_server):
    with WsRaw(ws_server.port) as ws:
        ws.send(TEXT, b"frag", fin=False)
        ws.send(PING, b"in-between")
        ws.send(CONTINUATION, "mén".encode(), fin=False)
        ws.send(CONTINUATION, b"ted", fin=True)
        frames = [ws.recv_frame(), ws.recv_frame()]
        assert (True, False, PONG, b"in-between") in frames
        assert (True, False, TEXT, "fragménted".encode()) in frames


def test_text_split_inside_a_utf8_sequence(ws_server):
    encoded = "é".encode()
    with WsRaw(ws_server.port) as ws:
        ws.send(TEXT, encoded[:1], fin=False)
        ws.send(CONTINUATION, encoded[1:], fin=True)
        assert ws.recv_data() == (TEXT, encoded)


def test_large_messages(ws_server):
    big = os.urandom(3 * 1024 * 1024)
    with WsRaw(ws_server.port) as ws:
        ws.send(BINARY, big)
        assert ws.recv_data() == (BINARY, big)
        # The same size again in 64 KiB fragments.
        pieces = [big[i:i + 65536] for i in range(0, len(big), 65536)]
        for i, piece in enumerate(pieces):
            ws.send(BINARY if i == 0 else CONTINUATION, piece, fin=i == len(pieces) - 1)
        assert ws.recv_data() == (BINARY, big)


@needs_websockets
def test_large_and_fragmented_with_websockets_library(ws_server):
    with ws_connect("ws://127.0.0.1:%d/echo" % ws_server.port, max_size=None) as ws:
        payload = "x" * (2 * 1024 * 1024)
        ws.send(payload)
        assert ws.recv() == payload
        ws.send([b"ab", b"cd", b"ef"])
        assert ws.recv() == b"abcdef"


def test_message_size_limit(start_server):
    server = start_server("raw_ws:app", "--ws-max-message", "1000")
    with WsRaw(server.port) as ws:
        ws.send(BINARY, b"x" * 1000)
        assert ws.recv_data() == (BINARY, b"x" * 1000)
        ws.send(BINARY, b"x" * 1001)
        assert ws.expect_close()[0] == 1009
        ws.expect_eof()
    # A message that only grows past the limit through its fragments.
    with WsRaw(server.port) as ws:
        ws.send(TEXT, b"a" * 600, fin=False)
        ws.send(CONTINUATION, b"a" * 600, fin=True)
        assert ws.expect_close()[0] == 1009
        ws.expect_eof()


def test_invalid_utf8_closes_1007(ws_server):
    with WsRaw(ws_server.port) as ws:
        ws.send(TEXT, b"ok \xff\xfe")
        assert ws.expect_close()[0] == 1007
        ws.expect_eof()
    # Also when the bad byte arrives in a continuation.
    with WsRaw(ws_server.port) as ws:
        ws.send(TEXT, b"fine", fin=False)
        ws.send(CONTINUATION, b"\xc3\x28", fin=True)
        assert ws.expect_close()[0] == 1007


@pytest.mark.parametrize("frame", [
    pytest.param(WsRaw.frame(TEXT, b"unmasked", mask=False), id="unmasked"),
    pytest.param(WsRaw.frame(0x3, b"x"), id="reserved-opcode"),
    pytest.param(WsRaw.frame(TEXT, b"x", rsv1=True), id="rsv1-without-extension"),
    pytest.param(WsRaw.frame(CONTINUATION, b"x"), id="continuation-without-start"),
    pytest.param(WsRaw.frame(PING, b"x", fin=False), id="fragmented-ping"),
    pytest.param(WsRaw.frame(PING, b"x" * 126), id="ping-over-125"),
    pytest.param(WsRaw.frame(CLOSE, b"\x03"), id="close-with-1-byte"),
    pytest.param(WsRaw.frame(CLOSE, struct.pack("!H", 1005)), id="close-with-reserved-code"),
])
def test_protocol_errors_close_1002(ws_server, frame):
    ws_server.get("/reset")
    with WsRaw(ws_server.port) as ws:
        ws.sock.sendall(frame)
        try:
            code = ws.expect_close()[0]
        except (EOFError, ConnectionResetError):
            # After a broken close frame the closing handshake has begun: failing the connection
            # without a close frame of its own is allowed (RFC 6455 7.1.7), and Netty does so.
            assert frame[0] & 0x0F == CLOSE
            return
        assert code == 1002
        ws.expect_eof()
    if not REFERENCE:
        # The application hears the code the server closed with.
        assert poll(lambda: [c for c, _ in stats(ws_server)["disconnects"]]) == [1002]


def test_ping_answered_with_pong(ws_server):
    with WsRaw(ws_server.port) as ws:
        ws.send(PING, b"are you there")
        assert ws.recv_frame() == (True, False, PONG, b"are you there")


# ---------------------------------------------------------------------------
# Closing


def test_client_close_code_reaches_app(start_server):
    server = start_server("raw_ws:app")
    with WsRaw(server.port) as ws:
        ws.send_text("hi")
        assert ws.recv_data() == (TEXT, b"hi")
        ws.send_close(4000, "client done")
        assert ws.expect_close()[0] == 4000
        ws.expect_eof()
    assert poll(lambda: stats(server)["disconnects"]) == [[4000, "client done"]]


def test_server_close_code_and_reason(start_server):
    server = start_server("raw_ws:app")
    with WsRaw(server.port, "/close") as ws:
        ws.send_text("go")
        assert ws.expect_close() == (4001, "bye")
        ws.send_close(4001)
        ws.expect_eof()
    if not REFERENCE:  # the application hears the code the peer answered with (uvicorn reports 1005)
        assert poll(lambda: stats(server)["disconnects"]) == [[4001, ""]]


def test_messages_and_close_of_one_turn_arrive_in_order(start_server):
    # The first send of a turn can reach the I/O thread before the turn ends and the close after it.
    server = start_server("raw_ws:app")
    for n in (1, 2, 40):
        with WsRaw(server.port, "/burst") as ws:
            ws.send_text(str(n))
            assert [ws.recv_data() for _ in range(n)] == [(TEXT, str(i).encode()) for i in range(n)]
            assert ws.expect_close() == (4003, "burst done")


@needs_websockets
def test_close_codes_with_websockets_library(start_server):
    server = start_server("raw_ws:app")
    with ws_connect("ws://127.0.0.1:%d/close" % server.port) as ws:
        ws.send("go")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv()
    assert closed.value.rcvd.code == 4001
    assert closed.value.rcvd.reason == "bye"
    with ws_connect("ws://127.0.0.1:%d/echo" % server.port) as ws:
        ws.close(code=4002, reason="later")
    assert poll(lambda: [4002, "later"] in stats(server)["disconnects"])


@pytest.mark.peregrine_only
def test_app_failure_after_accept_closes_1011(ws_server):
    with WsRaw(ws_server.port, "/fail") as ws:
        assert ws.status == 101
        assert ws.expect_close()[0] == 1011
        ws.send_close(1011)
        ws.expect_eof()


@pytest.mark.peregrine_only  # uvicorn drops the connection of an application that returns without closing
@needs_websockets
def test_app_returning_closes_cleanly_with_websockets_library(ws_server):
    from websockets.exceptions import ConnectionClosedOK

    for path in ("/headers", "/return"):  # closing itself, and returning with the connection open
        with ws_connect("ws://127.0.0.1:%d%s" % (ws_server.port, path)) as ws:
            ws.recv()
            with pytest.raises(ConnectionClosedOK) as closed:
                ws.recv()
            assert closed.value.rcvd.code == 1000


# ---------------------------------------------------------------------------
# Keepalive


@pytest.mark.peregrine_only
def test_server_pings_and_keeps_answering_peer(start_server):
    server = start_server("raw_ws:app", "--ws-ping-interval", "100", "--ws-ping-timeout", "5000")
    with WsRaw(server.port) as ws:
        pings = 0
        while pings < 3:
            fin, rsv1, opcode, payload = ws.recv_frame()
            assert opcode == PING
            ws.send(PONG, payload)
            pings += 1
        ws.send_text("still here")
        assert ws.recv_data() == (TEXT, b"still here")


@pytest.mark.peregrine_only
def test_dead_peer_closed_1011(start_server):
    server = start_server("raw_ws:app", "--ws-ping-interval", "100", "--ws-ping-timeout", "200")
    with WsRaw(server.port, "/wait") as ws:
        assert ws.status == 101
        # Never answer: the pings go unanswered and the server gives up on us.
        assert ws.expect_close()[0] == 1011
        ws.expect_eof()
    assert poll(lambda: [c for c, _ in stats(server)["disconnects"]]) == [1011]


@pytest.mark.peregrine_only
def test_keepalive_disabled(start_server):
    server = start_server("raw_ws:app", "--ws-ping-interval", "0")
    with WsRaw(server.port, timeout=1.5) as ws:
        with pytest.raises(socket.timeout):
            ws.recv_frame()  # nothing at all arrives: no pings
        ws.sock.settimeout(10)
        ws.send_text("x")
        assert ws.recv_data() == (TEXT, b"x")


# ---------------------------------------------------------------------------
# Compression


def _offer(extra=""):
    return [("Sec-WebSocket-Extensions", "permessage-deflate; client_max_window_bits" + extra)]


def _deflate(data, wbits=15):
    c = zlib.compressobj(wbits=-wbits)
    out = c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(b"\x00\x00\xff\xff")
    return out[:-4]


def _inflate(data):
    return zlib.decompressobj(wbits=-15).decompress(data + b"\x00\x00\xff\xff")


def test_compression_on_compresses_the_wire(start_server):
    server = start_server("raw_ws:app", *COMPRESS)
    text = ("peregrine " * 2000).encode()
    with WsRaw(server.port, headers=_offer()) as ws:
        assert ws.status == 101
        assert ws.header("sec-websocket-extensions").startswith("permessage-deflate")
        ws.send(TEXT, _deflate(text), rsv1=True)
        fin, rsv1, opcode, payload = ws.recv_frame()
        assert opcode == TEXT and rsv1, "the echo should come back compressed"
        assert len(payload) < len(text) // 10
        assert _inflate(payload) == text
        # An uncompressed message is allowed too (RSV1 clear).
        ws.send_text("plain")
        fin, rsv1, opcode, payload = ws.recv_frame()
        assert (_inflate(payload) if rsv1 else payload) == b"plain"


def test_compression_parameters(start_server):
    server = start_server("raw_ws:app", *COMPRESS)
    offer = [("Sec-WebSocket-Extensions",
              "permessage-deflate; server_no_context_takeover; client_no_context_takeover; client_max_window_bits=10")]
    with WsRaw(server.port, headers=offer) as ws:
        agreed = ws.header("sec-websocket-extensions")
        assert agreed.startswith("permessage-deflate")
        assert "server_no_context_takeover" in agreed
        text = ("abc" * 1000).encode()
        for _ in range(2):
            # Without context takeover every message inflates on its own, with a fresh inflater.
            ws.send(TEXT, _deflate(text, wbits=10), rsv1=True)
            fin, rsv1, opcode, payload = ws.recv_frame()
            assert rsv1
            assert zlib.decompressobj(wbits=-15).decompress(payload + b"\x00\x00\xff\xff") == text


@pytest.mark.peregrine_only
def test_compression_offer_limiting_server_window_is_declined(start_server):
    server = start_server("raw_ws:app", *COMPRESS)
    offer = [("Sec-WebSocket-Extensions", "permessage-deflate; server_max_window_bits=10, permessage-deflate")]
    with WsRaw(server.port, headers=offer) as ws:
        # The first offer is declined, the fallback taken.
        assert ws.header("sec-websocket-extensions") == "permessage-deflate"
        text = b"q" * 4000
        ws.send(TEXT, _deflate(text), rsv1=True)
        fin, rsv1, opcode, payload = ws.recv_frame()
        assert rsv1 and _inflate(payload) == text


def test_compressed_message_inflating_past_the_limit_closes_1009(start_server):
    server = start_server("raw_ws:app", "--ws-compress", "--ws-max-message", "10000")
    with WsRaw(server.port, headers=_offer()) as ws:
        assert ws.header("sec-websocket-extensions").startswith("permessage-deflate")
        ws.send(TEXT, _deflate(b"y" * 9000), rsv1=True)
        fin, rsv1, opcode, payload = ws.recv_frame()
        assert _inflate(payload) == b"y" * 9000
        # 200 bytes on the wire, 200 KB once inflated.
        ws.send(TEXT, _deflate(b"z" * 200_000), rsv1=True)
        assert ws.expect_close()[0] == 1009


@pytest.mark.peregrine_only
def test_corrupt_compressed_data_closes_1007(start_server):
    server = start_server("raw_ws:app", "--ws-compress")
    with WsRaw(server.port, headers=_offer()) as ws:
        ws.send(TEXT, b"\xff\xff\xff\xff\xff", rsv1=True)
        assert ws.expect_close()[0] == 1007
        ws.expect_eof()
    # The connection no longer counts as in flight: the server stops without waiting for it.
    assert server.stop() == 0
    assert "still in flight" not in server.output()


@pytest.mark.peregrine_only
def test_compression_off_by_default(ws_server):
    with WsRaw(ws_server.port, headers=_offer()) as ws:
        assert ws.status == 101
        assert ws.header("sec-websocket-extensions") is None
        text = b"z" * 5000
        ws.send(TEXT, text)
        assert ws.recv_frame() == (True, False, TEXT, text)


@needs_websockets
def test_compression_with_websockets_library(start_server):
    server = start_server("raw_ws:app", *COMPRESS)
    with ws_connect("ws://127.0.0.1:%d/echo" % server.port, compression="deflate") as ws:
        assert "permessage-deflate" in ws.response.headers.get("sec-websocket-extensions", "")
        for i in range(5):
            ws.send("message %d " % i * 100)
            assert ws.recv() == "message %d " % i * 100


# ---------------------------------------------------------------------------
# Backpressure


@pytest.mark.peregrine_only
def test_slow_application_stops_reading_and_drops_nothing(start_server):
    server = start_server("raw_ws:app", "--ws-max-queue", "4", "--ws-max-queue-bytes", "65536")
    frame = WsRaw.frame(BINARY, b"m" * 16384)
    total_frames = 4096  # 64 MiB: far more than any socket buffers hold
    stream = frame * total_frames
    with WsRaw(server.port, "/slow") as ws:
        assert ws.status == 101
        ws.sock.setblocking(False)
        offset = 0
        blocked = False
        while offset < len(stream):
            try:
                offset += ws.sock.send(stream[offset:offset + 1 << 20])
            except BlockingIOError:
                # Kernel buffers full: retry a few times to be sure the server really is not reading.
                time.sleep(0.2)
                try:
                    offset += ws.sock.send(stream[offset:offset + 1 << 20])
                except BlockingIOError:
                    blocked = True
                    break
        assert blocked, "the server kept reading while the application received nothing"
        assert offset < len(stream)
        assert stats(server)["received"] == 0
        server.get("/release")
        ws.sock.setblocking(True)
        ws.sock.settimeout(30)
        ws.sock.sendall(stream[offset:])
        ws.send_text("done")
        assert ws.recv_data() == (TEXT, str(total_frames).encode())


@pytest.mark.peregrine_only
def test_slow_client_makes_send_wait(start_server):
    server = start_server("raw_ws:app")
    n, size = 400, 65536
    with WsRaw(server.port, "/flood") as ws:
        ws.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        ws.send_text("%d %d" % (n, size))
        # We read nothing: the application's sends must wait rather than buffer 25 MiB in the server.
        sent = poll(lambda: stats(server)["sent"] or None, timeout=10)
        assert sent
        assert settled(lambda: stats(server)["sent"], "the application's sends kept going", interval=0.25) < n
        received = 0
        while True:
            opcode, payload = ws.recv_data()
            if opcode == TEXT:
                assert payload == b"end"
                break
            assert len(payload) == size
            received += 1
        assert received == n
        assert stats(server)["sent"] == n


@pytest.mark.peregrine_only
def test_two_tasks_waiting_to_send_both_resume(start_server):
    """Two tasks of one connection send at once to a client that reads nothing: both sends wait, and
    both resume once the client reads (each waiting send once had a future of its own, and the second
    replaced the first, which then waited forever)."""
    server = start_server("raw_ws:app")
    n, size = 100, 65536
    with WsRaw(server.port, "/flood-two") as ws:
        ws.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        ws.send_text("%d %d" % (n, size))
        assert poll(lambda: stats(server)["waiting_sends"] == 2, timeout=20), stats(server)
        ends, received = set(), 0
        while len(ends) < 2:
            opcode, payload = ws.recv_data()
            if opcode == TEXT:
                ends.add(payload)
            else:
                assert len(payload) == size
                received += 1
        assert ends == {b"end a", b"end b"}
        assert received == 2 * n


# ---------------------------------------------------------------------------
# Refusals and drain


def test_wsgi_answers_upgrades_501(start_server):
    server = start_server("raw_wsgi:app")
    with WsRaw(server.port, "/") as ws:
        if REFERENCE:
            pytest.skip("gunicorn serves the upgrade as a plain request")
        assert ws.status == 501


@pytest.mark.peregrine_only
def test_no_websockets_answers_501(start_server):
    server = start_server("raw_ws:app", "--no-websockets")
    with WsRaw(server.port) as ws:
        assert ws.status == 501
    assert server.get("/stats").status_code == 200


@pytest.mark.peregrine_only
def test_drain_closes_1001_and_app_gets_disconnect(start_server, marker_file):
    server = start_server("raw_ws:app", env={"PEREGRINE_TEST_MARKER": str(marker_file)})
    with WsRaw(server.port, "/wait") as ws:
        assert ws.status == 101
        server.terminate()
        assert ws.expect_close()[0] == 1001
        ws.send_close(1001)
        ws.expect_eof()
    assert server.wait_exit(30) == 0
    assert "disconnect 1001" in marker_file.read_text()


def test_health_check_path_does_not_stop_upgrades(start_server):
    server = start_server("raw_ws:app", "--health-check-path", "/healthz") if not REFERENCE else start_server("raw_ws:app")
    with WsRaw(server.port) as ws:
        assert ws.status == 101
        ws.send_text("x")
        assert ws.recv_data() == (TEXT, b"x")


# ---------------------------------------------------------------------------
# FastAPI


@pytest.fixture(scope="module")
def fastapi_server(start_module_server):
    pytest.importorskip("fastapi")
    return start_module_server("fastapi_app:app")


def test_fastapi_echo(fastapi_server):
    with WsRaw(fastapi_server.port, "/ws/echo?prefix=echo") as ws:
        assert ws.status == 101
        ws.send_text("hello")
        assert ws.recv_data() == (TEXT, b"echo: hello")
        ws.send(BINARY, b"\x01\x02")
        assert ws.recv_data() == (BINARY, b"\x01\x02")
        ws.send_close(1000)
        assert ws.expect_close()[0] == 1000


@needs_websockets
def test_fastapi_echo_with_websockets_library(fastapi_server):
    with ws_connect("ws://127.0.0.1:%d/ws/echo?prefix=re" % fastapi_server.port) as ws:
        for i in range(20):
            ws.send("m%d" % i)
            assert ws.recv() == "re: m%d" % i


def test_fastapi_denial_response(fastapi_server):
    with WsRaw(fastapi_server.port, "/ws/deny") as ws:
        assert ws.status == 451
        assert ws.rest_of_body() == b"go away"


def test_fastapi_reject(fastapi_server):
    with WsRaw(fastapi_server.port, "/ws/private") as ws:
        assert ws.status == 403


# ---------------------------------------------------------------------------
# Many connections


async def _echo_once(port, i):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(("GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % key).encode())
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101 "), head
    return reader, writer


async def _many(port, count):
    connections = await asyncio.gather(*[_echo_once(port, i) for i in range(count)])
    # Every connection is open at once; now each echoes one message.
    for i, (reader, writer) in enumerate(connections):
        writer.write(WsRaw.frame(TEXT, b"conn %d" % i))
    echoed = 0
    for i, (reader, writer) in enumerate(connections):
        b1, b2 = await reader.readexactly(2)
        payload = await reader.readexactly(b2 & 0x7F)
        assert payload == b"conn %d" % i
        echoed += 1
    for reader, writer in connections:
        writer.write(WsRaw.frame(CLOSE, struct.pack("!H", 1000)))
        writer.close()
    return echoed


def test_thousand_concurrent_connections_echo(start_server):
    server = start_server("raw_ws:app")
    assert asyncio.run(_many(server.port, 1000)) == 1000
    assert poll(lambda: stats(server)["received"] == 1000)


def test_echo_with_two_workers(start_server):
    server = start_server("raw_ws:app", "--workers", "2")
    for i in range(8):  # spread over both workers
        with WsRaw(server.port) as ws:
            ws.send_text("w%d" % i)
            assert ws.recv_data() == (TEXT, b"w%d" % i)


@pytest.mark.peregrine_only
def test_access_log_records_handshakes(start_server):
    server = start_server("raw_ws:app", "--access-log")
    with WsRaw(server.port, "/echo?x=1", headers=[("User-Agent", "ws-test")]) as ws:
        assert ws.status == 101
    with WsRaw(server.port, "/deny") as ws:
        assert ws.status == 401
    out = server.wait_for_output(lambda o: '"GET /deny HTTP/1.1" 401' in o)
    assert out is not None, server.output()
    assert '"GET /echo?x=1 HTTP/1.1" 101' in out
    assert '"ws-test"' in out
