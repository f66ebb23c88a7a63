package dev.peregrine.http1;

import dev.peregrine.http.Connections;
import dev.peregrine.http.HttpSettings;
import dev.peregrine.http.Refusal;
import dev.peregrine.http.RequestCore;
import dev.peregrine.http.RequestHead;
import dev.peregrine.metrics.MetricsLayout;
import dev.peregrine.metrics.RequestMetrics;
import dev.peregrine.websocket.WebSocketApplication;
import dev.peregrine.websocket.WebSocketConnection;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.socket.DuplexChannel;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.handler.ssl.SslHandler;
import io.netty.util.concurrent.ScheduledFuture;

import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * One HTTP/1.1 connection: parses request heads, hands each request to the application adapter,
 * feeds it the body as it asks, and writes the response it gives. Requests on one connection are
 * served one after the other, so pipelined requests are answered in order: the next head is not
 * parsed before the current response is complete.
 *
 * <p>The channel does not read automatically. The connection reads when it needs a head, when the
 * application asked for body, or (while a response is being produced) to notice the client leaving.
 */
public final class Http1Connection extends ChannelInboundHandlerAdapter {
    /** How much pipelined input is buffered while a response is produced before reading pauses. */
    private static final int READ_AHEAD = 64 * 1024;

    /**
     * How long an answer that leaves the client still sending (a 413, a response that did not read the body) keeps
     * reading and discarding before the close, in all and without a byte arriving: nginx's lingering_time and
     * lingering_timeout. Closing a socket with unread bytes in its receive buffer sends a reset, and a reset that
     * reaches the client before it read the answer destroys the answer in the client's kernel: the client sees
     * "connection reset" instead of its 413.
     */
    private static final long LINGER_NANOS = TimeUnit.SECONDS.toNanos(30);
    private static final long LINGER_QUIET_NANOS = TimeUnit.SECONDS.toNanos(5);

    /**
     * UPGRADING: a WebSocket handshake waits for the application to accept or deny it; nothing is read meanwhile.
     * LINGERING: the last answer is written, and what the client still sends is read and dropped until it stops.
     */
    private enum State { HEAD, BODY, RESPONDING, UPGRADING, LINGERING, CLOSED }

    private final RequestCore core;
    private final HttpSettings settings;
    /** Where WebSocket upgrades go; null when they are refused (WSGI, --no-websockets). */
    private final WebSocketApplication webSockets;
    private final RequestMetrics metrics;
    private final RequestHeadParser parser;
    private boolean started;
    /** Made on the first chunked request: most connections never see one, and idle ones should cost little. */
    private ChunkedDecoder chunkedDecoder;

    private ChannelHandlerContext ctx;
    /** What the client sent that is not consumed yet: a head, the current request's body, pipelined requests. */
    private ByteBuf input = Unpooled.EMPTY_BUFFER;
    private State state = State.HEAD;
    /** The exchange of the request being served; null between requests and once it broke off. */
    private Http1Exchange current;
    private WebSocketConnection upgrading;
    private boolean readPending;
    private long lastProgress;
    private long headStarted;
    private ScheduledFuture<?> timer;
    private boolean draining;
    /** The peer and whether its forwarding headers are believed: fixed for the connection's life. */
    private InetSocketAddress peer;
    private boolean peerIsTrustedProxy;
    /** Since when this connection waits on its client, for the admission of new ones at --max-connections. */
    private Connections.Waiting waiting;
    private long lingerStarted;

    public Http1Connection(RequestCore core, WebSocketApplication webSockets) {
        this.core = core;
        this.settings = core.settings();
        this.webSockets = settings.webSocket() == null ? null : webSockets;
        this.metrics = core.metrics();
        this.parser = new RequestHeadParser(settings.maxHeadSize(), core.spareBytes(), core.spareHeaders());
    }

    RequestCore core() { return core; }
    HttpSettings settings() { return settings; }

