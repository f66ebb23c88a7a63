package dev.peregrine.http3;

import dev.peregrine.webtransport.StreamErrors;
import dev.peregrine.webtransport.Varint;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.ChannelOutputShutdownException;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.incubator.codec.quic.QuicStreamChannel;
import io.netty.incubator.codec.quic.QuicStreamResetException;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.ScheduledFuture;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A WebTransport stream. One the client opened, bidirectional (after its WEBTRANSPORT_STREAM signal) or
 * unidirectional (after its stream type 0x54), starts with the session ID, then raw bytes; one the
 * server opened belongs to its session from the start. It is read only while its session's
 * application keeps up ({@link Http3WebTransport#mayRead}). A send that waits for it to take more
 * waits for this stream alone: a stream the client does not read holds back nothing else of its session.
 */
final class WebTransportStream extends ChannelInboundHandlerAdapter {
    /** The unidirectional stream type of WebTransport (draft-ietf-webtrans-http3-02 4.1). */
    static final long UNIDIRECTIONAL_TYPE = 0x54;
    private static final long STOP_CHECK_MILLIS = 100;

    private final Http3Connection connection;
    /** Whether the server may write on it: a bidirectional stream. Final once built. */
    final boolean writable;
    /** The application sent its end: what it sends after is refused. Set on the Python thread. */
    volatile boolean outputEnding;
    /** The client stopped the stream (STOP_SENDING): what the application sends on it is dropped, and never waits. */
    volatile boolean stopped;
    /** Tasks of sends waiting for the stream to take more; I/O thread. */
    private List<Runnable> writableTasks;
    /** While sends wait: the periodic question whether the client stopped the stream ({@link #watchForStop}). */
    private ScheduledFuture<?> stopCheck;
    private ChannelHandlerContext ctx;
    private Http3WebTransport session;
    /** The session ID's bytes while they are not all there. */
    private ByteBuf header;
    private boolean inputEnded;

    /** A stream the client opened; {@code writable}: bidirectional. Its session is named by its first bytes. */
    WebTransportStream(Http3Connection connection, boolean writable) {
        this.connection = connection;
        this.writable = writable;
    }

    /** A stream the server opens for {@code session}; a unidirectional one is never read. */
    WebTransportStream(Http3Connection connection, Http3WebTransport session, boolean bidirectional) {
        this.connection = connection;
        this.session = session;
        this.writable = true;
        this.inputEnded = !bidirectional;
    }

    QuicStreamChannel channel() {
        return (QuicStreamChannel) ctx.channel();
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        this.ctx = ctx;
        ctx.channel().config().setAutoRead(false);
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        // A stream the server opened: the client's side of a bidirectional one is read from the start.
        if (session != null && !inputEnded) ctx.read();
        ctx.fireChannelActive();
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (!(msg instanceof ByteBuf in)) {
            ReferenceCountUtil.release(msg);
            return;
        }
        connection.touched();
        if (session == null) {
            header = header == null ? in : ByteToMessageDecoder.MERGE_CUMULATOR.cumulate(ctx.alloc(), header, in);
            if (!Varint.readable(header)) return;
            long sessionId = Varint.read(header);
            ByteBuf rest = header;
            header = null;
            session = connection.session(sessionId);
            if (session == null || !session.adopt(this)) {
                session = null;
                rest.release();
                channel().shutdown((int) Http3WebTransport.STREAM_REJECTED);
                return;
            }
            in = rest;
        }
        if (!in.isReadable() || inputEnded) {
            // inputEnded: the application stopped the stream; what was already on its way is dropped.
            in.release();
            return;
        }
        session.streamData(this, in, false);
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
        if (inputEnded) return;
        if (session == null || session.mayRead(this)) ctx.read();
    }

    /** The application caught up with its session's data. */
    void resume() {
        if (!inputEnded && ctx.channel().isActive()) ctx.read();
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
        if (evt instanceof ChannelInputShutdownEvent && !inputEnded) {
            inputEnded = true;
            if (session != null) session.streamData(this, Unpooled.EMPTY_BUFFER, true);
        }
        ctx.fireUserEventTriggered(evt);
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        if (takesMore()) runWritableTasks();
    }

    /** Whether a send on it need not wait: it takes more, or it never will (stopped, closed). Any thread. */
    boolean takesMore() {
        return stopped || !ctx.channel().isActive() || ctx.channel().isWritable();
    }

    /** Runs {@code task} once the stream takes more, or is stopped or gone; at once if it does. I/O thread. */
    void whenWritable(Runnable task) {
        if (takesMore()) {
            task.run();
            return;
        }
        if (writableTasks == null) writableTasks = new ArrayList<>(1);
        writableTasks.add(task);
        watchForStop();
    }

    private void runWritableTasks() {
        if (stopCheck != null) {
            stopCheck.cancel(false);
            stopCheck = null;
        }
        List<Runnable> tasks = writableTasks;
        writableTasks = null;
        if (tasks != null) tasks.forEach(Runnable::run);
    }

    /**
     * Netty's QUIC (0.0.75) tells a stream of the client's STOP_SENDING only by failing the writes queued
     * on it when it arrives. A stream whose last write filled its window exactly has none queued, stays
     * unwritable, and a send waiting on it would wait forever. So while sends wait, quiche is asked every
     * 100 ms; nothing is asked of a stream no one waits on.
     */
    private void watchForStop() {
        if (stopCheck != null) return;
        stopCheck = ctx.executor().scheduleAtFixedRate(() -> {
            if (QuicStreamErrors.stopped(channel())) markStopped();
        }, STOP_CHECK_MILLIS, STOP_CHECK_MILLIS, TimeUnit.MILLISECONDS);
    }

    private void markStopped() {
        stopped = true;
        runWritableTasks();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        // What QUIC reports on a stream is its reset by the client, as a read's failure (or the connection's failure).
        if (session != null && !inputEnded) {
            inputEnded = true;
            session.streamReset(this, cause instanceof QuicStreamResetException reset
                    ? StreamErrors.fromHttp3(reset.applicationProtocolCode()) : StreamErrors.NONE);
        }
        ctx.close();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        runWritableTasks();
        if (session != null) {
            if (!inputEnded) session.streamReset(this, StreamErrors.NONE);
            session.streamGone(this);
        }
        releaseHeader();
    }

    @Override
    public void handlerRemoved(ChannelHandlerContext ctx) {
        releaseHeader();
    }

    private void releaseHeader() {
        if (header != null) {
            header.release();
            header = null;
        }
    }

    /** Writes the application's bytes; {@code end}: then the FIN. */
    void write(ByteBuf data, boolean end) {
        if (stopped) {
            data.release();
            return;
        }
        ChannelFuture written = ctx.writeAndFlush(data);
        if (end) written.addListener(QuicStreamChannel.SHUTDOWN_OUTPUT);
        written.addListener(future -> {
            // Netty's word for the client's STOP_SENDING (the FIN the application sent is checked before).
            if (future.cause() instanceof ChannelOutputShutdownException && !stopped) markStopped();
        });
    }

    /** The application reset its side of the stream with an HTTP/3 error code. */
    void reset(long http3Code) {
        QuicStreamErrors.reset(channel(), http3Code);
    }

    /** The application stops reading the stream: STOP_SENDING, and nothing more of it is reported. */
    void stopSending(long http3Code) {
        if (inputEnded) return;
        inputEnded = true;
        QuicStreamErrors.stopSending(channel(), http3Code);
    }

    /** The session ended: the stream goes with it (WEBTRANSPORT_SESSION_GONE). */
    void sessionGone() {
        session = null;
        if (ctx.channel().isActive()) channel().shutdown((int) Http3WebTransport.SESSION_GONE);
        runWritableTasks();
    }
}
