package dev.peregrine.http2;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.AbstractChannel;
import io.netty.channel.ChannelConfig;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelMetadata;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.ChannelPromise;
import io.netty.channel.DefaultChannelConfig;
import io.netty.channel.EventLoop;
import io.netty.handler.codec.http2.DefaultHttp2DataFrame;
import io.netty.handler.codec.http2.DefaultHttp2ResetFrame;
import io.netty.handler.codec.http2.Http2DataFrame;
import io.netty.handler.codec.http2.Http2Error;
import io.netty.handler.codec.http2.Http2FrameCodec;
import io.netty.handler.codec.http2.Http2FrameStream;
import io.netty.handler.codec.http2.Http2Stream;

import java.net.SocketAddress;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;

/**
 * The HTTP/2 stream of one WebSocket (RFC 8441) as a channel of its own, so that the WebSocket side runs
 * the same pipeline (Netty's frame codec, deflate, UTF-8 checks, reassembly) as over HTTP/1.1: the
 * stream's DATA arrives as bytes, and bytes written go out as DATA on the stream.
 *
 * <p>Written by hand because Netty's {@code Http2MultiplexHandler}, which gives streams channels, gives
 * one to every stream and its visitors assume each has one: making every request a channel would cost
 * the request path for what only WebSocket streams need.
 *
 * <p>Flow control follows reading: a DATA frame's bytes go back to the client's window when the
 * pipeline is handed them, and the pipeline is handed them only when it asks ({@code read()}, with
 * auto-read off), so a WebSocket the application does not read stops its client after one window.
 * Writability follows the stream's window. Everything runs on the connection's event loop.
 */
final class WebSocketStreamChannel extends AbstractChannel {
    private static final ChannelMetadata METADATA = new ChannelMetadata(false);
    /** After our END_STREAM, how long the client has to end its side before the stream is reset. */
    private static final long END_GRACE_MILLIS = 5000;

    private final ChannelHandlerContext connection;
    private final Http2FrameStream stream;
    private final Http2FrameCodec codec;
    private final Http2Connection owner;
    private final ChannelConfig config = new DefaultChannelConfig(this);
    /** DATA frames not yet handed to the pipeline; a null entry is the client's END_STREAM. */
    private final ArrayDeque<Http2DataFrame> inbound = new ArrayDeque<>(4);
    private boolean open = true;
    private boolean readRequested;
    /** The 200 went out: the stream carries the WebSocket. */
    private boolean switched;
    private boolean endSent;
    /** The stream is over (reset, or closed on both sides) or its connection is: nothing more may be written on it. */
    private boolean streamGone;

    WebSocketStreamChannel(ChannelHandlerContext connection, Http2FrameStream stream, Http2FrameCodec codec, Http2Connection owner) {
        super(connection.channel());
        this.connection = connection;
        this.stream = stream;
        this.codec = codec;
        this.owner = owner;
        config.setAutoRead(false);
    }

    int streamId() { return stream.id(); }

    // ---- from the connection ----

    void onData(Http2DataFrame frame) {
        if (!open) {
            owner.consume(stream, frame.initialFlowControlledBytes());
            frame.release();
            return;
        }
        inbound.add(frame);
        if (frame.isEndStream()) inbound.add(END);
        if (readRequested) deliver();
    }

    /** The client ended its side without DATA (a HEADERS frame with END_STREAM). */
    void onRemoteEnd() {
        inbound.add(END);
        if (readRequested) deliver();
    }

    /** The stream was reset, or the connection is gone: the WebSocket is lost. */
    void onStreamGone() {
        streamGone = true;
        if (open) close();
    }

    /** The stream's window or the connection's writability changed. */
    void onWritabilityChanged() {
        pipeline().fireChannelWritabilityChanged();
    }

    /** The server is draining: the WebSocket side sends its close (1001). */
    void onEvent(Object event) {
        if (open) pipeline().fireUserEventTriggered(event);
    }

    // ---- reading ----

