package dev.peregrine.http3;

import dev.peregrine.http.FieldListRequests;
import dev.peregrine.http.FieldListResponses;
import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.Refusal;
import dev.peregrine.http.RequestHead;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.http.StreamExchange;
import dev.peregrine.metrics.MetricsLayout;
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
import org.jboss.logging.Logger;

import java.net.InetSocketAddress;

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
    private static final Logger LOG = Logger.getLogger("peregrine");
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
            head = connection.requestHead(headers);
        } catch (FieldListRequests.Malformed e) {
            finished = true;
            connection.ended(this);
            channel.shutdown(Http3ErrorCode.H3_MESSAGE_ERROR.code());
            return;
        }
        Refusal refusal = connection.core().check(head);
        if (refusal != null) {
            refuse(head, refusal, System.nanoTime());
            return;
        }
        exchange = new Exchange(head);
        connection.start(exchange, head);
    }

    @Override
    protected void channelRead(ChannelHandlerContext ctx, Http3DataFrame frame) {
        connection.touched();
        if (exchange == null || finished) {
            frame.release();
            readOn();
            return;
        }
        exchange.onBody(frame.content(), frame.content().readableBytes());
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
        LOG.debugf("HTTP/3 stream from %s: %s", connection.peer(), cause.toString());
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
        if (exchange != null) exchange.checkStall(now, limit);
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

    /** A request the server answers itself, without the application; {@code startNanos}: when its head arrived. */
    private void refuse(HttpRequestHead head, Refusal refusal, long startNanos) {
        finished = true;
        ctx.write(new DefaultHttp3HeadersFrame(headers(refusal.head(), -1, null)));
        ctx.writeAndFlush(new DefaultHttp3DataFrame(Unpooled.wrappedBuffer(refusal.body()))).addListener(QuicStreamChannel.SHUTDOWN_OUTPUT);
        stopBody();
        connection.ended(this);
        connection.refused(head, refusal.status(), startNanos, refusal.body().length);
    }

    private Http3Headers headers(ResponseHead response, long completeSize, AsciiString requestId) {
        DefaultHttp3Headers headers = new DefaultHttp3Headers(false);
        headers.status(HttpResponseStatus.valueOf(response.status()).codeAsText());
        return FieldListResponses.fill(headers, response, completeSize, requestId, connection.settings().tlsHeaders());
    }


    /** The transport side of the stream's request. */
    final class Exchange extends StreamExchange<ByteBuf> {
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

        Exchange(RequestHead head) {
            super(channel, connection.peer(), connection.core(), head, MetricsLayout.HTTP_3);
        }

        @Override public String httpVersion() { return "3"; }
        @Override public InetSocketAddress localAddress() { return connection.local(); }

        @Override
        protected ByteBuf take(ByteBuf data) {
            return data; // QUIC acknowledges stream data as it is read: what is held was already asked for
        }

        @Override
        protected void discard(ByteBuf data) {
            data.release();
            readOn();
        }

        @Override
        protected void needBody() {
            ctx.read();
        }

        @Override
        protected boolean writeHead(ResponseHead response, long completeSize, boolean endStream) {
            // The stream's end is a FIN after the head: it is written by writeEnd.
            lastWrite = ctx.write(new DefaultHttp3HeadersFrame(headers(response, completeSize, requestId()))).addListener(cutOnFailure);
            return false;
        }

        @Override
        protected void writeData(ByteBuf data) {
            if (data == null) ctx.flush();
            else lastWrite = ctx.writeAndFlush(new DefaultHttp3DataFrame(data)).addListener(cutOnFailure);
        }

        @Override
        protected void writeEnd(ByteBuf last, boolean complete) {
            ChannelFuture written = last != null ? ctx.writeAndFlush(new DefaultHttp3DataFrame(last)) : lastWrite;
            if (written == null) written = ctx.newSucceededFuture();
            ctx.flush();
            // The end goes out once the last frame is written: the frame codec may still hold frames back
            // (until the client's SETTINGS arrive), and the FIN or reset would overtake them.
            written.addListener(complete ? QuicStreamChannel.SHUTDOWN_OUTPUT
                    : future -> channel.shutdownOutput(Http3ErrorCode.H3_INTERNAL_ERROR.code()));
        }

        @Override
        protected void stopBody() {
            Http3Stream.this.stopBody();
        }

        @Override
        protected void refuse(Refusal refusal) {
            Http3Stream.this.refuse(head(), refusal, startNanos());
        }

        @Override
        protected void reset(boolean refused) {
            channel.shutdown((refused ? Http3ErrorCode.H3_REQUEST_CANCELLED : Http3ErrorCode.H3_INTERNAL_ERROR).code());
        }

        @Override
        protected void released() {
            connection.ended(Http3Stream.this);
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
