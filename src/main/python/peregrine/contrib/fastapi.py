"""WebTransport sessions for FastAPI (and Starlette) applications: ``WebTransportRouter``.

Starlette's router asserts on the scope type, so a session cannot reach it. The router goes in front
of the application: it answers ``webtransport`` scopes (Peregrine's ASGI extension,
docs/WEBTRANSPORT.md) with its own routes and passes every other scope to the application unchanged.

    api = FastAPI()
    app = WebTransportRouter(api)            # serve this one

    @app.route("/chat/{room}")
    async def chat(session, room):
        await session.accept()
        async for stream in session.incoming_streams():
            await stream.send(b"hello " + await stream.read(), end=True)
"""
import asyncio
import collections
import inspect

from starlette.datastructures import Headers, QueryParams
from starlette.routing import compile_path

__all__ = ["WebTransportRouter", "WebTransportSession", "WebTransportStream", "SessionClosed", "StreamReset"]

# Unread bytes of one stream past which the session stops receiving (see WebTransportSession._pump).
STREAM_BUFFER = 64 * 1024
# Client streams not yet taken from incoming_streams() past which the session stops receiving.
INCOMING_STREAMS = 16
# Datagrams not yet received past which later ones are dropped, as the server does (64).
DATAGRAMS = 64


class SessionClosed(ConnectionError):
    """The session is over: the client closed it, went away, or the application closed it."""


