package dev.peregrine.server;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.handler.codec.http2.Http2CodecUtil;

import io.netty.util.concurrent.ScheduledFuture;

import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * On a plain connection, tells an HTTP/2 client with prior knowledge (RFC 9113 3.3) from an HTTP/1.x one
 * by the first bytes: the HTTP/2 preface starts "PRI * HTTP/2.0", which no HTTP/1.1 request does. It
 * decides at the first byte that differs from that line, so an HTTP/1.1 request waits for no more
 * bytes than it sends, then leaves the pipeline, handing on what it read. A client that sent the whole
 * line meant HTTP/2: once the rest of its preface differs too, it goes to the HTTP/2 codec, which
 * answers the corrupt preface with GOAWAY PROTOCOL_ERROR (RFC 9113 3.4) rather than HTTP/1.1 with a 400.
 *
 * <p>Until it has decided, it keeps the connection's timeouts itself: a connection that sends nothing is
 * closed after --keep-alive, one that sends part of a preface and stalls after --request-timeout, as the
 * protocol handlers would.
 */
final class PrefaceDetector extends ByteToMessageDecoder {
    private static final ByteBuf PREFACE = Http2CodecUtil.connectionPrefaceBuf();
    /** "PRI * HTTP/2.0": the preface's request line, which only an HTTP/2 client sends. */
    private static final int MARKER = 14;

    private final Protocols protocols;
    private final long idleMillis;
    private final long stallMillis;
    private ScheduledFuture<?> timer;
    private boolean started;

    PrefaceDetector(Protocols protocols, long idleMillis, long stallMillis) {
        this.protocols = protocols;
        this.idleMillis = idleMillis > 0 ? idleMillis : stallMillis;
        this.stallMillis = stallMillis;
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        if (idleMillis > 0) timer = ctx.executor().schedule(() -> ctx.close(), idleMillis, TimeUnit.MILLISECONDS);
        ctx.read();
    }

    @Override
    protected void handlerRemoved0(ChannelHandlerContext ctx) {
        if (timer != null) timer.cancel(false);
    }

    @Override
    protected void decode(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) {
        if (!started && in.isReadable()) {
            started = true;
            if (timer != null) timer.cancel(false);
            timer = stallMillis > 0 ? ctx.executor().schedule(() -> ctx.close(), stallMillis, TimeUnit.MILLISECONDS) : null;
        }
        int length = Math.min(in.readableBytes(), PREFACE.readableBytes());
        int marker = Math.min(length, MARKER);
        if (!ByteBufUtil.equals(in, in.readerIndex(), PREFACE, PREFACE.readerIndex(), marker)) {
            protocols.http1(ctx.pipeline());
        } else if (length == PREFACE.readableBytes() || !ByteBufUtil.equals(in, in.readerIndex(), PREFACE, PREFACE.readerIndex(), length)) {
            protocols.http2(ctx.pipeline());
        } else {
            return; // ByteToMessageDecoder asks for more when nothing came of this read
        }
        ctx.pipeline().remove(this);
    }
}
