package dev.peregrine.http1;

import dev.peregrine.http.RequestHead;
import dev.peregrine.http.AddedHeaders;
import dev.peregrine.http.Application;
import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.HttpSettings;
import dev.peregrine.http.LoopExchange;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.http.TlsResponseHeaders;
import dev.peregrine.ops.metrics.MetricsLayout;
import dev.peregrine.ops.metrics.RequestMetrics;
import dev.peregrine.http.ForwardedHeaders;
import dev.peregrine.http.Connections;
import dev.peregrine.websocket.HttpUpgrade;
import dev.peregrine.websocket.WebSocketApplication;
import dev.peregrine.websocket.WebSocketConnection;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.util.concurrent.ScheduledFuture;

import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.time.Instant;
import java.util.ArrayList;
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
    /** Unread body smaller than this that is already buffered is skipped to keep the connection. */
    private static final int SKIPPABLE_BODY = 64 * 1024;
    /** How much pipelined input is buffered while a response is produced before reading pauses. */
    private static final int READ_AHEAD = 64 * 1024;

    /** How long a connection must have been idle for a drain to close it without waiting for its next request. */
    private static final long DRAIN_IDLE_GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(250);

    /** UPGRADING: a WebSocket handshake waits for the application to accept or deny it; nothing is read meanwhile. */
    private enum State { HEAD, BODY, RESPONDING, UPGRADING, CLOSED }

    private final HttpSettings settings;
    private final Application application;
    private final Connections connections;
    private final RequestMetrics metrics;
    private final RequestHeadParser parser;
    /** The Strict-Transport-Security line of every response, or null. */
    private final TlsResponseHeaders tlsHeaders;
    private boolean started;
    /** Made on the first chunked request: most connections never see one, and idle ones should cost little. */
    private ChunkedDecoder chunkedDecoder;

    private ChannelHandlerContext ctx;
    private ByteBuf input = Unpooled.EMPTY_BUFFER;
    private State state = State.HEAD;
    private Exchange current;
    private WebSocketConnection upgrading;
    private boolean readPending;
    private long lastProgress;
    private long headStarted;
    private ScheduledFuture<?> timer;
    private boolean draining;
    /** The peer and whether its forwarding headers are believed: fixed for the connection's life. */
    private InetSocketAddress peer;
    private boolean peerIsTrustedProxy;

    public Http1Connection(HttpSettings settings, Application application, Connections connections) {
        this.settings = settings;
        this.application = application;
        this.connections = connections;
        this.metrics = connections.metrics();
        this.parser = new RequestHeadParser(settings.maxHeadSize(), AddedHeaders.spareBytes(settings), AddedHeaders.spareHeaders(settings));
        this.tlsHeaders = settings.tlsHeaders();
    }

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
        Exchange exchange = current;
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
                // one idle for a while is closed now, one just used gets a moment to send its next request,
                // which is then answered with Connection: close.
                long idle = System.nanoTime() - lastProgress;
                if (idle >= DRAIN_IDLE_GRACE_NANOS) ctx.close();
                else ctx.executor().schedule(this::closeIfIdle, DRAIN_IDLE_GRACE_NANOS - idle, TimeUnit.NANOSECONDS);
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

    /** Does whatever the current state allows with the input buffered so far. */
    private void advance() {
        while (state == State.HEAD) {
            RequestHead head;
            try {
                head = parser.parse(input);
            } catch (HttpParseException e) {
                refuse(e.status(), e.getMessage());
                return;
            }
            if (head == null) {
                read();
                return;
            }
            if (!begin(head)) return;
        }
        if (state == State.BODY) current.pump();
        else if (state == State.RESPONDING) readAheadForClose();
    }

    /** Starts an exchange for a parsed head; false when the request was refused instead. */
    private boolean begin(RequestHead head) {
        if (head.contentLength() > settings.maxBody()) {
            refuse(413, "request body larger than --max-body", head);
            return false;
        }
        if (head.upgradeWebSocket()) {
            WebSocketApplication webSockets = settings.webSocket() == null ? null : application.webSockets();
            if (webSockets == null) {
                // WSGI or --no-websockets: refuse the upgrade rather than serve it as plain HTTP.
                refuse(501, "WebSocket is not supported", head);
            } else {
                upgrade(head, webSockets);
            }
            return false;
        }
        Exchange exchange = new Exchange(head);
        if (peerIsTrustedProxy) {
            ForwardedHeaders.Origin origin = ForwardedHeaders.resolve(head, settings.trustedProxies());
            if (origin != null) exchange.forwardedAs(origin.client(), origin.scheme());
        }
        if (settings.requestId()) exchange.requestIdHeader = AddedHeaders.requestId(head);
        if (settings.requestStartHeader()) AddedHeaders.requestStart(head, headStartedMicros(), peerIsTrustedProxy);
        current = exchange;
        state = State.BODY;
        connections.requestStarted();
        application.dispatch(exchange);
        return true;
    }

    /** Hands a WebSocket handshake to the application; the connection stays here until it accepts or denies. */
    private void upgrade(RequestHead head, WebSocketApplication webSockets) {
        state = State.UPGRADING;
        InetSocketAddress client = peer;
        String scheme = settings.scheme();
        if (peerIsTrustedProxy) {
            ForwardedHeaders.Origin origin = ForwardedHeaders.resolve(head, settings.trustedProxies());
            if (origin != null && origin.client() != null) client = origin.client();
            if (origin != null && origin.scheme() != null) scheme = origin.scheme();
        }
        upgrading = new WebSocketConnection(new Upgrade(head, client), ctx, head, head.http11() ? "1.1" : "1.0", scheme, client,
                settings.webSocket(), connections);
        upgrading.begin(webSockets);
    }

    /** The HTTP side of a WebSocket handshake: the denial (or error) response, or the 101 and the hand-over. */
    private final class Upgrade implements HttpUpgrade {
        private final RequestHead head;
        private final InetSocketAddress client;

        Upgrade(RequestHead head, InetSocketAddress client) {
            this.head = head;
            this.client = client;
        }

        private void answered(int status, int bytes) {
            metrics.requestFinished(head.method(), protocol(head), status, headStarted, 0, bytes);
            if (settings.accessLog() != null) settings.accessLog().log(head, head.http11() ? "1.1" : "1.0", client, status, bytes, headStarted);
        }

        @Override
        public void respond(ResponseHead response, ByteBuf body) {
            // upgrading stays set: the WebSocket side learns of the close, and stops counting the request, in channelInactive.
            state = State.CLOSED;
            int size = body == null ? 0 : body.readableBytes();
            ResponseEncoder.Framing framing = ResponseEncoder.framing(head, response, size);
            long length = ResponseEncoder.declaredLength(response, size);
            if (body != null && (framing == ResponseEncoder.Framing.NONE || size == 0)) {
                body.release();
                body = null;
            } else if (body != null && size > length) {
                body.writerIndex(body.readerIndex() + (int) length);
            }
            ByteBuf out = ResponseEncoder.head(ctx.alloc(), head, response, framing, false, size, -1, tlsHeaders);
            int sent = out.readableBytes() + (body == null ? 0 : body.readableBytes());
            answered(response.status(), sent);
            if (body != null) ctx.write(out);
            ctx.writeAndFlush(body != null ? body : out).addListener(ChannelFutureListener.CLOSE);
        }

        @Override
        public ByteBuf switchProtocols(ResponseHead response) {
            upgrading = null;
            state = State.CLOSED;
            if (timer != null) timer.cancel(false);
            ByteBuf out = ResponseEncoder.head(ctx.alloc(), head, response, ResponseEncoder.Framing.NONE, true, -1, -1, tlsHeaders);
            answered(101, out.readableBytes());
            ctx.writeAndFlush(out);
            ByteBuf early = input;
            input = Unpooled.EMPTY_BUFFER;
            ctx.pipeline().remove(Http1Connection.this);
            return early;
        }
    }

    /** Wall-clock time when the first byte of the current head arrived, in microseconds since the epoch. */
    private long headStartedMicros() {
        Instant now = Instant.now();
        long nowMicros = now.getEpochSecond() * 1_000_000 + now.getNano() / 1000;
        return nowMicros - Math.max(0, (System.nanoTime() - headStarted) / 1000);
    }

    private static InetSocketAddress inet(SocketAddress address) {
        return address instanceof InetSocketAddress inet ? inet : null;
    }

    /** Answers a request the server itself rejects, and closes: after a framing error nothing that follows can be trusted. */
    private void refuse(int status, String reason) {
        refuse(status, reason, null);
    }

    /** @param head the request refused, when it was parsed: its method and version are counted */
    private void refuse(int status, String reason, RequestHead head) {
        state = State.CLOSED;
        input.skipBytes(input.readableBytes());
        ByteBuf out = ResponseEncoder.simple(ctx.alloc(), status, reason);
        if (head == null) metrics.requestFinished(null, MetricsLayout.HTTP_1_1, status, headStarted, 0, out.readableBytes());
        else metrics.requestFinished(head.method(), protocol(head), status, headStarted, 0, out.readableBytes());
        ctx.writeAndFlush(out).addListener(ChannelFutureListener.CLOSE);
    }

    /** An idle connection keeps no buffer: thousands of idle keep-alive connections should cost a few KiB each. */
    private void releaseInput() {
        input.release();
        input = Unpooled.EMPTY_BUFFER;
    }

    private ChunkedDecoder chunkedDecoder() {
        if (chunkedDecoder == null) chunkedDecoder = new ChunkedDecoder(4096, 8192);
        return chunkedDecoder;
    }

    private void read() {
        if (!readPending && state != State.CLOSED) {
            readPending = true;
            ctx.read();
        }
    }

    /** While a response is produced, keep one read outstanding so that a client that leaves is noticed. */
    private void readAheadForClose() {
        if (input.readableBytes() < READ_AHEAD) read();
    }

    /** Called when the response of {@code exchange} is complete: log, then serve the next request or close. */
    private void finished(Exchange exchange, boolean keepAlive) {
        connections.requestEnded();
        metrics.requestFinished(exchange.method(), protocol(exchange.head), exchange.status, exchange.startNanos,
                exchange.bodyReceived, exchange.bytesSent);
        if (settings.accessLog() != null) settings.accessLog().log(exchange, exchange.status, exchange.bytesSent, exchange.startNanos);
        if (current != exchange) return;
        current = null;
        if (!keepAlive || draining || !exchange.discardUnreadBody()) {
            state = State.CLOSED;
            ctx.flush();
            ctx.close();
            return;
        }
        state = State.HEAD;
        if (chunkedDecoder != null) chunkedDecoder.reset();
        lastProgress = System.nanoTime();
        if (input.isReadable()) headStarted = lastProgress;
        if (input.isReadable()) {
            advance();
        } else {
            releaseInput();
            read();
        }
    }

    private static int protocol(RequestHead head) {
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
        if (idle) {
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
        Exchange exchange = current;
        if (exchange != null && exchange.headSent) {
            state = State.CLOSED;
            ctx.close();
            return;
        }
        refuse(408, "request timed out", exchange == null ? null : exchange.head);
        if (exchange != null) {
            current = null;
            exchange.cut();
        }
    }

    /** The transport side of one request. */
    final class Exchange extends LoopExchange {
        private final RequestHead head;
        private final long startNanos = System.nanoTime();
        private boolean demanded;
        private boolean bodyEnded;
        private boolean endDelivered;
        private long bodyRemaining;
        private long bodyReceived;
        private boolean continueSent;
        private boolean done;
        // Response state, touched only on the I/O thread.
        private boolean headSent;
        private int status;
        private long bytesSent;
        private ResponseEncoder.Framing framing;
        private boolean keepAlive;
        /** Index in the head of the X-Request-ID header echoed on the response, or -1. */
        private int requestIdHeader = -1;

        Exchange(RequestHead head) {
            super(ctx.channel(), peer, settings.scheme());
            this.head = head;
            this.bodyRemaining = head.chunked() ? -1 : Math.max(0, head.contentLength());
            this.bodyEnded = !head.chunked() && bodyRemaining == 0;
        }

        @Override public HttpRequestHead head() { return head; }
        @Override public String httpVersion() { return head.http11() ? "1.1" : "1.0"; }

        public String method() { return head.method(); }

        @Override
        public void demand() {
            onLoop(this::demandOnLoop);
        }

        private void demandOnLoop() {
            if (disconnected() || current != this) return;
            demanded = true;
            if (state == State.BODY) pump();
        }

        boolean waitingForClient() {
            return demanded && !bodyEnded;
        }

        /** Delivers buffered body to the receiver while it has asked for some; reads when it needs more. */
        void pump() {
            while (demanded && receiver() != null && current == this) {
                if (bodyEnded) {
                    if (!endDelivered) {
                        endDelivered = true;
                        demanded = false;
                        state = State.RESPONDING;
                        receiver().onBodyEnd();
                        readAheadForClose();
                    }
                    return;
                }
                if (head.expectContinue() && !continueSent && head.http11()) {
                    continueSent = true;
                    ctx.writeAndFlush(ResponseEncoder.continueResponse());
                }
                if (!input.isReadable()) {
                    read();
                    return;
                }
                ByteBuf data;
                if (head.chunked()) {
                    List<ByteBuf> pieces = new ArrayList<>(2);
                    try {
                        bodyEnded = chunkedDecoder().decode(input, pieces);
                    } catch (HttpParseException e) {
                        pieces.forEach(ByteBuf::release);
                        bodyError(e.status(), e.getMessage());
                        return;
                    }
                    if (pieces.isEmpty()) continue;
                    data = pieces.size() == 1 ? pieces.get(0) : ctx.alloc().compositeBuffer(pieces.size()).addComponents(true, pieces);
                } else {
                    int n = (int) Math.min(bodyRemaining, input.readableBytes());
                    data = input.readRetainedSlice(n);
                    bodyRemaining -= n;
                    bodyEnded = bodyRemaining == 0;
                }
                bodyReceived += data.readableBytes();
                if (bodyReceived > settings.maxBody()) {
                    data.release();
                    bodyError(413, "request body larger than --max-body");
                    return;
                }
                demanded = false;
                receiver().onBody(data);
            }
        }

        /** The body broke its framing or its limit: answer it ourselves if we still can, and close. */
        private void bodyError(int status, String reason) {
            boolean answered = headSent;
            current = null;
            cut();
            if (answered) {
                state = State.CLOSED;
                ctx.close();
            } else {
                refuse(status, reason, head);
            }
        }

        @Override
        protected void onCut() {
            if (!done) {
                done = true;
                connections.requestEnded();
            }
        }

        /**
         * After the response, the part of the body the application did not read is still on the wire.
         * Skips it when it is small and already here; false when the connection must close instead.
         */
        boolean discardUnreadBody() {
            if (bodyEnded) return true;
            if (head.chunked()) {
                List<ByteBuf> pieces = new ArrayList<>();
                try {
                    boolean complete = chunkedDecoder().decode(input, pieces);
                    return complete;
                } catch (HttpParseException e) {
                    return false;
                } finally {
                    pieces.forEach(ByteBuf::release);
                }
            }
            if (bodyRemaining <= SKIPPABLE_BODY && input.readableBytes() >= bodyRemaining) {
                input.skipBytes((int) bodyRemaining);
                return true;
            }
            return false;
        }

        @Override
        protected void write(ResponseHead responseHead, ByteBuf body, boolean last, int size) {
            if (disconnected() || done) {
                if (body != null) body.release();
                return;
            }
            ByteBufAllocator alloc = ctx.alloc();
            ByteBuf out;
            if (responseHead != null) {
                status = responseHead.status();
                framing = ResponseEncoder.framing(head, responseHead, last ? size : -1);
                lengthLeft = ResponseEncoder.declaredLength(responseHead, last ? size : -1);
                keepAlive = head.keepAlive() && !responseHead.connectionClose() && !draining && !connections.draining()
                        && framing != ResponseEncoder.Framing.UNTIL_CLOSE && settings.keepAliveMillis() > 0;
                out = ResponseEncoder.head(alloc, head, responseHead, framing, keepAlive, last ? size : -1, requestIdHeader, tlsHeaders);
                headSent = true;
            } else {
                out = null;
            }
            ByteBuf framed = body == null ? null : framing.frame(alloc, body, this);
            if (framed != null) bytesSent += framed.readableBytes();
            if (last) {
                ByteBuf trailer = framing.end(alloc, this);
                if (framing.incomplete(this)) keepAlive = false; // fewer bytes than the declared Content-Length
                out = append(alloc, out, framed);
                out = append(alloc, out, trailer);
                done = true;
                boolean reuse = keepAlive;
                if (out != null) ctx.writeAndFlush(out);
                else ctx.flush();
                finished(this, reuse);
            } else {
                out = append(alloc, out, framed);
                if (out != null) ctx.writeAndFlush(out);
            }
        }

        private ByteBuf append(ByteBufAllocator alloc, ByteBuf first, ByteBuf second) {
            if (first == null) return second;
            if (second == null) return first;
            return alloc.compositeDirectBuffer(2).addComponents(true, first, second);
        }

        /** Bytes of the declared Content-Length not yet sent; maintained by the framing. */
        long lengthLeft;

        @Override
        public void abort() {
            onLoop(this::abortOnLoop);
        }

        private void abortOnLoop() {
            if (done && current != this) return;
            boolean wasCurrent = current == this;
            cut();
            if (wasCurrent) {
                current = null;
                state = State.CLOSED;
                ctx.close();
            }
        }

        @Override
        public boolean writable() {
            return fewQueued() && ctx.channel().isWritable();
        }

        @Override
        protected boolean acceptsMore() {
            return disconnected() || ctx.channel().isWritable();
        }

        void writableAgain() {
            runWritableTasks();
        }
    }
}
