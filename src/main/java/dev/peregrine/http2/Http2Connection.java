package dev.peregrine.http2;

import dev.peregrine.http.Application;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.HttpSettings;
import dev.peregrine.http.LoopExchange;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.http.StatusReasons;
import dev.peregrine.http.TlsResponseHeaders;
import dev.peregrine.http1.AddedHeaders;
import dev.peregrine.http1.RequestHead;
import dev.peregrine.ops.metrics.MetricsLayout;
import dev.peregrine.ops.metrics.RequestMetrics;
import dev.peregrine.proxy.ForwardedHeaders;
import dev.peregrine.server.Connections;
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
import io.netty.handler.codec.http2.Http2HeadersFrame;
import io.netty.handler.codec.http2.Http2ResetFrame;
import io.netty.handler.codec.http2.Http2Stream;
import io.netty.util.AsciiString;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.collection.IntObjectHashMap;
import io.netty.util.concurrent.ScheduledFuture;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

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
 */
final class Http2Connection extends ChannelDuplexHandler {
    private static final org.jboss.logging.Logger LOG = org.jboss.logging.Logger.getLogger("peregrine");

    private final HttpSettings settings;
    private final Application application;
    private final Connections connections;
    private final RequestMetrics metrics;
    private final IntObjectHashMap<Exchange> streams = new IntObjectHashMap<>();
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

    Http2Connection(HttpSettings settings, Application application, Connections connections) {
        this.settings = settings;
        this.application = application;
        this.connections = connections;
        this.metrics = connections.metrics();
        this.spareBytes = AddedHeaders.spareBytes(settings);
        this.spareHeaders = AddedHeaders.spareHeaders(settings);
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
        ctx.fireChannelWritabilityChanged();
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
        if (evt instanceof Http2FrameStreamEvent event && event.type() == Http2FrameStreamEvent.Type.Writability) {
            Exchange exchange = streams.get(event.stream().id());
            if (exchange != null) exchange.windowChanged();
            return;
        }
        if (evt == Connections.DrainEvent.INSTANCE) {
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
            Exchange exchange = streams.remove(streamError.stream().id());
            if (exchange != null) exchange.cut();
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
        ctx.fireChannelInactive();
    }

    private void onHeaders(Http2HeadersFrame frame) {
        Http2FrameStream stream = frame.stream();
        Exchange existing = streams.get(stream.id());
        if (existing != null) {
            existing.onTrailers(frame.isEndStream()); // trailers: the application is not shown them
            return;
        }
        RequestHead head;
        try {
            head = Http2RequestHeads.build(frame.headers(), frame.isEndStream(), spareBytes, spareHeaders);
        } catch (Http2RequestHeads.Malformed e) {
            ctx.write(new DefaultHttp2ResetFrame(Http2Error.PROTOCOL_ERROR).stream(stream));
            return;
        }
        if (head.contentLength() > settings.maxBody()) {
            refuse(stream, head, 413, "request body larger than --max-body");
            return;
        }
        Exchange exchange = new Exchange(stream, head, frame.isEndStream());
        if (peerIsTrustedProxy) {
            ForwardedHeaders.Origin origin = ForwardedHeaders.resolve(head, settings.trustedProxies());
            if (origin != null) exchange.forwardedAs(origin.client(), origin.scheme());
        }
        if (settings.requestId()) exchange.requestId = requestIdOf(head, AddedHeaders.requestId(head));
        if (settings.requestStartHeader()) AddedHeaders.requestStart(head, epochMicros(), peerIsTrustedProxy);
        streams.put(stream.id(), exchange);
        exchange.windowChanged(); // a client may open with a window of 0
        connections.requestStarted();
        application.dispatch(exchange);
    }

    private static AsciiString requestIdOf(RequestHead head, int header) {
        return new AsciiString(head.bytes(), head.valueStart(header), head.valueLength(header), true);
    }

    private void onData(Http2DataFrame frame) {
        Exchange exchange = streams.get(frame.stream().id());
        if (exchange == null) {
            // A stream already answered or reset: its bytes go back to the windows at once.
            consume(frame.stream(), frame.initialFlowControlledBytes());
            frame.release();
            return;
        }
        exchange.onData(frame);
    }

    /** Returns {@code bytes} of a stream's DATA to the client's windows (a WINDOW_UPDATE when enough has been consumed). */
    private void consume(Http2FrameStream stream, int bytes) {
        if (bytes > 0 && codec.connection().stream(stream.id()) != null) {
            ctx.write(new DefaultHttp2WindowUpdateFrame(bytes).stream(stream));
        }
    }

    /** A request the server answers itself, without the application. */
    private void refuse(Http2FrameStream stream, HttpRequestHead head, int status, String reason) {
        byte[] text = (StatusReasons.reason(status) + ": " + reason + "\n").getBytes(StandardCharsets.UTF_8);
        ResponseHead response = new ResponseHead(status);
        response.add("content-type", "text/plain; charset=utf-8");
        response.add("content-length", Integer.toString(text.length));
        ctx.write(new DefaultHttp2HeadersFrame(Http2Responses.headers(response, -1, null, tlsHeaders), false).stream(stream));
        ChannelFuture last = ctx.write(new DefaultHttp2DataFrame(Unpooled.wrappedBuffer(text), true).stream(stream));
        stopBody(stream, last);
        ctx.flush();
        metrics.requestFinished(head.method(), MetricsLayout.HTTP_2, status, System.nanoTime(), 0, text.length);
    }

    /**
     * After a complete response, tells a client still sending a body nobody will read to stop
     * (RST_STREAM NO_ERROR, RFC 9113 8.1). Only once the response's last frame is written: DATA waits in
     * the flow controller, and a reset ahead of it would make the client drop the response.
     */
    private void stopBody(Http2FrameStream stream, ChannelFuture lastFrame) {
        lastFrame.addListener(written -> {
            Http2Stream state = codec.connection().stream(stream.id());
            if (written.isSuccess() && state != null && state.state() != Http2Stream.State.CLOSED) {
                ctx.writeAndFlush(new DefaultHttp2ResetFrame(Http2Error.NO_ERROR).stream(stream));
            }
        });
    }

    private long epochMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000 + now.getNano() / 1000;
    }

