package dev.peregrine.http2;

import dev.peregrine.http.Connections;
import dev.peregrine.http.FieldListRequests;
import dev.peregrine.http.FieldListResponses;
import dev.peregrine.http.ForwardedHeaders;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.HttpSettings;
import dev.peregrine.http.Refusal;
import dev.peregrine.http.RequestCore;
import dev.peregrine.http.RequestHead;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.http.StreamExchange;
import dev.peregrine.http.TlsResponseHeaders;
import dev.peregrine.metrics.MetricsLayout;
import dev.peregrine.websocket.WebSocketApplication;
import dev.peregrine.websocket.WebSocketConnection;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http2.DefaultHttp2DataFrame;
import io.netty.handler.codec.http2.DefaultHttp2HeadersFrame;
import io.netty.handler.codec.http2.DefaultHttp2ResetFrame;
import io.netty.handler.codec.http2.DefaultHttp2WindowUpdateFrame;
import io.netty.handler.codec.http2.Http2DataFrame;
import io.netty.handler.codec.http2.Http2Error;
import io.netty.handler.codec.http2.Http2Exception;
import io.netty.handler.codec.http2.Http2FrameCodec;
import io.netty.handler.codec.http2.Http2FrameStream;
import io.netty.handler.codec.http2.Http2FrameStreamEvent;
import io.netty.handler.codec.http2.Http2FrameStreamException;
import io.netty.handler.codec.http2.Http2Headers;
import io.netty.handler.codec.http2.Http2HeadersFrame;
import io.netty.handler.codec.http2.Http2ResetFrame;
import io.netty.handler.codec.http2.Http2Stream;
import io.netty.util.AsciiString;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.collection.IntObjectHashMap;
import io.netty.util.concurrent.ScheduledFuture;
import org.jboss.logging.Logger;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * One HTTP/2 connection, after Netty's frame codec: each stream is one call of the application, with
 * the same exchange interface as HTTP/1.1.
 *
 * <p>Flow control is tied to the application. A DATA frame is acknowledged to the client (its bytes
 * returned to the stream's window) only when the application takes it, so a stream whose application
 * does not read stops its client after one window; the connection window is large enough for every
 * stream's, so that such a stream never stalls the others. Responses go out as the client's windows
 * allow; above a small amount queued, the application is told to wait ({@link HttpExchange#writable}).
 * The connection reads all the time, except while the client does not read what is written to it.
 *
 * <p>An extended CONNECT with {@code :protocol websocket} (RFC 8441) is a WebSocket: its stream gets a
 * channel of its own ({@link WebSocketStreamChannel}) that the WebSocket side runs on, as over HTTP/1.1.
 */
final class Http2Connection extends ChannelDuplexHandler {
    private static final Logger LOG = Logger.getLogger("peregrine");

    private final RequestCore core;
    private final HttpSettings settings;
    private final Connections connections;
    private final IntObjectHashMap<Exchange> streams = new IntObjectHashMap<>();
    /** Where WebSocket handshakes go; null when they are refused (WSGI, --no-websockets). */
    private final WebSocketApplication webSockets;
    /** The streams that carry a WebSocket; made with the first. */
    private IntObjectHashMap<WebSocketStreamChannel> webSocketStreams;
    private final int spareBytes;
    private final int spareHeaders;
    private final TlsResponseHeaders tlsHeaders;

    private ChannelHandlerContext ctx;
    private Http2FrameCodec codec;
    private InetSocketAddress peer;
    private boolean peerIsTrustedProxy;
    private long lastActivity;
    private ScheduledFuture<?> timer;
    private boolean closed;

    Http2Connection(RequestCore core, WebSocketApplication webSockets) {
        this.core = core;
        this.settings = core.settings();
        this.webSockets = settings.webSocket() == null ? null : webSockets;
        this.connections = core.connections();
        this.spareBytes = core.spareBytes();
        this.spareHeaders = core.spareHeaders();
        this.tlsHeaders = settings.tlsHeaders();
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        this.ctx = ctx;
        this.codec = ctx.pipeline().get(Http2FrameCodec.class);
        peer = ctx.channel().remoteAddress() instanceof InetSocketAddress inet ? inet : null;
        peerIsTrustedProxy = settings.trustedProxies().trustsPeerOf(ctx.channel());
        lastActivity = System.nanoTime();
        // Every stream's window fits in the connection's: a stream the application does not read cannot stall the others.
        int connectionWindow = Http2Setup.MAX_CONCURRENT_STREAMS * Http2Setup.STREAM_WINDOW;
        ctx.write(new DefaultHttp2WindowUpdateFrame(connectionWindow - Http2Setup.STREAM_WINDOW));
        ctx.flush();
        armTimer();
        // A stream's body is held back by its window, not by pausing the socket: HTTP/2 reads all the time.
        ctx.channel().config().setAutoRead(true);
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        lastActivity = System.nanoTime();
        if (msg instanceof Http2HeadersFrame headers) {
            onHeaders(headers);
        } else if (msg instanceof Http2DataFrame data) {
            onData(data);
        } else if (msg instanceof Http2ResetFrame reset) {
            Exchange exchange = streams.remove(reset.stream().id());
            if (exchange != null) exchange.cut();
            else if (webSocketStream(reset.stream().id()) instanceof WebSocketStreamChannel webSocket) webSocket.onStreamGone();
        } else {
            ReferenceCountUtil.release(msg); // SETTINGS, PING, GOAWAY, WINDOW_UPDATE...: the codec acted on them
        }
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
        ctx.flush();
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        // A client that does not read its responses gets no more requests read either.
        ctx.channel().config().setAutoRead(ctx.channel().isWritable());
        forEachWebSocket(WebSocketStreamChannel::onWritabilityChanged);
        ctx.fireChannelWritabilityChanged();
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
        if (evt instanceof Http2FrameStreamEvent event) {
            if (event.type() == Http2FrameStreamEvent.Type.Writability) {
                Exchange exchange = streams.get(event.stream().id());
                if (exchange != null) exchange.windowChanged();
                else if (webSocketStream(event.stream().id()) instanceof WebSocketStreamChannel webSocket) webSocket.onWritabilityChanged();
            }
            return;
        }
        if (evt == Connections.DrainEvent.INSTANCE) {
            // WebSockets send their close (1001) and end their streams once the client answers.
            forEachWebSocket(webSocket -> webSocket.onEvent(evt));
            // The codec sends GOAWAY, lets the open streams finish (up to --graceful-timeout), then closes.
            ctx.close();
            return;
        }
        ctx.fireUserEventTriggered(evt);
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        if (cause instanceof Http2FrameStreamException streamError) {
            // An error on a stream the codec knows (a content-length the DATA contradicts, a window overrun...):
            // the codec leaves the reset to the handler of its streams.
            LOG.debugf("HTTP/2 stream %d from %s reset (%s): %s", streamError.stream().id(), peer, streamError.error(), streamError.getCause());
            Exchange exchange = streams.remove(streamError.stream().id());
            if (exchange != null) exchange.cut();
            else if (webSocketStream(streamError.stream().id()) instanceof WebSocketStreamChannel webSocket) webSocket.onStreamGone();
            Http2Stream state = codec.connection().stream(streamError.stream().id());
            if (state != null && state.state() != Http2Stream.State.CLOSED) {
                ctx.writeAndFlush(new DefaultHttp2ResetFrame(streamError.error()).stream(streamError.stream()));
            }
            return;
        }
        // A connection error: the codec sends GOAWAY with its code (PROTOCOL_ERROR, ENHANCE_YOUR_CALM...) and
        // closes right after telling us; a close from here would send a GOAWAY saying NO_ERROR first.
        if (cause instanceof Http2Exception) return;
        LOG.debugf("HTTP/2 connection from %s closed: %s", peer, cause.toString());
        ctx.close();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        closed = true;
        if (timer != null) timer.cancel(false);
        List<Exchange> open = new ArrayList<>(streams.values());
        streams.clear();
        for (Exchange exchange : open) exchange.cut();
        forEachWebSocket(WebSocketStreamChannel::onStreamGone);
        ctx.fireChannelInactive();
    }

    private void onHeaders(Http2HeadersFrame frame) {
        Http2FrameStream stream = frame.stream();
        Exchange existing = streams.get(stream.id());
        if (existing != null) {
            existing.onTrailers(frame.isEndStream()); // trailers: the application is not shown them
            return;
        }
        if (webSocketStream(stream.id()) instanceof WebSocketStreamChannel webSocket) {
            if (frame.isEndStream()) webSocket.onRemoteEnd();
            return;
        }
        RequestHead head;
        try {
            head = FieldListRequests.build(frame.headers(), frame.isEndStream(), spareBytes, spareHeaders);
        } catch (FieldListRequests.Malformed e) {
            LOG.debugf("HTTP/2 stream %d from %s malformed: %s", stream.id(), peer, e.getMessage());
            ctx.write(new DefaultHttp2ResetFrame(Http2Error.PROTOCOL_ERROR).stream(stream));
            return;
        }
        Refusal refusal = core.check(head);
        if (refusal != null) {
            refuse(stream, head, refusal, System.nanoTime());
            return;
        }
        if (head.method().equals("CONNECT")) {
            onExtendedConnect(stream, head, frame.headers().get(Http2Headers.PseudoHeaderName.PROTOCOL.value()), frame.isEndStream());
            return;
        }
        Exchange exchange = new Exchange(stream, head, frame.isEndStream());
        streams.put(stream.id(), exchange);
        exchange.windowChanged(); // a client may open with a window of 0
        core.start(exchange, head, peerIsTrustedProxy);
    }

    private void onData(Http2DataFrame frame) {
        Exchange exchange = streams.get(frame.stream().id());
        if (exchange == null && webSocketStream(frame.stream().id()) instanceof WebSocketStreamChannel webSocket) {
            webSocket.onData(frame);
            return;
        }
        if (exchange == null) {
            // A stream already answered or reset: its bytes go back to the windows at once.
            consume(frame.stream(), frame.initialFlowControlledBytes());
            frame.release();
            return;
        }
        exchange.onData(frame);
    }

    /**
     * A CONNECT that names a protocol (RFC 8441): a WebSocket handshake, handed to the application as one
     * over HTTP/1.1 is. A CONNECT with :path and :scheme but no :protocol is malformed (RFC 9113 8.5).
     */
    private void onExtendedConnect(Http2FrameStream stream, RequestHead head, CharSequence protocol, boolean endStream) {
        long started = System.nanoTime();
        if (protocol == null) {
            LOG.debugf("HTTP/2 stream %d from %s malformed: CONNECT with :path and no :protocol", stream.id(), peer);
            ctx.write(new DefaultHttp2ResetFrame(Http2Error.PROTOCOL_ERROR).stream(stream));
            return;
        }
        if (!AsciiString.contentEqualsIgnoreCase(protocol, "websocket")) {
            refuse(stream, head, Refusal.of(501, "the " + protocol + " protocol is not served over HTTP/2"), started);
            return;
        }
        if (webSockets == null) {
            refuse(stream, head, Refusal.of(501, "WebSocket is not supported"), started);
            return;
        }
        if (endStream) {
            refuse(stream, head, Refusal.of(400, "a WebSocket's CONNECT cannot end its stream"), started);
            return;
        }
        core.decideUpgrade(head, peer, peerIsTrustedProxy, ctx.executor(), (origin, refusal) -> {
            // The stream may have been reset, or the connection closed, while the answer came back from the shared store.
            if (!ctx.channel().isActive() || stream.state() == Http2Stream.State.CLOSED) return;
            if (refusal != null) {
                // Recorded as a handshake the application denied: in the access log with its client, as over HTTP/1.1.
                writeRefusal(stream, refusal);
                core.upgradeAnswered(head, MetricsLayout.HTTP_2, "2", origin.client(), refusal.status(), refusal.body().length, started);
                return;
            }
            acceptWebSocket(stream, head, origin, started);
        });
    }

    /** Opens the stream's WebSocket channel and hands the handshake to the application. */
    private void acceptWebSocket(Http2FrameStream stream, RequestHead head, ForwardedHeaders.Origin origin, long started) {
        WebSocketStreamChannel channel = new WebSocketStreamChannel(ctx, stream, codec, this);
        ctx.channel().eventLoop().register(channel); // on this loop already: registered before it returns
        if (webSocketStreams == null) webSocketStreams = new IntObjectHashMap<>(4);
        webSocketStreams.put(stream.id(), channel);
        WebSocketConnection webSocket = new WebSocketConnection(
                new Http2WebSocketUpgrade(this, ctx, stream, channel, core, head, origin.client(), started),
                channel, head, "2", origin.scheme(), origin.client(), settings.webSocket(), connections);
        // Before the accept the WebSocket side is not in the stream's pipeline: it hears of a reset from here.
        // Deferred, so that a close code being handled when the channel closes reaches the application first.
        channel.closeFuture().addListener(closed -> ctx.executor().execute(webSocket::httpClosed));
        webSocket.begin(webSockets);
    }

    private WebSocketStreamChannel webSocketStream(int streamId) {
        return webSocketStreams == null ? null : webSocketStreams.get(streamId);
    }

    /** Over a copy: what {@code action} does may close a WebSocket, which leaves the map. */
    private void forEachWebSocket(Consumer<WebSocketStreamChannel> action) {
        if (webSocketStreams == null) return;
        for (WebSocketStreamChannel webSocket : new ArrayList<>(webSocketStreams.values())) action.accept(webSocket);
    }

    /** A WebSocket's stream channel closed: it leaves the connection's care. */
    void webSocketClosed(WebSocketStreamChannel channel) {
        if (webSocketStreams != null) webSocketStreams.remove(channel.streamId());
    }

    /** Returns {@code bytes} of a stream's DATA to the client's windows (a WINDOW_UPDATE when enough has been consumed). */
    void consume(Http2FrameStream stream, int bytes) {
        if (bytes > 0 && codec.connection().stream(stream.id()) != null) {
            ctx.write(new DefaultHttp2WindowUpdateFrame(bytes).stream(stream));
        }
    }

    /** A request the server answers itself, without the application; {@code startNanos}: when its head arrived. */
    private void refuse(Http2FrameStream stream, HttpRequestHead head, Refusal refusal, long startNanos) {
        writeRefusal(stream, refusal);
        core.refused(head, MetricsLayout.HTTP_2, refusal.status(), startNanos, refusal.body().length);
    }

    private void writeRefusal(Http2FrameStream stream, Refusal refusal) {
        ctx.write(new DefaultHttp2HeadersFrame(FieldListResponses.headers(refusal.head(), -1, null, tlsHeaders), false).stream(stream));
        ChannelFuture last = ctx.write(new DefaultHttp2DataFrame(Unpooled.wrappedBuffer(refusal.body()), true).stream(stream));
        stopBody(stream, last);
        ctx.flush();
    }

    /**
     * After a complete response, tells a client still sending a body nobody will read to stop
     * (RST_STREAM NO_ERROR, RFC 9113 8.1). Only once the response's last frame is written: DATA waits in
     * the flow controller, and a reset ahead of it would make the client drop the response.
     */
    void stopBody(Http2FrameStream stream, ChannelFuture lastFrame) {
        lastFrame.addListener(written -> {
            Http2Stream state = codec.connection().stream(stream.id());
            if (written.isSuccess() && state != null && state.state() != Http2Stream.State.CLOSED) {
                ctx.writeAndFlush(new DefaultHttp2ResetFrame(Http2Error.NO_ERROR).stream(stream));
            }
        });
    }

    // ---- timeouts: a connection without streams is closed (with GOAWAY) after --keep-alive; a stream whose
    // body stalls while the application waits for it is cut after --request-timeout. One timer per connection.

    private void armTimer() {
        timer = ctx.executor().schedule(this::checkTimeouts, settings.timeoutCheckMillis(), TimeUnit.MILLISECONDS);
    }

    private void checkTimeouts() {
        if (closed) return;
        long now = System.nanoTime();
        boolean idle = streams.isEmpty() && (webSocketStreams == null || webSocketStreams.isEmpty());
        if (settings.keepAliveMillis() > 0 && idle && now - lastActivity >= TimeUnit.MILLISECONDS.toNanos(settings.keepAliveMillis())) {
            ctx.close();
            return;
        }
        if (settings.requestTimeoutMillis() > 0 && !streams.isEmpty()) {
            long limit = TimeUnit.MILLISECONDS.toNanos(settings.requestTimeoutMillis());
            for (Exchange exchange : new ArrayList<>(streams.values())) {
                exchange.checkStall(now, limit);
            }
            ctx.flush();
        }
        armTimer();
    }

    /** One stream: the transport side of one request. */
    final class Exchange extends StreamExchange<Http2DataFrame> {
        private final Http2FrameStream stream;
        private volatile boolean windowOpen = true;
        /** The response's last frame written so far: what the reset of an unread body waits for. */
        private ChannelFuture lastFrame;

        Exchange(Http2FrameStream stream, RequestHead head, boolean requestEnded) {
            super(ctx.channel(), peer, core, head, MetricsLayout.HTTP_2);
            this.stream = stream;
            this.requestEnded = requestEnded;
        }

        @Override public String httpVersion() { return "2"; }

        void onData(Http2DataFrame frame) {
            if (frame.isEndStream()) requestEnded = true;
            onBody(frame, frame.content().readableBytes());
        }

        void onTrailers(boolean endStream) {
            if (endStream) onRequestEnd();
        }

        @Override
        protected ByteBuf take(Http2DataFrame frame) {
            consume(stream, frame.initialFlowControlledBytes());
            return frame.content();
        }

        @Override
        protected void discard(Http2DataFrame frame) {
            consume(stream, frame.initialFlowControlledBytes());
            frame.release();
        }

        @Override
        protected void afterDemand() {
            ctx.flush();
        }

        @Override
        protected boolean writeHead(ResponseHead response, long completeSize, boolean endStream) {
            lastFrame = ctx.write(new DefaultHttp2HeadersFrame(FieldListResponses.headers(response, completeSize, requestId(), tlsHeaders), endStream)
                    .stream(stream));
            if (endStream) ctx.flush();
            return endStream;
        }

        @Override
        protected void writeData(ByteBuf data) {
            if (data == null) ctx.flush();
            else lastFrame = ctx.writeAndFlush(new DefaultHttp2DataFrame(data, false).stream(stream));
        }

        @Override
        protected void writeEnd(ByteBuf last, boolean complete) {
            lastFrame = ctx.write(new DefaultHttp2DataFrame(last != null ? last : Unpooled.EMPTY_BUFFER, complete).stream(stream));
            if (!complete) {
                // A reset goes out ahead of DATA the flow controller still holds: the client would lose what did arrive.
                lastFrame.addListener(written -> {
                    if (codec.connection().stream(stream.id()) != null) {
                        ctx.writeAndFlush(new DefaultHttp2ResetFrame(Http2Error.INTERNAL_ERROR).stream(stream));
                    }
                });
                requestEnded = true; // the reset ends the request side too
            }
            ctx.flush();
        }

        @Override
        protected void stopBody() {
            Http2Connection.this.stopBody(stream, lastFrame);
            ctx.flush();
        }

        @Override
        protected void refuse(Refusal refusal) {
            Http2Connection.this.refuse(stream, head(), refusal, startNanos());
        }

        @Override
        protected void reset(boolean refused) {
            if (!closed) ctx.writeAndFlush(new DefaultHttp2ResetFrame(refused ? Http2Error.CANCEL : Http2Error.INTERNAL_ERROR).stream(stream));
        }

        @Override
        protected void released() {
            streams.remove(stream.id());
        }

        @Override
        public boolean writable() {
            return fewQueued() && windowOpen;
        }

        void windowChanged() {
            Http2Stream s = codec.connection().stream(stream.id());
            windowOpen = s == null || codec.connection().remote().flowController().isWritable(s);
            if (windowOpen) runWritableTasks();
        }

        @Override
        protected boolean acceptsMore() {
            return disconnected() || windowOpen;
        }
    }
}
