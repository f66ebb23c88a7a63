package dev.peregrine.http3;

import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.LoopExchange;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.http.StatusReasons;
import dev.peregrine.http1.AddedHeaders;
import dev.peregrine.http1.RequestHead;
import dev.peregrine.http2.Http2RequestHeads;
import dev.peregrine.http2.Http2Responses;
import dev.peregrine.ops.metrics.MetricsLayout;
import dev.peregrine.proxy.ForwardedHeaders;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.incubator.codec.http3.DefaultHttp3DataFrame;
import io.netty.incubator.codec.http3.DefaultHttp3Headers;
import io.netty.incubator.codec.http3.DefaultHttp3HeadersFrame;
import io.netty.incubator.codec.http3.Http3DataFrame;
import io.netty.incubator.codec.http3.Http3ErrorCode;
import io.netty.incubator.codec.http3.Http3Exception;
import io.netty.incubator.codec.http3.Http3Headers;
import io.netty.incubator.codec.http3.Http3HeadersFrame;
import io.netty.incubator.codec.http3.Http3RequestStreamInboundHandler;
import io.netty.incubator.codec.quic.QuicException;
import io.netty.incubator.codec.quic.QuicStreamChannel;
import io.netty.util.AsciiString;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayDeque;

/**
 * One HTTP/3 request stream, after Netty's frame codec and its checks of frame order: one call of the
 * application, through the same exchange interface as HTTP/1.1 and HTTP/2.
 *
 * <p>Each QUIC stream is a channel of its own, so flow control is the channel's: the stream is read
 * only as far as the application asked for body, and QUIC's stream window stops the client meanwhile;
 * the response is written while the stream's send window and buffer take it, and above that the
 * application is told to wait ({@link #writable}).
 */
final class Http3Stream extends Http3RequestStreamInboundHandler {
    private static final org.jboss.logging.Logger LOG = org.jboss.logging.Logger.getLogger("peregrine");
    private final Http3Connection connection;
    private ChannelHandlerContext ctx;
    private QuicStreamChannel channel;
    private Exchange exchange;
    /** Nothing more is read: the request was refused, or its exchange is over. */
    private boolean finished;
    /** The client's FIN was read: the request side is complete. */
    private boolean inputEnded;

    Http3Stream(Http3Connection connection) {
        this.connection = connection;
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        this.ctx = ctx;
        this.channel = (QuicStreamChannel) ctx.channel();
        // The body is read as the application asks for it.
        channel.config().setAutoRead(false);
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        // The first read once the stream's initializer has left the pipeline: what the frame codec throws
        // for a malformed head then comes to this handler.
        ctx.read();
        ctx.fireChannelActive();
    }

    @Override
    protected void channelRead(ChannelHandlerContext ctx, Http3HeadersFrame frame) {
        connection.touched();
        if (exchange != null) return; // trailers: the application is not shown them, and the FIN follows
        if (finished) return;
        if (!connection.opened(this, channel)) {
            finished = true;
            channel.shutdown(Http3ErrorCode.H3_REQUEST_REJECTED.code());
            return;
        }
        Http3Headers headers = frame.headers();
        RequestHead head;
        try {
            head = Http2RequestHeads.build(headers, headers.method(), headers.scheme(), headers.path(), headers.authority(), false,
                    connection.spareBytes, connection.spareHeaders);
        } catch (Http2RequestHeads.Malformed e) {
            finished = true;
            connection.ended(this);
            channel.shutdown(Http3ErrorCode.H3_MESSAGE_ERROR.code());
            return;
        }
        if (head.contentLength() > connection.settings.maxBody()) {
            refuse(head, 413, "request body larger than --max-body");
            return;
        }
        exchange = new Exchange(head);
        if (connection.peerIsTrustedProxy) {
            ForwardedHeaders.Origin origin = ForwardedHeaders.resolve(head, connection.settings.trustedProxies());
            if (origin != null) exchange.forwardedAs(origin.client(), origin.scheme());
        }
        if (connection.settings.requestId()) {
            int header = AddedHeaders.requestId(head);
            exchange.requestId = new AsciiString(head.bytes(), head.valueStart(header), head.valueLength(header), true);
        }
        if (connection.settings.requestStartHeader()) AddedHeaders.requestStart(head, epochMicros(), connection.peerIsTrustedProxy);
        connection.connections.requestStarted();
        connection.application.dispatch(exchange);
    }

    @Override
    protected void channelRead(ChannelHandlerContext ctx, Http3DataFrame frame) {
        connection.touched();
        if (exchange == null || finished) {
            frame.release();
            readOn();
            return;
        }
        exchange.onData(frame.content());
    }