    // ---- timeouts: a connection without streams is closed (with GOAWAY) after --keep-alive; a stream whose
    // body stalls while the application waits for it is cut after --request-timeout. One timer per connection.

    private void armTimer() {
        long keepAlive = settings.keepAliveMillis() > 0 ? settings.keepAliveMillis() : Long.MAX_VALUE;
        long request = settings.requestTimeoutMillis() > 0 ? settings.requestTimeoutMillis() : Long.MAX_VALUE;
        long tick = Math.min(keepAlive, request);
        timer = ctx.executor().schedule(this::checkTimeouts, tick == Long.MAX_VALUE ? 1000 : Math.max(10, tick / 2), TimeUnit.MILLISECONDS);
    }

    private void checkTimeouts() {
        if (closed) return;
        long now = System.nanoTime();
        if (settings.keepAliveMillis() > 0 && streams.isEmpty() && now - lastActivity >= TimeUnit.MILLISECONDS.toNanos(settings.keepAliveMillis())) {
            ctx.close();
            return;
        }
        if (settings.requestTimeoutMillis() > 0 && !streams.isEmpty()) {
            long limit = TimeUnit.MILLISECONDS.toNanos(settings.requestTimeoutMillis());
            for (Exchange exchange : new ArrayList<>(streams.values())) {
                if (exchange.waitingForClient() && now - exchange.lastData >= limit) exchange.timedOut();
            }
            ctx.flush();
        }
        armTimer();
    }

    /** One stream: the transport side of one request. */
    final class Exchange extends LoopExchange {
        private final Http2FrameStream stream;
        private final RequestHead head;
        private final long startNanos = System.nanoTime();
        private final ArrayDeque<Http2DataFrame> pending = new ArrayDeque<>(2);
        private boolean demanded;
        private boolean requestEnded;
        private boolean endDelivered;
        private long bodyReceived;
        private volatile boolean windowOpen = true;
        private boolean done;
        private boolean headSent;
        private boolean bodyless;
        private int status;
        private long bytesSent;
        /** Bytes of the declared content-length not yet sent, or -1. */
        private long lengthLeft = -1;
        private AsciiString requestId;
        /** When the client last sent body (or the stream began). */
        private long lastData = System.nanoTime();

        Exchange(Http2FrameStream stream, RequestHead head, boolean requestEnded) {
            super(ctx.channel(), peer, settings.scheme());
            this.stream = stream;
            this.head = head;
            this.requestEnded = requestEnded;
        }

        @Override public HttpRequestHead head() { return head; }
        @Override public String httpVersion() { return "2"; }

        @Override
        public void demand() {
            onLoop(() -> {
                if (disconnected()) return;
                demanded = true;
                pump();
                ctx.flush();
            });
        }

        void onData(Http2DataFrame frame) {
            lastData = System.nanoTime();
            if (frame.isEndStream()) requestEnded = true;
            bodyReceived += frame.content().readableBytes();
            if (bodyReceived > settings.maxBody()) {
                consume(stream, frame.initialFlowControlledBytes());
                frame.release();
                bodyTooLarge();
                return;
            }
            if (done) {
                consume(stream, frame.initialFlowControlledBytes());
                frame.release();
                return;
            }
            pending.add(frame);
            pump();
        }

        void onTrailers(boolean endStream) {
            if (endStream) {
                requestEnded = true;
                pump();
            }
        }

