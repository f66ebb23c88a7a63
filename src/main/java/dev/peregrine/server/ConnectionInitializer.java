package dev.peregrine.server;

import dev.peregrine.http.Connections;
import dev.peregrine.tls.TlsContexts;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;

/**
 * Sets up each accepted connection: closes it at once when the server is full, else puts in TLS (when
 * configured) and whatever picks the protocol: ALPN after a TLS handshake, the HTTP/2 preface on a
 * plain connection, or the one protocol the options leave.
 */
public final class ConnectionInitializer extends ChannelInitializer<Channel> {
    private final Protocols protocols;
    private final Connections connections;
    /** Null without TLS. */
    private final TlsContexts tls;
    private final long handshakeTimeoutMillis;

    public ConnectionInitializer(Protocols protocols, Connections connections, TlsContexts tls, long handshakeTimeoutMillis) {
        this.protocols = protocols;
        this.connections = connections;
        this.tls = tls;
        this.handshakeTimeoutMillis = handshakeTimeoutMillis;
    }

    @Override
    protected void initChannel(Channel channel) {
        if (!connections.admit(channel)) {
            // Past --max-connections a connection is closed rather than queued: the ones being served keep their share.
            channel.close();
            return;
        }
        if (tls != null) {
            channel.pipeline().addLast(tls.newHandler(handshakeTimeoutMillis), new AlpnSelector(protocols));
            // The channel reads only when asked: the TLS handlers ask for more themselves once started.
            channel.read();
        } else if (protocols.http2Only()) {
            protocols.http2(channel.pipeline());
        } else if (protocols.http2()) {
            channel.pipeline().addLast(new PrefaceDetector(protocols, protocols.settings().keepAliveMillis(),
                    protocols.settings().requestTimeoutMillis()));
        } else {
            protocols.http1(channel.pipeline());
        }
    }
}
