"""peregrine.contrib.fastapi.WebTransportRouter (docs/WEBTRANSPORT.md, "FastAPI: WebTransportRouter").

End to end: ``apps/wt_router_app.py`` served by bin/peregrine with --http3, headless Chromium as the
WebTransport client exactly as in test_webtransport.py (whose fixtures and helpers this module uses):
the router's routes with path parameters next to the FastAPI application's own HTTP and WebSocket
routes, streams both ways, datagrams, close, a failing route, a path with no route.

In process: the router against a scripted receive()/send(), for what a browser cannot show exactly
(the 404, the bound on reading ahead, resets and the end of the session).
"""

import asyncio
import hashlib
import json
import ssl
import sys

import httpx
import pytest

pytest.importorskip("fastapi")  # FastAPI and Starlette are installed for CPython 3.11 only here

from conftest import REPO_ROOT, poll  # noqa: E402

# The package as this checkout ships it (the server imports it from its jar, built from the same files).
sys.path.insert(0, str(REPO_ROOT / "src" / "main" / "python"))
from peregrine.contrib import fastapi as contrib  # noqa: E402
from test_webtransport import (ABORT_JS, assert_reset_and_stopped, browser, events, new_id, open_page,  # noqa: E402,F401
                               pattern, run, start_wt, wt_cert)

pytestmark = pytest.mark.peregrine_only

APP = "wt_router_app:app"


@pytest.fixture(scope="module")
def server(start_module_server, wt_cert):
    return start_wt(start_module_server, wt_cert, target=APP)


@pytest.fixture(scope="module")
def page(browser, server):
    p = open_page(browser, server)
    yield p
    p.close()


def https(server, path):
    with httpx.Client(verify=False, timeout=10) as client:
        response = client.get("https://127.0.0.1:%d%s" % (server.port, path))
    return response.http_version, response.json()


# ---------------------------------------------------------------------------
# What is not a session reaches FastAPI


def test_ordinary_routes_and_lifespan_reach_fastapi(page, server):
    assert https(server, "/hello/over-tcp") == ("HTTP/1.1", {"hello": "over-tcp", "http_version": "1.1"})
    over_h3 = page.fetch("/hello/over-quic")
    assert over_h3.status == 200
    assert over_h3.json() == {"hello": "over-quic", "http_version": "3"}
    assert https(server, "/lifespan")[1] == {"started": True}
    assert https(server, "/no-such-page")[1] == {"detail": "Not Found"}  # FastAPI's own 404


def test_a_fastapi_websocket_route_still_works(server):
    ws_client = pytest.importorskip("websockets.sync.client")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with ws_client.connect("wss://127.0.0.1:%d/ws/lobby" % server.port, ssl=context, open_timeout=10) as ws:
        ws.send("hi")
        assert ws.recv(timeout=10) == "lobby: hi"
        ws.send("again")
        assert ws.recv(timeout=10) == "lobby: again"


# ---------------------------------------------------------------------------
# Sessions reach the routes


def test_the_spec_example_echoes_on_client_streams_with_the_route_parameter(page, server, wt_cert):
    sid = new_id()
    result = run(page, wt_cert, """
      const wt = open("/chat/lobby?id=%s");
      await wt.ready;
      const one = async name => {
        const s = await wt.createBidirectionalStream();
        const w = s.writable.getWriter();
        await w.write(H.bytes(name));
        await w.close();
        return H.text(await H.readAll(s.readable));
      };
      const all = await Promise.all(["alice", "bob", "carol"].map(one));
      wt.close();
      return all;
    """ % sid)
    assert result == ["hello alice in lobby", "hello bob in lobby", "hello carol in lobby"]
    attributes = events(server, sid)[0]
    assert attributes == {"type": "attributes", "room": "lobby", "path_params": {"room": "lobby"},
                          "path": "/chat/lobby", "query_string": "id=" + sid,
                          "origin": "https://127.0.0.1:%d" % server.port, "scope_type": "webtransport"}