        /** Hands the application one piece of body per demand, acknowledging it to the client as it goes. */
        private void pump() {
            while (demanded && receiver() != null && !disconnected()) {
                Http2DataFrame frame = pending.poll();
                if (frame != null) {
                    consume(stream, frame.initialFlowControlledBytes());
                    ByteBuf data = frame.content();
                    if (!data.isReadable()) {
                        data.release();
                        continue;
                    }
                    demanded = false;
                    receiver().onBody(data);
                } else if (requestEnded) {
                    if (!endDelivered) {
                        endDelivered = true;
                        demanded = false;
                        receiver().onBodyEnd();
                    }
                    return;
                } else {
                    return;
                }
            }
        }

        boolean waitingForClient() {
            return demanded && !requestEnded && pending.isEmpty();
        }

        /** The body stalled. */
        void timedOut() {
            refuseBody(408, "request timed out");
        }

        private void bodyTooLarge() {
            refuseBody(413, "request body larger than --max-body");
        }

        /** The body broke a limit: the server answers {@code status} if nothing was answered yet, and the stream ends either way. */
        private void refuseBody(int status, String reason) {
            streams.remove(stream.id());
            boolean answered = headSent;
            cut();
            if (answered) ctx.write(new DefaultHttp2ResetFrame(Http2Error.CANCEL).stream(stream));
            else refuse(stream, head, status, reason);
            ctx.flush();
        }

        @Override
        protected void write(ResponseHead responseHead, ByteBuf body, boolean last, int size) {
            if (disconnected() || done) {
                if (body != null) body.release();
                return;
            }
            if (responseHead != null) {
                status = responseHead.status();
                headSent = true;
                bodyless = head.method().equals("HEAD") || status < 200 || status == 204 || status == 304;
                lengthLeft = responseHead.contentLength();
                boolean endNow = last && (bodyless || (size == 0 && lengthLeft <= 0));
                ChannelFuture written = ctx.write(new DefaultHttp2HeadersFrame(
                        Http2Responses.headers(responseHead, last && !bodyless ? size : -1, requestId, tlsHeaders), endNow).stream(stream));
                if (endNow) {
                    if (body != null) body.release();
                    finish(written);
                    return;
                }
            }
            if (bodyless || body == null || size == 0) {
                if (body != null) body.release();
                if (last) end(Unpooled.EMPTY_BUFFER);
                else ctx.flush();
                return;
            }
            if (lengthLeft >= 0) {
                if (size > lengthLeft) body.writerIndex(body.readerIndex() + (int) lengthLeft); // never more than declared
                lengthLeft -= body.readableBytes();
            }
            bytesSent += body.readableBytes();
            if (last) {
                end(body);
            } else {
                ctx.writeAndFlush(new DefaultHttp2DataFrame(body, false).stream(stream));
            }
        }

        /** The last piece: ends the stream, or resets it when fewer bytes came than the declared content-length. */
        private void end(ByteBuf last) {
            boolean complete = lengthLeft <= 0 || bodyless;
            ChannelFuture written = ctx.write(new DefaultHttp2DataFrame(last, complete).stream(stream));
            if (!complete) {
                // A reset goes out ahead of DATA the flow controller still holds: the client would lose what did arrive.
                written.addListener(done -> {
                    if (codec.connection().stream(stream.id()) != null) {
                        ctx.writeAndFlush(new DefaultHttp2ResetFrame(Http2Error.INTERNAL_ERROR).stream(stream));
                    }
                });
                requestEnded = true; // the reset ends the request side too
            }
            finish(written);
        }

        /** The response is complete: count and log it, and tell the client to stop sending a body nobody reads. */
        private void finish(ChannelFuture lastFrame) {
            done = true;
            streams.remove(stream.id());
            connections.requestEnded();
            metrics.requestFinished(head.method(), MetricsLayout.HTTP_2, status, startNanos, bodyReceived, bytesSent);
            if (settings.accessLog() != null) settings.accessLog().log(this, status, bytesSent, startNanos);
            if (!requestEnded) stopBody(stream, lastFrame);
            releasePending();
            ctx.flush();
        }

        private void releasePending() {
            Http2DataFrame frame;
            while ((frame = pending.poll()) != null) {
                consume(stream, frame.initialFlowControlledBytes());
                frame.release();
            }
        }

        /** The stream was reset or the connection is gone: nothing more is written. */
        @Override
        protected void onCut() {
            if (!done) {
                done = true;
                connections.requestEnded();
            }
            Http2DataFrame frame;
            while ((frame = pending.poll()) != null) frame.release();
        }

        @Override
        public void abort() {
            onLoop(() -> {
                if (disconnected()) return;
                boolean answering = !done;
                streams.remove(stream.id());
                cut();
                if (answering && !closed) ctx.writeAndFlush(new DefaultHttp2ResetFrame(Http2Error.INTERNAL_ERROR).stream(stream));
            });
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