    /** Responses close their connections: this one, or the whole server, drains. */
    boolean draining() { return draining || core.connections().draining(); }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        this.ctx = ctx;
        // Added after the TLS handshake or the protocol choice, the connection is active already.
        if (ctx.channel().isActive()) start();
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        start();
        ctx.fireChannelActive();
    }

    private void start() {
        if (started) return;
        started = true;
        peer = inet(ctx.channel().remoteAddress());
        peerIsTrustedProxy = settings.trustedProxies().trustsPeerOf(ctx.channel());
        lastProgress = System.nanoTime();
        waiting = Connections.waiting(ctx.channel());
        waiting.since(lastProgress);
        // A slow client displaced by a new one is told why, as a stalled one is by the timeout.
        waiting.onReclaim(this::reclaimed);
        armTimer(tick());
        read();
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        readPending = false;
        ByteBuf data = (ByteBuf) msg;
        if (state == State.CLOSED) {
            data.release();
            return;
        }
        if (state == State.LINGERING) {
            data.release();
            lastProgress = System.nanoTime();
            read();
            return;
        }
        if (data.isReadable() && !input.isReadable() && state == State.HEAD) headStarted = System.nanoTime();
        input = ByteToMessageDecoder.MERGE_CUMULATOR.cumulate(ctx.alloc(), input, data);
        lastProgress = System.nanoTime();
        advance();
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
        ctx.flush();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        state = State.CLOSED;
        if (timer != null) timer.cancel(false);
        releaseInput();
        Http1Exchange exchange = current;
        current = null;
        if (exchange != null) exchange.cut();
        if (upgrading != null) upgrading.httpClosed();
        ctx.fireChannelInactive();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        // Resets and broken pipes end the connection like a close; nothing to report.
        ctx.close();
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        if (ctx.channel().isWritable() && current != null) current.writableAgain();
        ctx.fireChannelWritabilityChanged();
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
        if (evt == Connections.DrainEvent.INSTANCE) {
            draining = true;
            if (state == State.HEAD && !input.isReadable()) {
                // A client that is about to reuse this connection would see it reset under its request:
                // one idle for a while is closed now, one just used gets the drain's grace to send its next
                // request, which is then answered with Connection: close.
                long grace = core.connections().drainIdleGraceNanos();
                long idle = System.nanoTime() - lastProgress;
                if (idle >= grace) ctx.close();
                else ctx.executor().schedule(this::closeIfIdle, grace - idle, TimeUnit.NANOSECONDS);
            }
            return;
        }
        ctx.fireUserEventTriggered(evt);
    }

    private void closeIfIdle() {
        if (state == State.HEAD && !input.isReadable()) {
            state = State.CLOSED;
            ctx.close();
        }
    }

    /** Room was needed for a new connection, and this one had waited on its client longest. */
    private void reclaimed() {
        if (state == State.HEAD && input.isReadable()) {
            // Closed at once, not lingering: the connection's slot is what the new one needs.
            ChannelFuture written = answer(Refusal.of(408, "request head too slow while the server is full"), null);
            state = State.CLOSED;
            written.addListener(ChannelFutureListener.CLOSE);
        } else if (state == State.HEAD || state == State.LINGERING) {
            state = State.CLOSED;
            ctx.close();
        }
    }

    /** Does whatever the current state allows with the input buffered so far. */
    private void advance() {
        while (state == State.HEAD) {
            RequestHead head;
            try {
                head = parser.parse(input);
            } catch (HttpParseException e) {
                refuse(Refusal.of(e.status(), e.getMessage()), null);
                return;
            }
            if (head == null) {
                read();
                return;
            }
            if (!begin(head)) return;
        }
        if (state == State.BODY) current.pump();
        // Once a request's body is all read (a GET's with its head, before the application asks for it), a read
        // stays outstanding. Left without one, Netty takes the socket out of the epoll set and puts it back once
        // the response is written: two epoll_ctl calls a request, a fifth of the I/O thread's time on
        // GET /user/0 at 64 connections (perf, issue 14).
        if (state == State.RESPONDING || state == State.BODY && current.bodyComplete()) readAheadForClose();
    }

    /** Starts an exchange for a parsed head; false when the request was refused instead. */
    private boolean begin(RequestHead head) {
        Refusal refusal = core.check(head);
        if (refusal != null) {
            refuse(refusal, head);
            return false;
        }
        if (head.upgradeWebSocket()) {
            // WSGI or --no-websockets: refuse the upgrade rather than serve it as plain HTTP.
            if (webSockets == null) refuse(Refusal.of(501, "WebSocket is not supported"), head);
            else upgrade(head);
            return false;
        }
        Http1Exchange exchange = new Http1Exchange(this, ctx, head, peer, headStarted);
        current = exchange;
        state = State.BODY;
        waiting.busy();
        core.start(exchange, head, peerIsTrustedProxy);
        return true;
    }

    /** Hands a WebSocket handshake to the application; the connection stays here until it accepts or denies. */
    private void upgrade(RequestHead head) {
        state = State.UPGRADING;
        waiting.busy();
        core.decideUpgrade(head, peer, peerIsTrustedProxy, ctx.executor(), (origin, refusal) -> {
            if (state != State.UPGRADING) return; // closed while the answer came back from the shared store
            Http1Upgrade http = new Http1Upgrade(this, ctx, head, origin.client(), headStarted);
            if (refusal != null) {
                // Answered as a handshake the application denied: counted, and in the access log with its client.
                http.respond(refusal.head(), Unpooled.wrappedBuffer(refusal.body()));
                return;
            }
            upgrading = new WebSocketConnection(http, ctx.channel(), head,
                    head.http11() ? "1.1" : "1.0", origin.scheme(), origin.client(), settings.webSocket(), core.connections());
            upgrading.begin(webSockets);
        });
    }

    /** The handshake was answered without an upgrade: the response closes the connection. */
    void upgradeAnswered() {
        // upgrading stays set: the WebSocket side learns of the close, and stops counting the request, in channelInactive.
        state = State.CLOSED;
    }

    /** The 101 is written: the WebSocket codec takes the channel over, with whatever the client sent after its handshake. */
    ByteBuf handOver() {
        upgrading = null;
        state = State.CLOSED;
        if (timer != null) timer.cancel(false);
        ByteBuf early = input;
        input = Unpooled.EMPTY_BUFFER;
        ctx.pipeline().remove(this);
        return early;
    }

    private static InetSocketAddress inet(SocketAddress address) {
        return address instanceof InetSocketAddress inet ? inet : null;
    }

    /**
     * Answers a request the server itself rejects, and closes: after a framing error nothing that follows
     * can be trusted. {@code head}: the request refused, when it was parsed (its method and version are counted).
     */
    void refuse(Refusal refusal, RequestHead head) {
        closeLingering(answer(refusal, head));
    }

    private ChannelFuture answer(Refusal refusal, RequestHead head) {
        input.skipBytes(input.readableBytes());
        ByteBuf out = ResponseEncoder.refusal(ctx.alloc(), refusal);
        core.refused(head, head == null ? MetricsLayout.HTTP_1_1 : protocol(head), refusal.status(), headStarted, out.readableBytes());
        return ctx.writeAndFlush(out);
    }

    /**
     * Closes once {@code written} is out and the client has stopped sending: the client may still be sending a
     * body nobody reads, and a plain close would reset the connection under the answer (see {@link #LINGER_NANOS}).
     * Without TLS the answer is followed by a FIN at once, so a client that waits for the end of the response
     * sees it; with TLS the socket is left whole, since a FIN under the TLS session would cut it short.
     */
    private void closeLingering(ChannelFuture written) {
        state = State.LINGERING;
        releaseInput();
        written.addListener(f -> {
            if (!f.isSuccess() || !ctx.channel().isActive()) {
                close();
                return;
            }
            lingerStarted = lastProgress = System.nanoTime();
            waiting.since(lingerStarted);
            if (ctx.channel() instanceof DuplexChannel duplex && ctx.pipeline().get(SslHandler.class) == null) duplex.shutdownOutput();
            read();
        });
    }

    void close() {
        state = State.CLOSED;
        ctx.close();
    }

    /** An idle connection keeps no buffer: thousands of idle keep-alive connections should cost a few KiB each. */
    private void releaseInput() {
        input.release();
        input = Unpooled.EMPTY_BUFFER;
    }

    // ---- what the exchange of the current request asks of its connection; the state stays here ----

    /** Whether {@code exchange} is still the request served: once it finished or broke off, its late calls change nothing. */
    boolean serves(Http1Exchange exchange) {
        return current == exchange;
    }

    /** {@code exchange} broke off (its body broke, the application aborted): the close and the timeouts leave it alone. */
    void drop(Http1Exchange exchange) {
        if (current == exchange) current = null;
    }

    /** Whether the body is still being read, so that the application's demand can be met from the wire. */
    boolean readingBody() {
        return state == State.BODY;
    }

    /** The body was all handed to the application: what arrives now is watched only for the client leaving. */
    void bodyDelivered() {
        state = State.RESPONDING;
    }

    boolean hasBufferedInput() {
        return input.isReadable();
    }

    ByteBuf takeBody(long max) {
        return input.readRetainedSlice((int) Math.min(max, input.readableBytes()));
    }

    /** Decodes the chunked body buffered so far into {@code pieces}; true once its last chunk and trailer are read. */
    boolean decodeChunks(List<ByteBuf> pieces) throws HttpParseException {
        if (chunkedDecoder == null) chunkedDecoder = new ChunkedDecoder(4096, 8192);
        return chunkedDecoder.decode(input, pieces);
    }

    /** Skips {@code bytes} of body nobody will read, so that the next request can follow; false when they are not all here yet. */
    boolean skipBody(long bytes) {
        if (input.readableBytes() < bytes) return false;
        input.skipBytes((int) bytes);
        return true;
    }

    void read() {
        if (!readPending && state != State.CLOSED) {
            readPending = true;
            ctx.read();
        }
    }

    /** While a response is produced, keep one read outstanding so that a client that leaves is noticed. */
    void readAheadForClose() {
        if (input.readableBytes() < READ_AHEAD) read();
    }

    /** Called when the response of {@code exchange} is complete: log, then serve the next request or close. */
    void finished(Http1Exchange exchange, boolean keepAlive) {
        core.connections().requestEnded();
        metrics.requestFinished(exchange.requestHead().method(), protocol(exchange.requestHead()), exchange.status(), exchange.startNanos(),
                exchange.bodyReceived(), exchange.bytesSent());
        if (settings.accessLog() != null) settings.accessLog().log(exchange, exchange.status(), exchange.bytesSent(), exchange.startNanos());
        if (current != exchange) return;
        current = null;
        if (!exchange.discardUnreadBody()) {
            // The application answered without reading the whole body, and the client may still be sending it.
            closeLingering(ctx.writeAndFlush(Unpooled.EMPTY_BUFFER));
            return;
        }
        if (!keepAlive || draining) {
            state = State.CLOSED;
            ctx.flush();
            ctx.close();
            return;
        }
        state = State.HEAD;
        if (chunkedDecoder != null) chunkedDecoder.reset();
        lastProgress = System.nanoTime();
        waiting.since(lastProgress);
        if (input.isReadable()) headStarted = lastProgress;
        if (input.isReadable()) {
            advance();
        } else {
            releaseInput();
            read();
        }
    }

    static int protocol(RequestHead head) {
        return head.http11() ? MetricsLayout.HTTP_1_1 : MetricsLayout.HTTP_1_0;
    }

    // ---- timeouts: one timer per connection, re-armed lazily instead of per request ----

    private long tick() {
        long keepAlive = settings.keepAliveMillis() > 0 ? settings.keepAliveMillis() : Long.MAX_VALUE;
        long request = settings.requestTimeoutMillis() > 0 ? settings.requestTimeoutMillis() : Long.MAX_VALUE;
        long t = Math.min(keepAlive, request);
        return t == Long.MAX_VALUE ? 1000 : Math.max(10, t);
    }

    private void armTimer(long millis) {
        timer = ctx.executor().schedule(this::checkTimeouts, millis, TimeUnit.MILLISECONDS);
    }

    private void checkTimeouts() {
        if (state == State.CLOSED) return;
        long now = System.nanoTime();
        long deadline = Long.MAX_VALUE;
        boolean idle = state == State.HEAD && !input.isReadable();
        if (state == State.LINGERING) {
            if (lingerStarted != 0) {
                deadline = Math.min(lingerStarted + LINGER_NANOS, lastProgress + LINGER_QUIET_NANOS);
                if (now - deadline >= 0) {
                    close();
                    return;
                }
            }
        } else if (idle) {
            if (settings.keepAliveMillis() > 0) deadline = lastProgress + TimeUnit.MILLISECONDS.toNanos(settings.keepAliveMillis());
            if (now >= deadline) {
                state = State.CLOSED;
                ctx.close();
                return;
            }
        } else if (settings.requestTimeoutMillis() > 0 && (state == State.HEAD || (state == State.BODY && current.waitingForClient()))) {
            long since = state == State.HEAD ? headStarted : lastProgress;
            deadline = since + TimeUnit.MILLISECONDS.toNanos(settings.requestTimeoutMillis());
            if (now >= deadline) {
                timedOut();
                return;
            }
        }
        long wait = deadline == Long.MAX_VALUE ? tick() : Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - now) + 1);
        armTimer(Math.min(wait, tick()));
    }

    /** A request stalled mid-message: 408 if nothing was answered yet, and close either way. */
    private void timedOut() {
        Http1Exchange exchange = current;
        if (exchange != null && exchange.headSent()) {
            state = State.CLOSED;
            ctx.close();
            return;
        }
        refuse(Refusal.of(408, "request timed out"), exchange == null ? null : exchange.requestHead());
        if (exchange != null) {
            current = null;
            exchange.cut();
        }
    }
}
