"""WebSocket over HTTP/3 (RFC 9220, issue 19): an extended CONNECT with ``:protocol websocket`` on one
request stream of an HTTP/3 connection, answered 200, then WebSocket frames in the stream's DATA.

Client: no browser does WebSocket over HTTP/3 and no Python HTTP/3 client is installed, so the client
is ``dev.peregrine.http3.Http3WebSocketClient`` (src/test/java), on Netty's QUIC and HTTP/3
connection handler, run here as a subprocess with the server's own libraries: commands on its stdin,
events as JSON lines on its stdout. Maven's test-compile builds it (bin/test runs that first).

Application: apps/raw_ws.py (plain ASGI), the same endpoints test_websocket.py and
test_websocket_h2.py use.
"""

import hashlib
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import poll
from test_http3 import free_udp_port, start_h3
from test_tls import certs, https_client  # noqa: F401 (certs is the module-scoped fixture making the test certificates)

pytestmark = pytest.mark.peregrine_only

ROOT = Path(__file__).resolve().parents[4]
CLIENT_CLASS = ROOT / "target" / "test-classes" / "dev" / "peregrine" / "http3" / "Http3WebSocketClient.class"
SETTINGS_ENABLE_CONNECT_PROTOCOL = "8"


def java():
    """A JDK 25's java, found as bin/peregrine finds it: $JAVA_HOME, else under /usr/lib/jvm."""
    homes = [os.environ.get("JAVA_HOME")] + sorted(str(p) for p in Path(os.environ.get("PEREGRINE_JVM_DIR", "/usr/lib/jvm")).glob("*"))
    for home in filter(None, homes):
        candidate = Path(home) / "bin" / "java"
        if candidate.exists():
            version = subprocess.run([str(candidate), "-version"], capture_output=True, text=True).stderr
            if 'version "25' in version:
                return str(candidate)
    raise AssertionError("no JDK 25 for the HTTP/3 WebSocket client (set JAVA_HOME)")