    @Override
    protected void channelInputClosed(ChannelHandlerContext ctx) {
        inputEnded = true;
        if (exchange != null) {
            exchange.onRequestEnd();
        } else if (!finished) {
            // A request stream that ends without a head (RFC 9114 4.1.2).
            finished = true;
            channel.shutdown(Http3ErrorCode.H3_REQUEST_INCOMPLETE.code());
        }
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
        // A read that brought nothing for the application (trailers, unknown frames, part of the head) reads on.
        if (!finished && (exchange == null || exchange.waitingForClient())) ctx.read();
        ctx.flush();
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        if (exchange != null && channel.isWritable()) exchange.writableAgain();
        ctx.fireChannelWritabilityChanged();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        // The stream is gone (reset by the client, or the connection closed) before the response ended.
        if (exchange != null) exchange.cut();
        connection.ended(this);
        ctx.fireChannelInactive();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        if (exchange != null) exchange.cut();
        LOG.debugf("HTTP/3 stream from %s: %s", connection.peer, cause.toString());
        // Netty has closed the connection for its protocol errors (its own handler would log each at ERROR,
        // for any client to trigger); anything else, such as fields its QPACK decoder chokes on, resets the stream.
        if (cause instanceof Http3Exception || cause instanceof QuicException) return;
        if (!finished) {
            finished = true;
            connection.ended(this);
        }
        if (channel.isActive()) channel.shutdown(Http3ErrorCode.H3_MESSAGE_ERROR.code());
    }

    void connectionClosed() {
        if (exchange != null) exchange.cut();
    }

    /** Cuts a request whose body stalled for --request-timeout while the application waits for it. */
    void checkStall(long now, long limit) {
        if (exchange != null && exchange.waitingForClient() && now - exchange.lastData >= limit) {
            exchange.refuseBody(408, "request timed out");
        }
    }

    /** Reads on when nobody waits for what is read (a refused or finished request's remaining body). */
    private void readOn() {
        if (!channel.config().isAutoRead()) channel.config().setAutoRead(true);
    }

    /**
     * After a complete response, tells a client still sending a body nobody will read to stop
     * (STOP_SENDING H3_NO_ERROR, RFC 9114 4.1: the client keeps the response).
     */
    private void stopBody() {
        if (!inputEnded) channel.shutdownInput(Http3ErrorCode.H3_NO_ERROR.code());
    }

    /** A request the server answers itself, without the application. */
    private void refuse(HttpRequestHead head, int status, String reason) {
        finished = true;
        byte[] text = (StatusReasons.reason(status) + ": " + reason + "\n").getBytes(StandardCharsets.UTF_8);
        ResponseHead response = new ResponseHead(status);
        response.add("content-type", "text/plain; charset=utf-8");
        response.add("content-length", Integer.toString(text.length));
        ctx.write(new DefaultHttp3HeadersFrame(headers(response, -1, null)));
        ctx.writeAndFlush(new DefaultHttp3DataFrame(Unpooled.wrappedBuffer(text))).addListener(QuicStreamChannel.SHUTDOWN_OUTPUT);
        stopBody();
        connection.ended(this);
        connection.connections.metrics().requestFinished(head.method(), MetricsLayout.HTTP_3, status, System.nanoTime(), 0, text.length);
    }

    private Http3Headers headers(ResponseHead response, long completeSize, AsciiString requestId) {
        DefaultHttp3Headers headers = new DefaultHttp3Headers(false);
        headers.status(HttpResponseStatus.valueOf(response.status()).codeAsText());
        return Http2Responses.fill(headers, response, completeSize, requestId, connection.settings.tlsHeaders());
    }

