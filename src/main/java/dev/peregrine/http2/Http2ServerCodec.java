package dev.peregrine.http2;

import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http2.Http2ConnectionDecoder;
import io.netty.handler.codec.http2.Http2ConnectionEncoder;
import io.netty.handler.codec.http2.Http2Error;
import io.netty.handler.codec.http2.Http2Exception;
import io.netty.handler.codec.http2.Http2FrameCodec;
import io.netty.handler.codec.http2.Http2FrameCodecBuilder;
import io.netty.handler.codec.http2.Http2Settings;

/**
 * Netty's frame codec, except that the GOAWAY ending a connection for ENHANCE_YOUR_CALM names the last
 * stream the server took up, so that the client knows which of its requests it may send again (RFC 9113
 * §6.8). Netty raises every connection error as a hard shutdown, and for those it names stream 2^31-1:
 * a broken header block may leave a stream acted on before it was counted (netty#10670). The abuse
 * limits that answer ENHANCE_YOUR_CALM (resets, empty DATA frames, CONTINUATION floods, queued control
 * frames) act between frames, where the count of created streams is exact.
 */
final class Http2ServerCodec extends Http2FrameCodec {
    private Http2ServerCodec(Http2ConnectionEncoder encoder, Http2ConnectionDecoder decoder, Http2Settings initialSettings,
                             boolean decoupleCloseAndGoAway, boolean flushPreface) {
        super(encoder, decoder, initialSettings, decoupleCloseAndGoAway, flushPreface);
    }

    @Override
    protected void onConnectionError(ChannelHandlerContext ctx, boolean outbound, Throwable cause, Http2Exception http2Ex) {
        if (http2Ex != null && http2Ex.error() == Http2Error.ENHANCE_YOUR_CALM
                && http2Ex.shutdownHint() == Http2Exception.ShutdownHint.HARD_SHUTDOWN) {
            // Any hint but graceful closes right after the GOAWAY, as a hard one does.
            http2Ex = new Http2Exception(Http2Error.ENHANCE_YOUR_CALM, http2Ex.getMessage(), http2Ex, Http2Exception.ShutdownHint.NO_SHUTDOWN);
        }
        super.onConnectionError(ctx, outbound, cause, http2Ex);
    }

    /** {@link Http2FrameCodecBuilder#forServer()}, building this codec. */
    static final class Builder extends Http2FrameCodecBuilder {
        Builder() {
            server(true);
        }

        @Override
        protected Http2FrameCodec build(Http2ConnectionDecoder decoder, Http2ConnectionEncoder encoder, Http2Settings initialSettings) {
            Http2ServerCodec codec = new Http2ServerCodec(encoder, decoder, initialSettings, decoupleCloseAndGoAway(), flushPreface());
            codec.gracefulShutdownTimeoutMillis(gracefulShutdownTimeoutMillis());
            return codec;
        }
    }
}
