package dev.peregrine.http2;

import dev.peregrine.http.FieldListResponses;
import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.RequestCore;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.http.TlsResponseHeaders;
import dev.peregrine.metrics.MetricsLayout;
import dev.peregrine.websocket.HttpUpgrade;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http2.DefaultHttp2DataFrame;
import io.netty.handler.codec.http2.DefaultHttp2HeadersFrame;
import io.netty.handler.codec.http2.Http2FrameStream;

import java.net.InetSocketAddress;

/**
 * The HTTP side of an RFC 8441 WebSocket handshake, an extended CONNECT on one HTTP/2 stream: a 200
 * that leaves the stream open for the WebSocket's frames, or a complete HTTP response that ends it.
 */
final class Http2WebSocketUpgrade implements HttpUpgrade {
    private final Http2Connection connection;
    private final ChannelHandlerContext ctx;
    private final Http2FrameStream stream;
    private final WebSocketStreamChannel channel;
    private final RequestCore core;
    private final TlsResponseHeaders tlsHeaders;
    private final HttpRequestHead head;
    private final InetSocketAddress client;
    private final long startNanos;

    Http2WebSocketUpgrade(Http2Connection connection, ChannelHandlerContext ctx, Http2FrameStream stream, WebSocketStreamChannel channel,
                          RequestCore core, HttpRequestHead head, InetSocketAddress client, long startNanos) {
        this.connection = connection;
        this.ctx = ctx;
        this.stream = stream;
        this.channel = channel;
        this.core = core;
        this.tlsHeaders = core.settings().tlsHeaders();
        this.head = head;
        this.client = client;
        this.startNanos = startNanos;
    }

    @Override
    public void respond(ResponseHead response, ByteBuf body) {
        int size = body == null ? 0 : body.readableBytes();
        ChannelFuture last = ctx.write(new DefaultHttp2HeadersFrame(FieldListResponses.headers(response, size, null, tlsHeaders), size == 0)
                .stream(stream));
        if (size > 0) last = ctx.write(new DefaultHttp2DataFrame(body, true).stream(stream));
        else if (body != null) body.release();
        connection.stopBody(stream, last);
        ctx.flush();
        core.upgradeAnswered(head, MetricsLayout.HTTP_2, "2", client, response.status(), size, startNanos);
        channel.answeredWithoutSwitch();
        channel.close();
    }

    @Override
    public ByteBuf switchProtocols(ResponseHead response) {
        ctx.writeAndFlush(new DefaultHttp2HeadersFrame(FieldListResponses.headers(response, -1, null, tlsHeaders), false).stream(stream));
        channel.switched();
        core.upgradeAnswered(head, MetricsLayout.HTTP_2, "2", client, response.status(), 0, startNanos);
        // DATA the client sent meanwhile waits in the stream's channel until the WebSocket side reads.
        return Unpooled.EMPTY_BUFFER;
    }
}
