"""WebTransport over HTTP/3 end to end (docs/WEBTRANSPORT.md): sessions accepted and refused, the
ASGI scope, bidirectional and unidirectional streams opened by either side, the client's stream reset, datagrams both
ways, their bound and the count of those dropped, the close capsule both ways, and the refusal for WSGI applications.

The client is headless Chromium (``chromium.py``), whose page runs ``new WebTransport(url,
{serverCertificateHashes})``: the server gets an ECDSA P-256 certificate valid for 10 days, made here
by ``openssl``, as serverCertificateHashes requires. The page itself is loaded over HTTP/3 from the
same server (Chromium accepts the certificate by its public key). What the application saw is read
back from it over HTTP (``/events``).

Application: ``apps/wt_app.py``; ``raw_wsgi.py`` for the WSGI refusal.
"""

import hashlib
import json
import socket
import ssl
import subprocess
import time
import uuid

import pytest

import chromium
from chromium import DevToolsError
from conftest import assert_clean_exit, free_port, poll
from test_http3 import free_udp_port
from test_rate_limit import metric

pytestmark = pytest.mark.peregrine_only

APP = "wt_app:app"
READY_TIMEOUT = 30.0

# Runs in the page: opens sessions and drives them, every wait bounded, results as plain objects.
_WT_JS = r"""
window.__wt = {
  open(url, hashHex) {
    const value = new Uint8Array(hashHex.match(/../g).map(h => parseInt(h, 16)));
    return new WebTransport(url, {serverCertificateHashes: [{algorithm: "sha-256", value}]});
  },
  bytes(text) { return new TextEncoder().encode(text); },
  text(bytes) { return new TextDecoder("latin1").decode(bytes); },
  async readAll(readable) {
    const reader = readable.getReader();
    const parts = [];
    let size = 0;
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      parts.push(value);
      size += value.length;
    }
    const all = new Uint8Array(size);
    let at = 0;
    for (const p of parts) { all.set(p, at); at += p.length; }
    return all;
  },
  async digest(bytes) {
    const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
    return Array.from(d, b => b.toString(16).padStart(2, "0")).join("");
  },
  pattern(size) {
    const out = new Uint8Array(size);
    for (let i = 0; i < size; i++) out[i] = (i * 7 + (i >> 8)) & 0xff;
    return out;
  },
  // The stream that ends what a counting application receives. The application may return as soon as
  // the stream's first bytes arrive, and the end of its session may stop the stream (STOP_SENDING) or
  // close the session before this side has closed the stream: that is the stream arriving, not a
  // failure. The callers check on the server's side that the stream arrived.
  async sendOneWay(wt, text) {
    let w;
    try {
      w = (await wt.createUnidirectionalStream()).getWriter();
    } catch (e) {
      throw new Error("could not open the stream that ends the count: " + e);
    }
    try {
      await w.write(new TextEncoder().encode(text));
      await w.close();
    } catch (e) {
      const message = String(e);
      if (!message.includes("STOP_SENDING") && !message.includes("session is closed")) throw e;
    }
  },
  timeout(promise, ms, what) {
    return Promise.race([promise, new Promise((_, reject) => setTimeout(() => reject(new Error("timed out: " + what)), ms))]);
  },
};
true
"""


def pattern(size):
    """The bytes __wt.pattern(size) makes in the page: byte i is (7 i + i // 256) mod 256, made a
    256-byte block at a time (block b is the same as block b mod 256)."""
    blocks = [bytes((7 * j + b) & 0xFF for j in range(256)) for b in range(256)]
    whole = b"".join(blocks[b & 0xFF] for b in range(size >> 8))
    return whole + bytes((7 * i + (i >> 8)) & 0xFF for i in range(len(whole), size))