def test_streams_the_route_opens(page, server, wt_cert):
    sid = new_id()
    result = run(page, wt_cert, """
      const wt = open("/serve/3?id=%s");
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
    assert result == {"oneWay": "one way" * 3, "first": "ping", "rest": "got pong"}
    got = events(server, sid, lambda e: len(e) >= 2)
    assert got[0] == {"type": "count", "count_type": "int"}  # {count:int} converted, as in Starlette
    bidi, uni = got[1]["bidirectional"], got[1]["unidirectional"]
    assert bidi[0] % 4 == 1 and bidi[1:] == [True, True]   # server-initiated bidirectional
    assert uni[0] % 4 == 3 and uni[1:] == [False, True]    # server-initiated unidirectional


def test_datagrams_both_ways_and_the_clients_close(page, server, wt_cert):
    sid = new_id()
    result = run(page, wt_cert, """
      const wt = open("/datagrams?id=%s");
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
      wt.close({closeCode: 9, reason: "enough datagrams"});
      return got;
    """ % sid)
    assert result, "no datagram came back"
    assert set(result) <= {"echo datagram %d" % i for i in range(5)}
    got = events(server, sid)
    assert got == [{"type": "closed", "code": 9, "reason": "enough datagrams"}]


def test_close_code_and_reason_reach_the_page(page, wt_cert):
    result = run(page, wt_cert, """
      const wt = open("/close?code=4243&reason=" + encodeURIComponent("the route is done"));
      await wt.ready;
      return await wt.closed;
    """)
    assert result == {"closeCode": 4243, "reason": "the route is done"}


def test_a_route_that_raises_closes_the_session_with_an_error_code(page, server, wt_cert):
    result = run(page, wt_cert, """
      const wt = open("/fail");
      await wt.ready;
      return await wt.closed.then(v => v, e => ({error: String(e)}));
    """)
    assert result.get("closeCode") == 1, result
    logged = poll(lambda: "WT-ROUTER-FAILURE" in server.output() and server.output(), timeout=10, interval=0.1)
    assert logged, server.output()[-3000:]
    at = logged.index("WT-ROUTER-FAILURE")
    assert "Traceback" in logged[max(0, at - 3000):at] and "wt_router_app.py" in logged[max(0, at - 3000):at]


def test_a_path_with_no_route_is_refused(page, wt_cert):
    result = run(page, wt_cert, """
      const wt = open("/no-such-route");
      try { await wt.ready; return "accepted"; } catch (e) { return "refused: " + e; }
    """)
    assert result.startswith("refused"), result
    assert run(page, wt_cert, 'const wt = open("/chat/x"); await wt.ready; wt.close(); return "ok";') == "ok"


def test_reads_by_size_a_reset_and_the_end_of_the_session(page, server, wt_cert):
    sid = new_id()
    run(page, wt_cert, """
      const wt = open("/record?id=%s");
      await wt.ready;
      const s = await wt.createBidirectionalStream();
      const w = s.writable.getWriter();
      await w.write(H.bytes("abcdefghijkl"));
      await w.close();
      const u = await wt.createUnidirectionalStream();
      const uw = u.getWriter();
      await uw.write(H.bytes("xyz"));
      await uw.abort(new WebTransportError({streamErrorCode: 7}));
      await new Promise(ok => setTimeout(ok, 300));
      wt.close({closeCode: 5, reason: "done"});
      await wt.closed;
      return true;
    """ % sid)
    got = events(server, sid, lambda e: any(x["type"] == "ended" for x in e))
    kinds = sorted(x["type"] for x in got)
    assert kinds == ["ended", "reset", "stream"], got
    assert next(x for x in got if x["type"] == "stream")["chunks"] == ["abcde", "fghij", "kl"]
    assert next(x for x in got if x["type"] == "reset")["code"] == 7, got
    assert got[-1] == {"type": "ended", "code": 5, "reason": "done", "receive_datagram": "SessionClosed"}


def test_a_route_resets_and_stops_a_stream_with_codes(page, server, wt_cert):
    sid = new_id()
    assert_reset_and_stopped(run(page, wt_cert, ABORT_JS % json.dumps("/abort?id=%s" % sid)))
    got = events(server, sid, lambda e: len(e) == 2)
    assert got == [{"type": "reset", "first": "reset"}, {"type": "stopped", "first": "stop", "read after": "ValueError"}]


def test_a_stream_is_read_ahead_only_to_the_bound_and_echoed_whole(page, server, wt_cert):
    """192 KiB: past the router's bound, within the server's own (256 KiB), so only the router holds it back."""
    sid = new_id()
    size = 192 << 10
    result = run(page, wt_cert, """
      const wt = open("/bulk?id=%s");
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
    """ % (sid, size), timeout=60)
    assert result == {"length": size, "sha256": hashlib.sha256(pattern(size)).hexdigest()}
    buffered = events(server, sid)[0]["bytes"]
    # The router took the bound's worth (plus at most the message that crossed it) and stopped receiving.
    assert contrib.STREAM_BUFFER <= buffered < 2 * contrib.STREAM_BUFFER, buffered


# ---------------------------------------------------------------------------
# In process, against a scripted server


class Scripted:
    """receive() and send() of one session: receive() returns the queued messages, then waits."""

    def __init__(self, *messages):
        self.queue = asyncio.Queue()
        self.received = 0
        self.sent = []
        for message in messages:
            self.queue.put_nowait(message)

    async def receive(self):
        message = await self.queue.get()
        self.received += 1
        return message

    async def send(self, message):
        self.sent.append(message)
        if message["type"] == "webtransport.stream.open":
            return 1 if message["bidirectional"] else 3


def session_scope(path):
    return {"type": "webtransport", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "headers": [(b"origin", b"https://example")], "extensions": {"webtransport": {}}}


def connect():
    return {"type": "webtransport.connect"}


def data(stream, payload, end=False):
    return {"type": "webtransport.stream.receive", "stream": stream, "data": payload, "end_stream": end}


def test_in_process_a_path_with_no_route_gets_404_and_other_scopes_pass_unchanged():
    seen = []

    async def api(scope, receive, send):
        seen.append((scope, receive, send))

    router = contrib.WebTransportRouter(api)
    router.route("/chat/{room}")(lambda session: None)
    server = Scripted(connect())
    asyncio.run(router(session_scope("/chat"), server.receive, server.send))
    assert server.sent == [{"type": "webtransport.close", "status": 404}]
    assert seen == []
    for kind in ("http", "websocket", "lifespan"):
        scope = {"type": kind, "path": "/chat/x"}
        asyncio.run(router(scope, server.receive, server.send))
        assert seen[-1] == (scope, server.receive, server.send) and seen[-1][0] is scope


def test_in_process_path_parameters_as_keywords_and_path_params():
    got = {}
    router = contrib.WebTransportRouter(None)

    @router.route("/a/{room}/{n:int}")
    async def named(session, n):
        got["named"] = (n, session.path_params, session.headers["origin"])
        await session.refuse(403)

    @router.route("/b/{room}")
    async def anything(session, **params):
        got["anything"] = params
        await session.refuse(403)

    asyncio.run(router(session_scope("/a/lobby/7"), Scripted(connect()).receive, Scripted().send))
    asyncio.run(router(session_scope("/b/hall"), Scripted(connect()).receive, Scripted().send))
    assert got == {"named": (7, {"room": "lobby", "n": 7}, "https://example"), "anything": {"room": "hall"}}


def test_in_process_reading_ahead_is_bounded():
    chunk = 16 * 1024
    server = Scripted(connect(), *[data(0, b"x" * chunk) for _ in range(100)], data(0, b"", end=True))
    outcome = {}

    async def route(session):
        await session.accept()
        stream = await anext(session.incoming_streams())
        for _ in range(50):  # every message the reader could take is taken well within 50 turns of the loop
            await asyncio.sleep(0)
        outcome["held"] = (server.received, stream.buffered)
        first = await stream.read(chunk)
        for _ in range(50):
            await asyncio.sleep(0)
        outcome["after one read"] = server.received
        outcome["rest"] = len(first) + len(await stream.read())

    router = contrib.WebTransportRouter(None)
    router.add_route("/bulk", route)
    asyncio.run(router(session_scope("/bulk"), server.receive, server.send))
    per_bound = contrib.STREAM_BUFFER // chunk
    assert outcome["held"] == (1 + per_bound, contrib.STREAM_BUFFER)  # the connect, then the bound's worth
    assert outcome["after one read"] == 2 + per_bound
    assert outcome["rest"] == 100 * chunk


def test_in_process_reset_and_disconnect():
    server = Scripted(connect(), data(0, b"hello "), data(4, b"partial"),
                      {"type": "webtransport.stream.reset", "stream": 4, "code": 0},
                      data(8, b"not ended"), {"type": "webtransport.datagram.receive", "data": b"d1"},
                      {"type": "webtransport.disconnect", "code": 3, "reason": "gone"})
    outcome = {}

    async def route(session):
        await session.accept(headers=[("x-room", "r1")])
        streams = [stream async for stream in session.incoming_streams()]  # ends with the session
        outcome["ids"] = [s.id for s in streams]
        outcome["first by size"] = await streams[0].read(100)
        for stream in streams:
            try:
                outcome[stream.id] = await stream.read()
            except ConnectionError as e:
                outcome[stream.id] = type(e).__name__
        outcome["datagram"] = await session.receive_datagram()
        with pytest.raises(contrib.SessionClosed):
            await session.receive_datagram()
        outcome["closed"] = await session.wait_closed()
        stream = await session.open_stream()
        outcome["opened"] = (stream.id, stream.bidirectional)
        await stream.send(b"x", end=True)

    router = contrib.WebTransportRouter(None)
    router.add_route("/r", route)
    asyncio.run(router(session_scope("/r"), server.receive, server.send))
    assert outcome == {"ids": [0, 4, 8], "first by size": b"hello ", 0: "SessionClosed", 4: "StreamReset",
                       8: "SessionClosed", "datagram": b"d1", "closed": (3, "gone"), "opened": (1, True)}
    assert server.sent[0] == {"type": "webtransport.accept", "headers": [(b"x-room", b"r1")]}
    assert server.sent[-1] == {"type": "webtransport.stream.send", "stream": 1, "data": b"x", "end_stream": True}


def test_in_process_reset_codes_both_ways():
    server = Scripted(connect(), data(0, b"ab"), {"type": "webtransport.stream.reset", "stream": 0, "code": 7},
                      data(4, b"cd"), {"type": "webtransport.stream.reset", "stream": 4, "code": None},
                      {"type": "webtransport.disconnect", "code": 0, "reason": ""})
    outcome = []

    async def route(session):
        await session.accept()
        async for stream in session.incoming_streams():
            try:
                await stream.read()
            except contrib.StreamReset as e:
                outcome.append((stream.id, e.code))
            await stream.reset(5)
            await stream.stop(9)

    router = contrib.WebTransportRouter(None)
    router.add_route("/r", route)
    asyncio.run(router(session_scope("/r"), server.receive, server.send))
    assert outcome == [(0, 7), (4, None)]
    assert server.sent[1:] == [{"type": "webtransport.stream.reset", "stream": 0, "code": 5},
                               {"type": "webtransport.stream.stop", "stream": 0, "code": 9},
                               {"type": "webtransport.stream.reset", "stream": 4, "code": 5},
                               {"type": "webtransport.stream.stop", "stream": 4, "code": 9}]


def test_in_process_a_route_that_raises_propagates_to_the_server():
    async def route(session):
        await session.accept()
        raise ValueError("route failure")

    router = contrib.WebTransportRouter(None)
    router.add_route("/f", route)
    with pytest.raises(ValueError, match="route failure"):
        asyncio.run(router(session_scope("/f"), Scripted(connect()).receive, Scripted().send))