class StreamReset(ConnectionError):
    """The client reset the stream: its data will not all arrive. ``code`` is the WebTransport error
    code the client gave (``streamErrorCode`` in a browser), or None when the reset carried none."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


class WebTransportRouter:
    """An ASGI application: WebTransport sessions to its routes, everything else to ``app``."""

    def __init__(self, app):
        self.app = app
        self.routes = []

    def route(self, path):
        """Decorator: ``handler(session, **path_params)`` serves the sessions whose path matches."""
        def decorate(handler):
            self.add_route(path, handler)
            return handler
        return decorate

    def add_route(self, path, handler):
        regex, _, convertors = compile_path(path)
        self.routes.append(_Route(path, regex, convertors, handler))

    async def __call__(self, scope, receive, send):
        if scope["type"] != "webtransport":
            await self.app(scope, receive, send)
            return
        path = _route_path(scope)
        for route in self.routes:
            match = route.regex.match(path)
            if match:
                params = {name: route.convertors[name].convert(value) for name, value in match.groupdict().items()}
                await _serve(route, dict(scope, path_params=params), receive, send)
                return
        await receive()  # webtransport.connect
        await send({"type": "webtransport.close", "status": 404})


class _Route:
    def __init__(self, path, regex, convertors, handler):
        self.path = path
        self.regex = regex
        self.convertors = convertors
        self.handler = handler
        parameters = inspect.signature(handler).parameters.values()
        # Path parameters go to the handler as keyword arguments when it names them (as FastAPI does).
        self.takes_all = any(p.kind is p.VAR_KEYWORD for p in parameters)
        self.takes = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _route_path(scope):
    # The path below root_path, as Starlette's own routing matches it.
    path, root = scope["path"], scope.get("root_path", "")
    if root and path.startswith(root) and (len(path) == len(root) or path[len(root)] == "/"):
        return path[len(root):]
    return path


async def _serve(route, scope, receive, send):
    connect = await receive()
    if connect["type"] != "webtransport.connect":
        raise RuntimeError("expected webtransport.connect, got %r" % connect["type"])
    session = WebTransportSession(scope, receive, send)
    params = scope["path_params"]
    kwargs = params if route.takes_all else {k: v for k, v in params.items() if k in route.takes}
    try:
        await route.handler(session, **kwargs)
    finally:
        # The server logs a route's exception and closes the session with code 1 once this returns.
        await session._stop()


class WebTransportSession:
    """One session: accept it, then streams and datagrams. Made by the router for each route call."""

    def __init__(self, scope, receive, send):
        self.scope = scope
        self.path = scope["path"]
        self.query_string = scope["query_string"]
        self.path_params = scope["path_params"]
        self.headers = Headers(scope=scope)
        self.query_params = QueryParams(scope["query_string"])
        self.client = scope.get("client")
        self.state = scope.get("state")
        self.close_code = None    # once the session is over: the code and reason it ended with
        self.close_reason = None
        self.datagrams_dropped = 0
        self._receive = receive
        self._send = send
        self._accepted = False
        self._reader = None
        self._error = None        # why the session is over for reads: SessionClosed, or the reader's failure
        self._changed = asyncio.Condition()
        self._streams = {}        # stream ID -> WebTransportStream, while data may still come on it
        self._incoming = collections.deque()
        self._datagrams = collections.deque()

    async def accept(self, headers=None):
        """Accepts the session (``:status 200``), with extra response headers if given."""
        message = {"type": "webtransport.accept"}
        if headers:
            message["headers"] = [(_bytes(k), _bytes(v)) for k, v in headers]
        await self._send(message)
        self._accepted = True
        self._reader = asyncio.get_running_loop().create_task(self._pump())

    async def refuse(self, status=403):
        """Refuses the session with an HTTP status instead of accepting it."""
        await self._send({"type": "webtransport.close", "status": status})

    async def close(self, code=0, reason=""):
        """Closes the accepted session with a code and reason the client sees."""
        await self._send({"type": "webtransport.close", "code": code, "reason": reason})

    async def incoming_streams(self):
        """The streams the client opens, bidirectional and unidirectional; ends with the session."""
        self._check_accepted()
        while True:
            async with self._changed:
                await self._changed.wait_for(lambda: self._incoming or self._error)
                if not self._incoming:
                    return
                stream = self._incoming.popleft()
                self._changed.notify_all()
            yield stream

    async def open_stream(self, bidirectional=True):
        """Opens a stream from the server and returns it."""
        self._check_accepted()
        stream_id = await self._send({"type": "webtransport.stream.open", "bidirectional": bool(bidirectional)})
        if stream_id is None:
            raise self._error or SessionClosed("the stream could not be opened")
        if not bidirectional:
            return WebTransportStream(self, stream_id)
        # The client's first data on it may have been dispatched before the ID came back.
        return self._stream(stream_id)

    async def receive_datagram(self):
        """The next datagram (bytes); raises SessionClosed once the session is over."""
        self._check_accepted()
        async with self._changed:
            await self._changed.wait_for(lambda: self._datagrams or self._error)
            if not self._datagrams:
                raise self._error
            return self._datagrams.popleft()

    async def send_datagram(self, data):
        """Sends a datagram; one too large for the path is dropped, as datagrams may be."""
        await self._send({"type": "webtransport.datagram.send", "data": bytes(data)})

    async def wait_closed(self):
        """Waits until the session is over; returns (code, reason)."""
        self._check_accepted()
        async with self._changed:
            await self._changed.wait_for(lambda: self._error is not None)
        return self.close_code, self.close_reason

    def _check_accepted(self):
        if not self._accepted:
            raise RuntimeError("accept the session first")

    def _stream(self, stream_id):
        stream = self._streams.get(stream_id)
        if stream is None:
            stream = self._streams[stream_id] = WebTransportStream(self, stream_id)
            if stream_id % 2 == 0:  # client-initiated
                self._incoming.append(stream)
        return stream

    async def _pump(self):
        """The one reader of receive(): stream data to its stream, datagrams to their queue, new
        client streams to incoming_streams(). It receives the next message only once the last one
        has room, so that unread data stays in the server, whose flow control then stops the client."""
        try:
            while True:
                message = await self._receive()
                kind = message["type"]
                async with self._changed:
                    if kind == "webtransport.stream.receive":
                        stream = self._stream(message["stream"])
                        if not stream._stopped:  # what was on its way when the route stopped it is dropped
                            stream._buffer += message["data"]
                        if message["end_stream"]:
                            stream._ended = True
                            del self._streams[stream.id]
                        self._changed.notify_all()
                        await self._changed.wait_for(lambda: len(stream._buffer) < STREAM_BUFFER
                                                     and len(self._incoming) < INCOMING_STREAMS)
                    elif kind == "webtransport.stream.reset":
                        stream = self._stream(message["stream"])
                        code = message["code"]
                        stream._reset = StreamReset("the client reset stream %d (code %s)" % (stream.id, code), code)
                        stream._buffer.clear()  # a reset stream's data may be discarded (RFC 9000, 3.2)
                        del self._streams[stream.id]
                        self._changed.notify_all()
                        await self._changed.wait_for(lambda: len(self._incoming) < INCOMING_STREAMS)
                    elif kind == "webtransport.datagram.receive":
                        if len(self._datagrams) < DATAGRAMS:
                            self._datagrams.append(message["data"])
                            self._changed.notify_all()
                        else:
                            self.datagrams_dropped += 1
                    elif kind == "webtransport.disconnect":
                        self.close_code, self.close_reason = message["code"], message["reason"]
                        self._error = SessionClosed("the session is closed (code %d%s)" % (
                            message["code"], ", " + message["reason"] if message["reason"] else ""))
                        self._changed.notify_all()
                        return
        except Exception as e:  # the readers learn why; the route's own task carries on
            async with self._changed:
                self._error = SessionClosed("the session's input failed: %r" % e)
                self._changed.notify_all()

    async def _stop(self):
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
            try:
                await self._reader
            except BaseException:
                pass


class WebTransportStream:
    """A stream of a session. ``id`` is its QUIC stream ID; ``readable`` and ``writable`` say which
    ways it carries data (a unidirectional stream carries one)."""

    def __init__(self, session, stream_id):
        self.session = session
        self.id = stream_id
        self.bidirectional = stream_id & 2 == 0
        client = stream_id & 1 == 0
        self.readable = self.bidirectional or client
        self.writable = self.bidirectional or not client
        self._buffer = bytearray()
        self._ended = False
        self._reset = None
        self._stopped = False

    @property
    def buffered(self):
        """Bytes received and not read yet."""
        return len(self._buffer)

    async def read(self, n=-1):
        """Up to n bytes (b"" at the end of the stream), or with no n everything to the end.
        Raises StreamReset if the client reset the stream, SessionClosed if the session ended first."""
        if not self.readable:
            raise ValueError("stream %d is not readable: the server opened it one way" % self.id)
        if n == 0:
            return b""
        session = self.session
        parts = []
        async with session._changed:
            while True:
                await session._changed.wait_for(lambda: self._buffer or self._ended or self._reset or self._stopped
                                                or session._error)
                if self._stopped:
                    raise ValueError("stream %d was stopped" % self.id)
                if self._reset:
                    raise self._reset
                if n >= 0 and self._buffer:
                    data = bytes(self._buffer[:n])
                    del self._buffer[:n]
                    session._changed.notify_all()
                    return data
                if self._buffer:
                    # Read to the end: take what is here, so the reader never waits on this stream.
                    parts.append(bytes(self._buffer))
                    self._buffer.clear()
                    session._changed.notify_all()
                if self._ended:
                    return b"".join(parts)
                if session._error:
                    raise session._error

    async def send(self, data, end=False):
        """Sends data on the stream, waiting on flow control; end=True ends it."""
        if not self.writable:
            raise ValueError("stream %d is not writable: the client opened it one way" % self.id)
        await self.session._send({"type": "webtransport.stream.send", "stream": self.id, "data": bytes(data),
                                  "end_stream": bool(end)})

    async def reset(self, code=0):
        """Resets the server's side of the stream (RESET_STREAM) with a WebTransport error code
        (32 bits) the client sees as ``streamErrorCode``; what was not delivered yet is dropped."""
        if not self.writable:
            raise ValueError("stream %d is not writable: the client opened it one way" % self.id)
        await self.session._send({"type": "webtransport.stream.reset", "stream": self.id, "code": code})

    async def stop(self, code=0):
        """Asks the client to stop sending on the stream (STOP_SENDING) with a WebTransport error code;
        its unread data is dropped, and read() raises ValueError from then on."""
        if not self.readable:
            raise ValueError("stream %d is not readable: the server opened it one way" % self.id)
        await self.session._send({"type": "webtransport.stream.stop", "stream": self.id, "code": code})
        session = self.session
        async with session._changed:
            self._stopped = True
            self._buffer.clear()
            session._changed.notify_all()

    def __repr__(self):
        return "<WebTransportStream %d>" % self.id


def _bytes(value):
    return value if isinstance(value, bytes) else str(value).encode("latin-1")