class H3WebSockets:
    """One HTTP/3 connection of the Java client; its streams are named by the test."""

    def __init__(self, port, timeout=15):
        assert CLIENT_CLASS.exists(), "%s is missing: run ./mvnw test-compile" % CLIENT_CLASS
        # The client reuses the server's varint and QPACK integer helpers: its classes come too.
        classpath = os.pathsep.join(str(ROOT / "target" / part) for part in ("test-classes", "classes", "quarkus-app/lib/main/*"))
        self.proc = subprocess.Popen(
            [java(), "-cp", classpath, "dev.peregrine.http3.Http3WebSocketClient", "127.0.0.1", str(port)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        self.events = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.stderr = []
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()
        self.settings = self.wait_for(lambda: self.find(None, "settings"), "the server's SETTINGS", timeout=30)["settings"]

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith("{"):
                with self.lock:
                    self.events.append(json.loads(line))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.proc.stdin.close()
            self.proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()

    def command(self, *fields):
        self.proc.stdin.write("\t".join(str(f) for f in fields) + "\n")
        self.proc.stdin.flush()

    def all(self, stream, event):
        with self.lock:
            return [e for e in self.events if e.get("stream") == stream and e["event"] == event]

    def find(self, stream, event):
        found = self.all(stream, event)
        return found[0] if found else None

    def wait_for(self, predicate, what, timeout=15):
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            assert self.proc.poll() is None or self.events, "the client exited: %s" % "".join(self.stderr)[-2000:]
            assert time.monotonic() < deadline, "waited %.0f s for %s; events: %s" % (timeout, what, self.events[-10:])
            time.sleep(0.02)

    def open(self, name, path, *headers):
        self.command("open", name, path, *headers)
        return self.wait_for(lambda: self.find(name, "headers") or self.find(name, "reset"), "the answer to CONNECT %s" % path)

    def accepted(self, name, path, *headers):
        answer = self.open(name, path, *headers)
        assert answer.get("status") == 200, answer
        return answer

    def messages(self, name, n, timeout=15):
        return self.wait_for(lambda: len(self.all(name, "message")) >= n and self.all(name, "message"), "%d messages on %s" % (n, name), timeout)

    def wait_event(self, name, event, timeout=15):
        return self.wait_for(lambda: self.find(name, event), "%s on %s" % (event, name), timeout)


def pattern_sha256(size):
    """The SHA-256 of the client's binary pattern: byte i is i mod 256."""
    return hashlib.sha256((bytes(range(256)) * (size // 256 + 1))[:size]).hexdigest()


@pytest.fixture(scope="module")
def ws_server(start_module_server, certs):
    return start_h3(start_module_server, certs, "--port", free_udp_port(), "--access-log", target="raw_ws:app")


def stats(server, certs):
    with https_client(server, certs) as c:
        return c.get("/stats").json()


def reset_stats(server, certs):
    with https_client(server, certs) as c:
        assert c.get("/reset").text == "ok"


# ---------------------------------------------------------------------------
# advertising and refusals


def test_server_advertises_extended_connect(ws_server):
    with H3WebSockets(ws_server.port) as c:
        assert c.settings.get(SETTINGS_ENABLE_CONNECT_PROTOCOL) == 1, c.settings


@pytest.mark.parametrize("target, options", [("raw_wsgi:app", []), ("raw_ws:app", ["--no-websockets"])], ids=["wsgi", "no-websockets"])
def test_without_websockets_a_connect_gets_501(start_server, certs, target, options):
    server = start_h3(start_server, certs, "--port", free_udp_port(), *options, target=target)
    with H3WebSockets(server.port) as c:
        # Still advertised: extended CONNECT also serves WebTransport on this connection.
        assert c.settings.get(SETTINGS_ENABLE_CONNECT_PROTOCOL) == 1, c.settings
        answer = c.open("a", "/echo")
        assert answer["status"] == 501, answer
        end = c.wait_event("a", "end")
        assert "WebSocket" in end["body"], end
        # Only the stream was refused: the connection serves on.
        assert c.open("b", "/echo")["status"] == 501
        assert c.find(None, "connection-close") is None


def test_a_connect_that_ends_its_stream_gets_400(ws_server, certs):
    reset_stats(ws_server, certs)
    with H3WebSockets(ws_server.port) as c:
        c.command("open-fin", "a", "/wait")
        answer = c.wait_for(lambda: c.find("a", "headers") or c.find("a", "reset"), "the answer to the CONNECT")
        assert answer.get("status") == 400, answer
        assert "cannot end its stream" in c.wait_event("a", "end")["body"]
        # A stream error only, as over HTTP/2: the connection serves on.
        c.accepted("b", "/echo")
        c.command("close", "b", 1000)
        c.wait_event("b", "close")
        assert c.find(None, "connection-close") is None
    # Refused before the application heard of it: /wait would have recorded its disconnect (1006) first.
    assert poll(lambda: stats(ws_server, certs)["disconnects"]) == [[1000, ""]]


# ---------------------------------------------------------------------------
# serving


def test_echo_text_and_binary_and_a_clean_close(ws_server):
    with H3WebSockets(ws_server.port) as c:
        c.accepted("a", "/echo")
        c.command("text", "a", "hello over h3")
        c.command("binary", "a", 76800)  # more than one QUIC packet, in one DATA frame
        messages = c.messages("a", 2)
        assert messages[0]["type"] == "text" and messages[0]["data"] == "hello over h3"
        assert messages[1]["type"] == "binary" and messages[1]["length"] == 76800 and messages[1]["sha256"] == pattern_sha256(76800)
        c.command("close", "a", 1000, "done")
        assert c.wait_event("a", "close")["code"] == 1000
        # The server ends the stream (FIN) after the close handshake, not a reset.
        c.wait_event("a", "end")
        assert c.find("a", "reset") is None


def test_scope_says_http3(ws_server):
    with H3WebSockets(ws_server.port) as c:
        c.accepted("a", "/scope?room=7", "sec-websocket-protocol: chat.v1, chat.v2", "x-probe: h3")
        report = json.loads(c.messages("a", 1)[0]["data"])
    assert report["type"] == "websocket" and report["http_version"] == "3" and report["scheme"] == "wss"
    assert report["path"] == "/scope" and report["query_string"] == "room=7"
    assert report["subprotocols"] == ["chat.v1", "chat.v2"]
    headers = dict(report["headers"])
    assert headers["host"] == "localhost" and headers["x-probe"] == "h3" and headers["sec-websocket-version"] == "13"
    assert not any(name.startswith(":") for name, _ in report["headers"])
    assert report["has_method"] is False
    assert report["server"] == ["127.0.0.1", ws_server.port] and report["client"][0] == "127.0.0.1", report


def test_subprotocol_and_extra_headers_are_in_the_200(ws_server):
    with H3WebSockets(ws_server.port) as c:
        answer = c.accepted("a", "/subprotocol", "sec-websocket-protocol: chat.v1, chat.v2")
        assert answer["headers"].get("sec-websocket-protocol") == "chat.v2", answer
        assert c.messages("a", 1)[0]["data"] == "chose chat.v2"
        extra = c.accepted("b", "/headers")["headers"]
        assert extra.get("x-extra") == "yes" and extra.get("set-cookie") == "session=abc", extra
        # No HTTP/1.1 handshake fields in a 200 over HTTP/3.
        assert "sec-websocket-accept" not in extra and "upgrade" not in extra and "connection" not in extra


def test_denial_response_and_rejection_are_http3_answers(ws_server):
    with H3WebSockets(ws_server.port) as c:
        denied = c.open("a", "/deny")
        assert denied["status"] == 401 and denied["headers"].get("x-denied") == "1", denied
        assert c.wait_event("a", "end")["body"] == "not allowed"
        rejected = c.open("b", "/reject")
        assert rejected["status"] == 403, rejected
        c.wait_event("b", "end")
        assert c.find(None, "connection-close") is None


def test_close_codes_and_reasons_both_ways(ws_server, certs):
    reset_stats(ws_server, certs)
    with H3WebSockets(ws_server.port) as c:
        c.accepted("a", "/echo")
        c.command("close", "a", 4002, "client bye")
        assert c.wait_event("a", "close")["code"] == 4002  # echoed
        c.wait_event("a", "end")
        assert poll(lambda: [4002, "client bye"] in stats(ws_server, certs)["disconnects"]), stats(ws_server, certs)

        c.accepted("b", "/close")
        c.command("text", "b", "anything")
        close = c.wait_event("b", "close")
        assert (close["code"], close["reason"]) == (4001, "bye")
        c.command("close", "b", 4001)
        c.wait_event("b", "end")
        assert c.find("b", "reset") is None
        assert poll(lambda: [4001, ""] in stats(ws_server, certs)["disconnects"]), stats(ws_server, certs)


def test_message_too_big_closes_1009(start_server, certs):
    server = start_h3(start_server, certs, "--port", free_udp_port(), "--ws-max-message", "1000", target="raw_ws:app")
    with H3WebSockets(server.port) as c:
        c.accepted("a", "/echo")
        c.command("binary", "a", 2000)
        assert c.wait_event("a", "close")["code"] == 1009


def test_client_reset_reaches_the_application_as_1006(ws_server, certs):
    reset_stats(ws_server, certs)
    with H3WebSockets(ws_server.port) as c:
        c.accepted("a", "/wait")
        c.command("reset", "a", 0x10c)  # H3_REQUEST_CANCELLED
        assert poll(lambda: [1006, ""] in stats(ws_server, certs)["disconnects"]), stats(ws_server, certs)


def test_trailers_on_a_websocket_stream_reset_it(ws_server, certs):
    reset_stats(ws_server, certs)
    with H3WebSockets(ws_server.port) as c:
        c.accepted("a", "/wait")
        c.command("trailers", "a")
        c.wait_event("a", "reset")
        assert poll(lambda: [1006, ""] in stats(ws_server, certs)["disconnects"]), stats(ws_server, certs)
        # A stream error only: the connection serves on.
        c.accepted("b", "/echo")
        c.command("text", "b", "still here")
        assert c.messages("b", 1)[0]["data"] == "still here"


def test_a_large_message_both_ways_through_flow_control(ws_server):
    size = 4 << 20  # 16 times the server's stream window
    with H3WebSockets(ws_server.port) as c:
        c.accepted("a", "/echo")
        c.command("binary", "a", size)
        message = c.messages("a", 1, timeout=60)[0]
        assert message["length"] == size and message["sha256"] == pattern_sha256(size)


def test_an_application_that_does_not_read_stops_its_client_by_flow_control(ws_server, certs):
    count = 4000  # 1 KiB each: 4 MiB, far past the stream window (256 KiB) and the WebSocket queue (32 messages)
    reset_stats(ws_server, certs)
    with H3WebSockets(ws_server.port) as c:
        c.accepted("a", "/slow")
        c.command("flood", "a", count, 1024)
        # QUIC takes no more of the stream once the server stops reading it: the client is held at the stream
        # window and the queue (a few hundred messages), not stalled for a moment by congestion control.
        def progress():
            before = len(c.all("a", "progress"))
            c.command("progress", "a")
            report = c.wait_for(lambda: c.all("a", "progress")[before:], "the client's progress")[0]
            return report if report["written"] >= 250 and not report["writable"] else None

        held = poll(progress, timeout=30, interval=0.1)
        assert held, c.all("a", "progress")[-3:]
        assert held["written"] < 1000 and c.find("a", "flooded") is None, held
        assert stats(ws_server, certs)["received"] == 0
        with https_client(ws_server, certs) as http:
            assert http.get("/release").text == "released"
        # Released, the application reads it all, and the window opens for the rest.
        c.wait_event("a", "flooded", timeout=60)
        c.command("text", "a", "done")
        assert c.messages("a", 1, timeout=60)[0]["data"] == str(count)


def test_many_websockets_on_one_connection(ws_server):
    with H3WebSockets(ws_server.port) as c:
        for i in range(10):
            c.accepted("s%d" % i, "/echo")
            c.command("text", "s%d" % i, "socket %d" % i)
        for i in range(10):
            assert c.messages("s%d" % i, 1)[0]["data"] == "socket %d" % i


def test_access_log_shows_the_connect(ws_server):
    with H3WebSockets(ws_server.port) as c:
        c.accepted("a", "/echo?probe=logged")
        c.command("close", "a", 1000)
        c.wait_event("a", "close")
    assert ws_server.wait_for_output('"CONNECT /echo?probe=logged HTTP/3" 200', timeout=5), ws_server.output()[-2000:]


def test_drain_closes_websockets_with_1001(start_server, certs):
    server = start_h3(start_server, certs, "--port", free_udp_port(), target="raw_ws:app")
    with H3WebSockets(server.port) as c:
        c.accepted("a", "/wait")
        server.terminate()
        assert c.wait_event("a", "close")["code"] == 1001
        c.command("close", "a", 1001)
        c.wait_event("a", "end")
    assert server.wait_exit(30) == 0, server.output()[-2000:]


# ---------------------------------------------------------------------------
# compression and keepalive, as over HTTP/1.1 and HTTP/2


def test_permessage_deflate_over_h3(start_server, certs):
    server = start_h3(start_server, certs, "--port", free_udp_port(), "--ws-compress", target="raw_ws:app")
    with H3WebSockets(server.port) as c:
        answer = c.accepted("a", "/echo", "sec-websocket-extensions: permessage-deflate; client_max_window_bits")
        assert answer["headers"].get("sec-websocket-extensions", "").startswith("permessage-deflate"), answer
        text = "compressible " * 500
        c.command("text", "a", text)
        c.command("binary", "a", 76800)
        messages = c.messages("a", 2)
        # The client's messages went compressed too (its deflate encoder sets RSV1 on every one), and came back whole.
        assert messages[0]["data"] == text and messages[0]["rsv1"] is True, {k: v for k, v in messages[0].items() if k != "data"}
        assert messages[1]["sha256"] == pattern_sha256(76800) and messages[1]["rsv1"] is True, messages[1]
        # Without the offer, nothing is compressed.
        plain = c.accepted("b", "/echo")
        assert "sec-websocket-extensions" not in plain["headers"], plain
        c.command("text", "b", text)
        assert c.messages("b", 1)[0]["rsv1"] is False


def test_pings_keep_the_websocket_alive(start_server, certs):
    server = start_h3(start_server, certs, "--port", free_udp_port(), "--ws-ping-interval", "100",
                      "--ws-ping-timeout", "5000", target="raw_ws:app")
    with H3WebSockets(server.port) as c:
        c.accepted("a", "/echo")
        c.wait_for(lambda: len(c.all("a", "ping")) >= 3, "three pings from the server")
        c.command("text", "a", "still here")
        assert c.messages("a", 1)[0]["data"] == "still here"
        assert c.find("a", "close") is None


def test_a_client_that_does_not_answer_pings_is_closed_1011(start_server, certs):
    server = start_h3(start_server, certs, "--port", free_udp_port(), "--ws-ping-interval", "100", "--ws-ping-timeout", "200",
                      target="raw_ws:app")
    with H3WebSockets(server.port) as c:
        c.accepted("a", "/wait")
        c.command("mute", "a")
        close = c.wait_event("a", "close")
        assert (close["code"], close["reason"]) == (1011, "keepalive ping timeout"), close
        # Dropped, without waiting for the client's answer to the close.
        c.wait_for(lambda: c.find("a", "end") or c.find("a", "reset"), "the stream's end")
        assert poll(lambda: [code for code, _ in stats(server, certs)["disconnects"]]) == [1011]
