package dev.peregrine.server;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.handler.codec.http2.Http2CodecUtil;

import java.util.List;

/**
 * On a plain connection, tells an HTTP/2 client with prior knowledge (RFC 9113 3.3) from an HTTP/1.x one
 * by the first bytes: the HTTP/2 preface starts "PRI * HTTP/2.0", which no HTTP/1.1 request does. It
 * decides at the first byte that differs from the preface, so an HTTP/1.1 request waits for no more
 * bytes than it sends, then leaves the pipeline, handing on what it read.
 */
final class PrefaceDetector extends ByteToMessageDecoder {
    private static final ByteBuf PREFACE = Http2CodecUtil.connectionPrefaceBuf();

    private final Protocols protocols;

    PrefaceDetector(Protocols protocols) {
        this.protocols = protocols;
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        ctx.read();
    }

    @Override
    protected void decode(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) {
        int length = Math.min(in.readableBytes(), PREFACE.readableBytes());
        if (!ByteBufUtil.equals(in, in.readerIndex(), PREFACE, PREFACE.readerIndex(), length)) {
            protocols.http1(ctx.pipeline());
        } else if (length == PREFACE.readableBytes()) {
            protocols.http2(ctx.pipeline());
        } else {
            return; // ByteToMessageDecoder asks for more when nothing came of this read
        }
        ctx.pipeline().remove(this);
    }
}