@pytest.fixture(scope="module")
def wt_cert(tmp_path_factory):
    """An ECDSA P-256 certificate valid for 10 days (serverCertificateHashes accepts nothing else),
    its key, and the hex SHA-256 of its DER form."""
    directory = tmp_path_factory.mktemp("wt-cert")
    cert, key = directory / "cert.pem", directory / "key.pem"
    config = directory / "openssl.cnf"
    config.write_text("[req]\ndistinguished_name = dn\n[dn]\n")
    subprocess.run(["openssl", "req", "-x509", "-config", str(config), "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-days", "10", "-nodes", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
    der = subprocess.run(["openssl", "x509", "-in", str(cert), "-outform", "DER"], check=True,
                         capture_output=True, timeout=30).stdout
    return {"cert": str(cert), "key": str(key), "hash": hashlib.sha256(der).hexdigest()}


@pytest.fixture(scope="module")
def browser(wt_cert):
    if not chromium.available():
        pytest.skip("%s is not installed: headless Chromium is the WebTransport client of these tests" % chromium.CHROMIUM)
    with chromium.Chromium(force_quic=["*"], spki_hashes=[chromium.spki_sha256_base64(wt_cert["cert"])]) as b:
        yield b


def start_wt(start, wt_cert, *options, target=APP):
    port = free_udp_port()
    server = start(target, "--port", port, "--tls-cert", wt_cert["cert"], "--tls-key", wt_cert["key"], "--http3", *options)

    def handshake_done():
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
                with context.wrap_socket(raw, server_hostname="localhost"):
                    return True
        except OSError:
            return not server.running()

    assert poll(handshake_done, timeout=READY_TIMEOUT, interval=0.2), "no TLS handshake within %.0f s" % READY_TIMEOUT
    return server


def open_page(browser, server):
    """A page of the server, loaded over HTTP/3 (retried while the QUIC side starts), with __wt defined."""
    url = "https://127.0.0.1:%d/" % server.port
    deadline = time.monotonic() + 15
    while True:
        page = browser.new_page(isolated=True)
        try:
            page.navigate(url, timeout=20)
            break
        except DevToolsError as e:
            page.close()
            assert server.running(), "the server exited:\n%s" % server.output()[-3000:]
            if time.monotonic() > deadline:
                raise AssertionError("no page over HTTP/3 from %s: %s" % (url, e))
            time.sleep(0.3)
    assert page.protocol == "h3", page.protocol
    page.evaluate(_WT_JS)
    return page


@pytest.fixture(scope="module")
def server(start_module_server, wt_cert):
    return start_wt(start_module_server, wt_cert)


@pytest.fixture(scope="module")
def page(browser, server):
    p = open_page(browser, server)
    yield p
    p.close()


def run(page, wt_cert, body, timeout=30):
    """Runs an async JavaScript function body with `wt` helpers and `open(path)` in scope."""
    expression = """(async () => {
      const H = window.__wt;
      const open = path => H.open(new URL(path, location.href).href, %s);
      return await H.timeout((async () => { %s })(), %d, "the test's script");
    })()""" % (json.dumps(wt_cert["hash"]), body, int(timeout * 1000) - 2000)
    return page.evaluate(expression, timeout=timeout)


def events(server, sid, predicate=None, timeout=10.0):
    """What session sid recorded, once predicate(events) holds (polled: the application records as it goes)."""
    import httpx

    def fetch():
        with httpx.Client(verify=False, timeout=5) as client:
            got = client.get("https://127.0.0.1:%d/events?id=%s" % (server.port, sid)).json()
        return got if predicate is None or predicate(got) else None

    got = poll(fetch, timeout=timeout, interval=0.1)
    assert got is not None, "session %s never recorded what was expected; last: %r" % (sid, fetch.__dict__)
    return got


def datagrams_received(server, sid):
    """How many datagrams session sid of /slow or /hold received before the stream that ends the count."""
    got = events(server, sid, lambda e: any(x["type"] == "datagrams" for x in e), timeout=20)
    assert got[0]["then"] == "webtransport.stream.receive", got
    return got[0]["count"]


def new_id():
    return uuid.uuid4().hex[:12]


# ---------------------------------------------------------------------------
# Sessions


def test_session_accepted_and_scope(page, server, wt_cert):
    sid = new_id()
    result = run(page, wt_cert, """
      const wt = open("/echo?id=%s&x=1");
      await wt.ready;
      const s = await wt.createBidirectionalStream();
      const w = s.writable.getWriter();
      await w.write(H.bytes("hello, webtransport"));
      await w.close();
      const back = H.text(await H.readAll(s.readable));
      wt.close();
      return back;
    """ % sid)
    assert result == "hello, webtransport"
    got = events(server, sid, lambda e: any(x["type"] == "webtransport.disconnect" for x in e))
    scope = got[0]["scope"]
    assert scope["type"] == "webtransport"
    assert scope["path"] == "/echo"
    assert scope["query_string"] == "id=%s&x=1" % sid
    assert scope["http_version"] == "3"
    assert scope["scheme"] == "https"
    assert scope["client"][0] == "127.0.0.1"
    assert scope["server"] == ["127.0.0.1", server.port]
    assert "origin" in scope["header_names"] and "host" in scope["header_names"]
    assert scope["extensions"] == ["webtransport"]
    assert scope["has_state"]
    types = [x["type"] for x in got[1:]]
    assert types.count("webtransport.stream.receive") >= 1
    assert types[-1] == "webtransport.disconnect"


@pytest.mark.parametrize("path", ["/refuse?status=404", "/refuse", "/no-such-route"])
def test_session_refused(page, wt_cert, path):
    result = run(page, wt_cert, """
      const wt = open(%s);
      try { await wt.ready; return "accepted"; } catch (e) { return "refused: " + e; }
    """ % json.dumps(path))
    assert result.startswith("refused"), result
    # the same page can still open a session the application accepts
    assert run(page, wt_cert, 'const wt = open("/echo"); await wt.ready; wt.close(); return "ok";') == "ok"


def test_failing_application_closes_the_session(page, wt_cert):
    result = run(page, wt_cert, """
      const wt = open("/fail");
      await wt.ready;
      const info = await wt.closed.then(v => v, e => ({error: String(e)}));
      return info;
    """)
    assert result.get("closeCode") == 1 or "error" in result, result


# ---------------------------------------------------------------------------
# Streams


def test_bidirectional_echo_of_ten_mebibytes(page, wt_cert):
    """More than the session's buffer and the stream windows: paced by flow control both ways."""
    size = 10 << 20
    result = run(page, wt_cert, """
      const wt = open("/echo");
      await wt.ready;
      const s = await wt.createBidirectionalStream();
      const data = H.pattern(%d);
      const writing = (async () => { const w = s.writable.getWriter();
        for (let at = 0; at < data.length; at += 16384) await w.write(data.subarray(at, at + 16384));
        await w.close(); })();
      const back = await H.readAll(s.readable);
      await writing;
      wt.close();
      return {length: back.length, sha256: await H.digest(back)};
    """ % size, timeout=90)
    assert result == {"length": size, "sha256": hashlib.sha256(pattern(size)).hexdigest()}


def test_several_streams_at_once(page, wt_cert):
    result = run(page, wt_cert, """
      const wt = open("/echo");
      await wt.ready;
      const one = async i => {
        const s = await wt.createBidirectionalStream();
        const w = s.writable.getWriter();
        await w.write(H.bytes("stream " + i));
        await w.close();
        return H.text(await H.readAll(s.readable));
      };
      const all = await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map(one));
      wt.close();
      return all;
    """)
    assert result == ["stream %d" % i for i in range(8)]


def test_many_sessions_at_once(page, wt_cert):
    result = run(page, wt_cert, """
      const one = async i => {
        const wt = open("/echo?n=" + i);
        await wt.ready;
        const s = await wt.createBidirectionalStream();
        const w = s.writable.getWriter();
        await w.write(H.bytes("session " + i));
        await w.close();
        const back = H.text(await H.readAll(s.readable));
        wt.close();
        return back;
      };
      return await Promise.all(Array.from({length: 12}, (_, i) => one(i)));
    """, timeout=60)
    assert result == ["session %d" % i for i in range(12)]


def test_unidirectional_stream_from_the_client(page, server, wt_cert):
    sid = new_id()
    run(page, wt_cert, """
      const wt = open("/record?id=%s");
      await wt.ready;
      const s = await wt.createUnidirectionalStream();
      const w = s.getWriter();
      await w.write(H.bytes("one way"));
      await w.close();
      return true;
    """ % sid)
    got = events(server, sid, lambda e: any(x.get("end_stream") for x in e))
    received = [x for x in got if x["type"] == "webtransport.stream.receive"]
    assert "".join(x["data"] for x in received) == "one way"
    assert received[-1]["end_stream"] is True
    assert len({x["stream"] for x in received}) == 1
    assert received[0]["stream"] % 4 == 2  # a client-initiated unidirectional QUIC stream


def test_streams_the_server_opens(page, server, wt_cert):
    sid = new_id()
    result = run(page, wt_cert, """
      const wt = open("/serve?id=%s");
      await wt.ready;
      const uni = (await wt.incomingUnidirectionalStreams.getReader().read()).value;
      const oneWay = H.text(await H.readAll(uni));
      const bidi = (await wt.incomingBidirectionalStreams.getReader().read()).value;
      const reader = bidi.readable.getReader();
      let first = "";
      while (first.length < 4) first += H.text((await reader.read()).value);
      const w = bidi.writable.getWriter();
      await w.write(H.bytes("pong"));
      await w.close();
      let rest = "";
      for (;;) { const {value, done} = await reader.read(); if (done) break; rest += H.text(value); }
      wt.close();
      return {oneWay, first, rest};
    """ % sid)
    assert result == {"oneWay": "one way from the server", "first": "ping", "rest": "done"}
    got = events(server, sid, lambda e: any(x["type"] == "webtransport.disconnect" for x in e))
    opened = got[0]
    assert opened["type"] == "opened"
    assert opened["bidirectional"] % 4 == 1 and opened["unidirectional"] % 4 == 3  # server-initiated QUIC streams
    received = [x for x in got if x["type"] == "webtransport.stream.receive"]
    assert "".join(x["data"] for x in received) == "pong"
    assert {x["stream"] for x in received} == {opened["bidirectional"]}
    assert received[-1]["end_stream"] is True


# The page of the reset and stop tests (here and in test_webtransport_router.py): on one stream the
# application answers "reset" with a reset (code 5), on another it stops "stop" (code 11).
ABORT_JS = """
      const wt = open(%s);
      await wt.ready;
      const resetStream = await wt.createBidirectionalStream();
      const w1 = resetStream.writable.getWriter();
      await w1.write(H.bytes("reset"));
      const reader = resetStream.readable.getReader();
      let read = "", readError = null, writeError = null;
      try {
        for (;;) { const {value, done} = await reader.read(); if (done) break; read += H.text(value); }
      } catch (e) { readError = {name: e.name, code: e.streamErrorCode}; }
      const stopped = await wt.createBidirectionalStream();
      const w2 = stopped.writable.getWriter();
      await w2.write(H.bytes("stop"));
      try {
        await H.timeout(w2.closed, 10000, "the writer's end");
      } catch (e) { writeError = {name: e.name, code: e.streamErrorCode}; }
      wt.close();
      return {read, readError, writeError};
"""


def assert_reset_and_stopped(result):
    """What the page of ABORT_JS saw: the codes, through the HTTP/3 mapping both ways."""
    # "partial" may or may not arrive: a reset drops what was not delivered yet (RFC 9000 3.1).
    assert result["read"] in ("", "partial"), result
    assert result["readError"] == {"name": "WebTransportError", "code": 5}, result
    assert result["writeError"] == {"name": "WebTransportError", "code": 11}, result


def test_the_application_resets_and_stops_a_stream_with_codes(page, server, wt_cert):
    sid = new_id()
    assert_reset_and_stopped(run(page, wt_cert, ABORT_JS % json.dumps("/abort?id=%s&reset=5&stop=11" % sid)))
    got = events(server, sid, lambda e: [x["type"] for x in e].count("aborted") == 2)
    assert [x["data"] for x in got if x["type"] == "webtransport.stream.receive"] == ["reset", "stop"], got


FLOOD_JS = r"""
  const sid = %s;
  const state = async () => (await (await fetch("/flood-state?id=" + sid)).json()) || {};
  const wt = open("/flood?id=" + sid + "&size=" + (1 << 30));
  await wt.ready;
  const echo = async text => {
    const s = await wt.createBidirectionalStream();
    const w = s.writable.getWriter();
    await w.write(H.bytes(text));
    await w.close();
    return H.text(await H.timeout(H.readAll(s.readable), 10000, "the echo of " + text));
  };
  const flooded = await wt.createBidirectionalStream();
  await flooded.writable.getWriter().write(H.bytes("flood"));
  const reader = flooded.readable.getReader();
  await reader.read();
  // Blocked: what the application handed to send() stops growing while the page reads nothing.
  let last = -1, still = 0;
  for (let i = 0; i < 400 && still < 5; i++) {
    const now = (await state()).sent;
    still = now === last ? still + 1 : 0;
    last = now;
    await new Promise(r => setTimeout(r, 50));
  }
  const blocked = still >= 5 ? last : null;
  const whileBlocked = await echo("hello");
  await reader.cancel(new WebTransportError({streamErrorCode: 9}));
  let after = await state();
  for (let i = 0; i < 200 && after.state !== "done"; i++) {
    await new Promise(r => setTimeout(r, 50));
    after = await state();
  }
  const afterwards = await echo("still here");
  wt.close();
  return {blocked, whileBlocked, state: after.state, sent: after.sent, afterwards};
"""


def test_a_stream_the_client_does_not_read_holds_back_only_its_own_sends(page, server, wt_cert):
    """The application floods a stream the page does not read: its send() waits on that stream's flow
    control, while another stream of the session is echoed. Once the page stops the stream
    (readable.cancel, STOP_SENDING), the waiting send returns and the rest of the flood is dropped:
    Netty does not report STOP_SENDING on a stream with nothing queued, so the server asks quiche."""
    sid = new_id()
    result = run(page, wt_cert, FLOOD_JS % json.dumps(sid), timeout=60)
    assert result["blocked"] is not None and result["blocked"] < 1 << 30, result
    assert result["whileBlocked"] == "hello", result
    assert result["state"] == "done" and result["sent"] == 1 << 30, result
    assert result["afterwards"] == "still here", result


def test_after_the_page_stops_a_stream_the_applications_sends_on_it_are_dropped(page, server, wt_cert):
    """readable.cancel() with a code sends STOP_SENDING; the echo's later sends on that stream fail in
    Netty and are dropped, and the session carries on."""
    sid = new_id()
    result = run(page, wt_cert, """
      const wt = open("/echo?id=%s");
      await wt.ready;
      const bidi = await wt.createBidirectionalStream();
      const w = bidi.writable.getWriter();
      const reader = bidi.readable.getReader();
      await w.write(H.bytes("a"));
      const first = H.text((await reader.read()).value);
      await reader.cancel(new WebTransportError({streamErrorCode: 9}));
      for (let i = 0; i < 20; i++) await w.write(H.bytes("b".repeat(1000)));
      await w.close();
      const other = await wt.createBidirectionalStream();
      const ow = other.writable.getWriter();
      await ow.write(H.bytes("still here"));
      await ow.close();
      const echoed = H.text(await H.timeout(H.readAll(other.readable), 10000, "the other stream's echo"));
      wt.close();
      return {first, echoed};
    """ % sid)
    assert result == {"first": "a", "echoed": "still here"}
    got = events(server, sid, lambda e: any(x["type"] == "webtransport.disconnect" for x in e))
    assert [x["type"] for x in got].count("webtransport.stream.receive") >= 3, got


def test_a_stream_the_client_resets_is_reported(page, server, wt_cert):
    sid = new_id()
    run(page, wt_cert, """
      const wt = open("/record?id=%s");
      await wt.ready;
      const s = await wt.createUnidirectionalStream();
      const w = s.getWriter();
      await w.write(H.bytes("partial"));
      await w.abort(new WebTransportError({streamErrorCode: 7}));
      return true;
    """ % sid)
    got = events(server, sid, lambda e: any(x["type"] == "webtransport.stream.reset" for x in e))
    reset = [x for x in got if x["type"] == "webtransport.stream.reset"]
    assert len(reset) == 1 and reset[0]["stream"] % 4 == 2
    assert reset[0]["code"] == 7, "the page's streamErrorCode, through the HTTP/3 mapping: %r" % reset
    assert not any(x.get("end_stream") for x in got), "a reset stream was reported as ended"


# ---------------------------------------------------------------------------
# Datagrams


def test_datagrams_both_ways(page, wt_cert):
    result = run(page, wt_cert, """
      const wt = open("/echo");
      await wt.ready;
      const writer = wt.datagrams.writable.getWriter();
      const reader = wt.datagrams.readable.getReader();
      const got = [];
      for (let round = 0; round < 20 && got.length === 0; round++) {
        for (let i = 0; i < 5; i++) await writer.write(H.bytes("datagram " + i));
        const deadline = Date.now() + 500;
        while (got.length < 5 && Date.now() < deadline) {
          const r = await Promise.race([reader.read(), new Promise(ok => setTimeout(() => ok(null), 100))]);
          if (r && r.value) got.push(H.text(r.value));
        }
      }
      wt.close();
      return got;
    """)
    assert result, "no datagram came back"
    assert set(result) <= {"datagram %d" % i for i in range(5)}


def test_datagrams_past_the_bound_are_dropped(page, server, wt_cert):
    sid = new_id()
    run(page, wt_cert, """
      const wt = open("/slow?id=%s&ms=2000");
      await wt.ready;
      const writer = wt.datagrams.writable.getWriter();
      for (let i = 0; i < 400; i++) { await writer.write(H.bytes("d" + i)); if (i %% 50 === 0) await new Promise(ok => setTimeout(ok, 5)); }
      await H.sendOneWay(wt, "done");
      return true;
    """ % sid)
    count = datagrams_received(server, sid)
    assert 0 < count <= 64, count


# ---------------------------------------------------------------------------
# Close


def test_close_from_the_server_carries_code_and_reason(page, server, wt_cert):
    sid = new_id()
    result = run(page, wt_cert, """
      const wt = open("/close?id=%s&code=4242&reason=" + encodeURIComponent("done here"));
      await wt.ready;
      return await wt.closed;
    """ % sid)
    assert result == {"closeCode": 4242, "reason": "done here"}
    got = events(server, sid)
    assert got == [{"type": "webtransport.disconnect", "code": 4242, "reason": "done here"}]


def test_close_from_the_client_reaches_the_application(page, server, wt_cert):
    sid = new_id()
    run(page, wt_cert, """
      const wt = open("/record?id=%s");
      await wt.ready;
      wt.close({closeCode: 7, reason: "client says bye"});
      await wt.closed;
      return true;
    """ % sid)
    got = events(server, sid, lambda e: any(x["type"] == "webtransport.disconnect" for x in e))
    assert got[-1] == {"type": "webtransport.disconnect", "code": 7, "reason": "client says bye"}


def test_a_client_that_goes_away_disconnects(browser, server, wt_cert):
    sid = new_id()
    page = open_page(browser, server)
    run(page, wt_cert, """
      window.__kept = open("/record?id=%s");
      await window.__kept.ready;
      return true;
    """ % sid)
    page.close()
    got = events(server, sid, lambda e: any(x["type"] == "webtransport.disconnect" for x in e), timeout=40)
    assert got[-1]["type"] == "webtransport.disconnect"


def test_drain_closes_open_sessions(browser, start_server, wt_cert):
    server = start_wt(start_server, wt_cert)
    page = open_page(browser, server)
    try:
        run(page, wt_cert, 'window.__kept = open("/record?id=drain"); await window.__kept.ready; return true;')
        server.terminate()
        result = run(page, wt_cert, "return await window.__kept.closed.then(v => v, e => ({error: String(e)}));")
        assert result == {"closeCode": 0, "reason": "the server is shutting down"}
        assert_clean_exit(server, server.stop())
    finally:
        page.close()


# ---------------------------------------------------------------------------
# The edge: access log, metrics and the rate limit, as for a WebSocket's handshake


def requests_metric(port, status_class):
    # CONNECT is not one of the methods the metrics name: it is counted as "other".
    return metric(port, 'peregrine_requests_total{method="other",protocol="HTTP/3",status="%s"}' % status_class)


def test_sessions_are_logged_and_counted(browser, start_server, wt_cert):
    metrics = free_port()
    server = start_wt(start_server, wt_cert, "--access-log", "--metrics-port", metrics)
    page = open_page(browser, server)
    try:
        sid = new_id()
        assert run(page, wt_cert, 'const wt = open("/echo?id=%s"); await wt.ready; wt.close(); return "ok";' % sid) == "ok"
        assert server.wait_for_output('"CONNECT /echo?id=%s HTTP/3" 200' % sid, timeout=10), server.output()[-2000:]
        refused = run(page, wt_cert, """
          const wt = open("/refuse?status=404");
          try { await wt.ready; return "accepted"; } catch (e) { return "refused"; }
        """)
        assert refused == "refused"
        assert server.wait_for_output('"CONNECT /refuse?status=404 HTTP/3" 404', timeout=10), server.output()[-2000:]
        assert poll(lambda: requests_metric(metrics, "2xx") == 1 and requests_metric(metrics, "4xx") == 1), \
            (requests_metric(metrics, "2xx"), requests_metric(metrics, "4xx"))
    finally:
        page.close()


def test_dropped_datagrams_are_counted(browser, start_server, wt_cert):
    import httpx

    sent = 500
    metrics = free_port()
    server = start_wt(start_server, wt_cert, "--metrics-port", metrics)
    page = open_page(browser, server)

    def dropped():
        return metric(metrics, "peregrine_webtransport_datagrams_dropped_total")

    try:
        sid = new_id()
        # The application receives nothing until released: every datagram past the bound is dropped.
        run(page, wt_cert, """
          window.__held = open("/hold?id=%s");
          await window.__held.ready;
          const writer = window.__held.datagrams.writable.getWriter();
          for (let i = 0; i < %d; i++) await writer.write(H.bytes("d" + i));
          return true;
        """ % (sid, sent))
        assert poll(lambda: dropped() > 0, timeout=20), "no datagram counted as dropped"
        with httpx.Client(verify=False, timeout=5) as client:
            assert client.get("https://127.0.0.1:%d/release?id=%s" % (server.port, sid)).status_code == 200
        # A stream sent after the release ends what the application counts.
        run(page, wt_cert, """
          await H.sendOneWay(window.__held, "done");
          return true;
        """)
        count = datagrams_received(server, sid)
        # A drop means the bound was full; those queued are received in order, before the later stream.
        assert count >= 64, count
        assert count + dropped() <= sent, (count, dropped())
    finally:
        page.close()


def test_the_rate_limit_refuses_sessions_with_429(browser, start_server, wt_cert):
    # One request an hour past a burst of 4: the page (and whatever else Chromium fetches) spends part of
    # the burst, the first sessions the rest, and then a session is refused.
    server = start_wt(start_server, wt_cert, "--access-log", "--rate-limit", "1/h", "--rate-limit-burst", "4")
    page = open_page(browser, server)
    try:
        results = run(page, wt_cert, """
          const results = [];
          for (let n = 0; n < 6; n++) {
            const wt = open("/echo?n=" + n);
            try { await wt.ready; wt.close(); results.push("accepted"); } catch (e) { results.push("refused"); }
          }
          return results;
        """)
        assert results[0] == "accepted" and results[-1] == "refused", results
        n = results.index("refused")
        assert results[n:] == ["refused"] * (6 - n), results
        assert server.wait_for_output('"CONNECT /echo?n=0 HTTP/3" 200', timeout=10), server.output()[-2000:]
        assert server.wait_for_output('"CONNECT /echo?n=%d HTTP/3" 429' % n, timeout=10), server.output()[-2000:]
    finally:
        page.close()


# ---------------------------------------------------------------------------
# WSGI


def test_wsgi_applications_are_refused(browser, start_server, wt_cert):
    server = start_wt(start_server, wt_cert, target="raw_wsgi:app")
    page = open_page(browser, server)
    try:
        result = run(page, wt_cert, """
          const wt = open("/");
          try { await wt.ready; return "accepted"; } catch (e) { return "refused: " + e; }
        """)
        assert result.startswith("refused"), result
        assert page.fetch("/").status == 200  # the application itself is served over HTTP/3 all the same
    finally:
        page.close()
