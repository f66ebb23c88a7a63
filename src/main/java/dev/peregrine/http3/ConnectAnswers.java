package dev.peregrine.http3;

import dev.peregrine.http.FieldListResponses;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.webtransport.Varint;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.incubator.codec.http3.DefaultHttp3Headers;

/**
 * Answers to an extended CONNECT (a WebSocket's, a WebTransport session's), written by hand: the HTTP/3
 * codec has left those streams ({@link ExtendedConnect}), so their HEADERS and DATA frames are framed here.
 */
final class ConnectAnswers {
    private static final long DATA = 0x00;

    private ConnectAnswers() {}

    /** A complete response (its body in one DATA frame); the caller ends the stream once the returned write is done. */
    static ChannelFuture write(ChannelHandlerContext ctx, Http3Connection connection, ResponseHead response, ByteBuf body) {
        int size = body == null ? 0 : body.readableBytes();
        ctx.write(headersFrame(ctx.alloc(), connection, response, size));
        if (size > 0) ctx.write(dataHeader(ctx.alloc(), size));
        ChannelFuture last = ctx.writeAndFlush(size > 0 ? body : Unpooled.EMPTY_BUFFER);
        if (size == 0 && body != null) body.release();
        return last;
    }

    /** {@code completeSize}: the body's length when it follows whole, -1 for a stream that goes on (the 200). */
    static ByteBuf headersFrame(ByteBufAllocator alloc, Http3Connection connection, ResponseHead response, long completeSize) {
        DefaultHttp3Headers headers = new DefaultHttp3Headers(false);
        headers.status(Integer.toString(response.status()));
        FieldListResponses.fill(headers, response, completeSize, null, connection.settings().tlsHeaders());
        return QpackLiterals.headersFrame(alloc, headers);
    }

    static ByteBuf dataHeader(ByteBufAllocator alloc, long length) {
        ByteBuf header = alloc.buffer(9);
        Varint.write(header, DATA);
        Varint.write(header, length);
        return header;
    }
}
