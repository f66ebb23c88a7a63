package dev.peregrine.server;

import dev.peregrine.acme.CertificateManager;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.ssl.ApplicationProtocolNames;
import io.netty.handler.ssl.ApplicationProtocolNegotiationHandler;

/**
 * After the TLS handshake, sets the connection up for the protocol the client and server agreed on by
 * ALPN. A client that offered no ALPN gets HTTP/1.1, or HTTP/2 when that is all the server speaks.
 * A tls-alpn-01 validation (ALPN acme-tls/1) ends with its handshake: RFC 8737 3 forbids reading
 * anything on it.
 */
final class AlpnSelector extends ApplicationProtocolNegotiationHandler {
    private final Protocols protocols;

    AlpnSelector(Protocols protocols) {
        super(protocols.http2Only() ? ApplicationProtocolNames.HTTP_2 : ApplicationProtocolNames.HTTP_1_1);
        this.protocols = protocols;
    }

    @Override
    protected void configurePipeline(ChannelHandlerContext ctx, String protocol) {
        if (CertificateManager.ACME_TLS_PROTOCOL.equals(protocol)) {
            ctx.close();
        } else if (ApplicationProtocolNames.HTTP_2.equals(protocol) && protocols.http2()) {
            protocols.http2(ctx.pipeline());
        } else {
            protocols.http1(ctx.pipeline());
        }
    }

    @Override
    protected void handshakeFailure(ChannelHandlerContext ctx, Throwable cause) {
        // A client that cannot agree on a version or cipher, or sent no TLS at all: nothing to report.
        ctx.close();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        ctx.close();
    }
}
