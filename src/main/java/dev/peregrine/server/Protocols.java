package dev.peregrine.server;

import dev.peregrine.http.Connections;
import dev.peregrine.http.HttpSettings;
import dev.peregrine.http.RequestCore;
import dev.peregrine.http1.Http1Connection;
import dev.peregrine.http2.Http2Setup;
import dev.peregrine.websocket.WebSocketApplication;
import io.netty.channel.ChannelPipeline;

/** Puts the handlers of one protocol into a connection's pipeline, once the protocol is known. */
public final class Protocols {
    private final RequestCore core;
    private final WebSocketApplication webSockets;
    private final boolean http2;
    private final boolean http2Only;

    /** @param webSockets where WebSocket handshakes go (HTTP/1.1 upgrades, HTTP/2 extended CONNECTs); null when they are refused */
    public Protocols(RequestCore core, WebSocketApplication webSockets, boolean http2, boolean http2Only) {
        this.core = core;
        this.webSockets = webSockets;
        this.http2 = http2;
        this.http2Only = http2Only;
    }

    HttpSettings settings() { return core.settings(); }
    boolean http2() { return http2; }
    boolean http2Only() { return http2Only; }

    void http1(ChannelPipeline pipeline) {
        pipeline.addLast(new Http1Connection(core, webSockets));
    }

    void http2(ChannelPipeline pipeline) {
        Connections.neverReclaim(pipeline.channel());
        Http2Setup.configure(pipeline, core, webSockets);
    }
}