    private void deliver() {
        readRequested = false;
        boolean ended = false;
        while (!inbound.isEmpty() && open) {
            Http2DataFrame frame = inbound.poll();
            if (frame == END) {
                ended = true;
                break;
            }
            owner.consume(stream, frame.initialFlowControlledBytes());
            ByteBuf content = frame.content();
            if (content.isReadable()) pipeline().fireChannelRead(content);
            else content.release();
        }
        connection.flush();
        if (open) pipeline().fireChannelReadComplete();
        // The client ended its side: after a close handshake that is the end; before it, the WebSocket is lost.
        if (ended && open) close();
    }

    @Override
    protected void doBeginRead() {
        if (inbound.isEmpty()) readRequested = true;
        else eventLoop().execute(this::deliverIfOpen); // not within read(): a handler calling read() from channelReadComplete would recurse
    }

    private void deliverIfOpen() {
        if (open) deliver();
    }

    // ---- writing ----

    @Override
    protected void doWrite(ChannelOutboundBuffer in) {
        boolean wrote = false;
        for (Object msg; (msg = in.current()) != null; ) {
            if (streamGone || endSent || !(msg instanceof ByteBuf buf)) {
                in.remove(new IllegalStateException("the WebSocket's stream is closed"));
                continue;
            }
            connection.write(new DefaultHttp2DataFrame(buf.retain(), false).stream(stream));
            in.remove();
            wrote = true;
        }
        if (wrote) connection.flush();
    }

    @Override
    public boolean isWritable() {
        if (!open || streamGone || !connection.channel().isWritable()) return false;
        Http2Stream state = codec.connection().stream(stream.id());
        return state != null && codec.connection().remote().flowController().isWritable(state);
    }

    @Override
    public long bytesBeforeUnwritable() {
        return isWritable() ? 1 : 0;
    }

    // ---- closing: END_STREAM, as RFC 8441 closes a WebSocket's stream ----

    @Override
    protected void doClose() {
        open = false;
        for (Http2DataFrame frame; (frame = inbound.poll()) != null; ) {
            if (frame == END) continue;
            owner.consume(stream, frame.initialFlowControlledBytes());
            frame.release();
        }
        owner.webSocketClosed(this);
        if (streamGone) return;
        if (!switched && !endSent) {
            // Dropped before any answer: a stream cannot end without its HEADERS.
            connection.writeAndFlush(new DefaultHttp2ResetFrame(Http2Error.CANCEL).stream(stream));
            return;
        }
        if (!endSent) {
            endSent = true;
            connection.writeAndFlush(new DefaultHttp2DataFrame(Unpooled.EMPTY_BUFFER, true).stream(stream));
        }
        // A client that keeps its side open would hold one of its concurrent streams forever.
        connection.executor().schedule(() -> {
            Http2Stream state = codec.connection().stream(stream.id());
            if (state != null && state.state() != Http2Stream.State.CLOSED) {
                connection.writeAndFlush(new DefaultHttp2ResetFrame(Http2Error.CANCEL).stream(stream));
            }
        }, END_GRACE_MILLIS, TimeUnit.MILLISECONDS);
    }

    /** The 200 is written. */
    void switched() {
        switched = true;
    }

    /** After an HTTP answer instead of the switch (a denial): the answer carried END_STREAM already. */
    void answeredWithoutSwitch() {
        endSent = true;
    }

    // ---- the rest of a channel ----

    @Override public ChannelConfig config() { return config; }
    @Override public boolean isOpen() { return open; }
    @Override public boolean isActive() { return open; }
    @Override public ChannelMetadata metadata() { return METADATA; }
    @Override protected boolean isCompatible(EventLoop loop) { return loop == connection.channel().eventLoop(); }
    @Override protected SocketAddress localAddress0() { return connection.channel().localAddress(); }
    @Override protected SocketAddress remoteAddress0() { return connection.channel().remoteAddress(); }
    @Override protected void doBind(SocketAddress localAddress) { throw new UnsupportedOperationException(); }
    @Override protected void doDisconnect() { doClose(); }

    @Override
    protected AbstractUnsafe newUnsafe() {
        return new AbstractUnsafe() {
            @Override
            public void connect(SocketAddress remote, SocketAddress local, ChannelPromise promise) {
                promise.setFailure(new UnsupportedOperationException("a stream channel is not connected"));
            }
        };
    }

    private static final Http2DataFrame END = new DefaultHttp2DataFrame(Unpooled.EMPTY_BUFFER, true);
}