    private static long epochMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000 + now.getNano() / 1000;
    }

    /** The transport side of the stream's request. */
    final class Exchange extends LoopExchange {
        private final RequestHead head;
        private final long startNanos = System.nanoTime();
        private final ArrayDeque<ByteBuf> pending = new ArrayDeque<>(2);
        private boolean demanded;
        private boolean requestEnded;
        private boolean endDelivered;
        private long bodyReceived;
        private boolean done;
        private boolean headSent;
        private boolean bodyless;
        private int status;
        private long bytesSent;
        /** Bytes of the declared content-length not yet sent, or -1. */
        private long lengthLeft = -1;
        private AsciiString requestId;
        /**
         * A write the stream refused: the client stopped it (STOP_SENDING, how browsers cancel a request
         * whose body they finished) or reset it. QUIC tells of STOP_SENDING only to a write, so this is
         * where the application learns that its client is gone.
         */
        private final ChannelFutureListener cutOnFailure = future -> {
            if (!future.isSuccess() && !disconnected()) {
                cut();
                channel.shutdown(Http3ErrorCode.H3_REQUEST_CANCELLED.code());
            }
        };
        /** The response's last frame handed to the codec so far: the stream ends behind it. */
        private ChannelFuture lastWrite;
        /** When the client last sent body (or the stream began). */
        private long lastData = System.nanoTime();

        Exchange(RequestHead head) {
            super(channel, connection.peer, connection.settings.scheme());
            this.head = head;
        }

        @Override public HttpRequestHead head() { return head; }
        @Override public String httpVersion() { return "3"; }
        @Override public InetSocketAddress localAddress() { return connection.local; }

        @Override
        public void demand() {
            onLoop(() -> {
                if (disconnected()) return;
                demanded = true;
                pump();
            });
        }

        void onData(ByteBuf data) {
            lastData = System.nanoTime();
            bodyReceived += data.readableBytes();
            if (bodyReceived > connection.settings.maxBody()) {
                data.release();
                refuseBody(413, "request body larger than --max-body");
                return;
            }
            if (done) {
                data.release();
                readOn();
                return;
            }
            pending.add(data);
            pump();
        }

        void onRequestEnd() {
            requestEnded = true;
            if (!done) pump();
        }

        /** Hands the application one piece of body per demand; reads the stream when it has none to give. */
        private void pump() {
            while (demanded && receiver() != null && !disconnected()) {
                ByteBuf data = pending.poll();
                if (data != null) {
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
                    ctx.read();
                    return;
                }
            }
        }

        boolean waitingForClient() {
            return demanded && !requestEnded && pending.isEmpty() && !done;
        }

        /** The body broke a limit: the server answers {@code status} if nothing was answered yet, and the stream ends either way. */
        void refuseBody(int status, String reason) {
            boolean answered = headSent;
            cut();
            if (answered) channel.shutdown(Http3ErrorCode.H3_REQUEST_CANCELLED.code());
            else refuse(head, status, reason);
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
                lastWrite = ctx.write(new DefaultHttp3HeadersFrame(headers(responseHead, last && !bodyless ? size : -1, requestId)))
                        .addListener(cutOnFailure);
            }
            if (bodyless || body == null || size == 0) {
                if (body != null) body.release();
                if (last) end(null);
                else ctx.flush();
                return;
            }
            if (lengthLeft >= 0) {
                if (size > lengthLeft) body.writerIndex(body.readerIndex() + (int) lengthLeft); // never more than declared
                lengthLeft -= body.readableBytes();
            }
            bytesSent += body.readableBytes();
            if (last) end(body);
            else lastWrite = ctx.writeAndFlush(new DefaultHttp3DataFrame(body)).addListener(cutOnFailure);
        }

        /** The last piece: ends the stream (FIN), or resets it when fewer bytes came than the declared content-length. */
        private void end(ByteBuf last) {
            ChannelFuture written = last != null ? ctx.writeAndFlush(new DefaultHttp3DataFrame(last)) : lastWrite;
            if (written == null) written = ctx.newSucceededFuture();
            ctx.flush();
            // The end goes out once the last frame is written: the frame codec may still hold frames back
            // (until the client's SETTINGS arrive), and the FIN or reset would overtake them.
            boolean complete = lengthLeft <= 0 || bodyless;
            written.addListener(complete ? QuicStreamChannel.SHUTDOWN_OUTPUT
                    : future -> channel.shutdownOutput(Http3ErrorCode.H3_INTERNAL_ERROR.code()));
            done = true;
            connection.connections.requestEnded();
            connection.connections.metrics().requestFinished(head.method(), MetricsLayout.HTTP_3, status, startNanos, bodyReceived, bytesSent);
            if (connection.settings.accessLog() != null) connection.settings.accessLog().log(this, status, bytesSent, startNanos);
            ByteBuf data;
            while ((data = pending.poll()) != null) data.release();
            if (!requestEnded) stopBody();
            connection.ended(Http3Stream.this);
        }

        /** The stream was reset or the connection is gone: nothing more is written. */
        @Override
        protected void onCut() {
            if (!done) {
                done = true;
                connection.connections.requestEnded();
            }
            ByteBuf data;
            while ((data = pending.poll()) != null) data.release();
        }

        @Override
        public void abort() {
            onLoop(() -> {
                if (disconnected()) return;
                boolean answering = !done;
                cut();
                if (answering) channel.shutdown(Http3ErrorCode.H3_INTERNAL_ERROR.code());
            });
        }

        @Override
        public boolean writable() {
            return fewQueued() && channel.isWritable();
        }

        void writableAgain() {
            runWritableTasks();
        }

        @Override
        protected boolean acceptsMore() {
            return disconnected() || channel.isWritable();
        }
    }
}
