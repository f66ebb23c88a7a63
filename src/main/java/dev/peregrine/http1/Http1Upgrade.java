package dev.peregrine.http1;

import dev.peregrine.http.RequestHead;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.websocket.HttpUpgrade;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;

import java.net.InetSocketAddress;

/**
 * The HTTP side of a WebSocket handshake on an HTTP/1.1 connection: the denial (or error) response, or
 * the 101 and the hand-over of the channel to the WebSocket codec.
 */
final class Http1Upgrade implements HttpUpgrade {
    private final Http1Connection connection;
    private final ChannelHandlerContext ctx;
    private final RequestHead head;
    private final InetSocketAddress client;
    private final long startNanos;

    Http1Upgrade(Http1Connection connection, ChannelHandlerContext ctx, RequestHead head, InetSocketAddress client, long startNanos) {
        this.connection = connection;
        this.ctx = ctx;
        this.head = head;
        this.client = client;
        this.startNanos = startNanos;
    }

    private void answered(int status, int bytes) {
        connection.core().upgradeAnswered(head, Http1Connection.protocol(head), head.http11() ? "1.1" : "1.0", client, status, bytes, startNanos);
    }

    @Override
    public void respond(ResponseHead response, ByteBuf body) {
        // The WebSocket side learns of the close, and stops counting the request, when the channel closes.
        connection.upgradeAnswered();
        int size = body == null ? 0 : body.readableBytes();
        ResponseEncoder.Framing framing = ResponseEncoder.framing(head, response, size);
        long length = ResponseEncoder.declaredLength(response, size);
        if (body != null && (framing == ResponseEncoder.Framing.NONE || size == 0)) {
            body.release();
            body = null;
        } else if (body != null && size > length) {
            body.writerIndex(body.readerIndex() + (int) length);
        }
        ByteBuf out = ResponseEncoder.head(ctx.alloc(), head, response, framing, false, size, -1, connection.settings().tlsHeaders());
        int sent = out.readableBytes() + (body == null ? 0 : body.readableBytes());
        answered(response.status(), sent);
        if (body != null) ctx.write(out);
        ctx.writeAndFlush(body != null ? body : out).addListener(ChannelFutureListener.CLOSE);
    }

    @Override
    public ByteBuf switchProtocols(ResponseHead response) {
        ByteBuf out = ResponseEncoder.head(ctx.alloc(), head, response, ResponseEncoder.Framing.NONE, true, -1, -1,
                connection.settings().tlsHeaders());
        answered(101, out.readableBytes());
        ctx.writeAndFlush(out);
        return connection.handOver();
    }
}
