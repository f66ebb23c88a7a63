package dev.peregrine.server;

import dev.peregrine.http.Connections;
import dev.peregrine.http.Application;
import dev.peregrine.http.HttpSettings;
import dev.peregrine.http1.Http1Connection;
import dev.peregrine.http2.Http2Setup;
import io.netty.channel.ChannelPipeline;

/** Puts the handlers of one protocol into a connection's pipeline, once the protocol is known. */
public final class Protocols {
    private final HttpSettings settings;
    private final Application application;
    private final Connections connections;
    private final boolean http2;
    private final boolean http2Only;

    public Protocols(HttpSettings settings, Application application, Connections connections, boolean http2, boolean http2Only) {
        this.settings = settings;
        this.application = application;
        this.connections = connections;
        this.http2 = http2;
        this.http2Only = http2Only;
    }

    HttpSettings settings() { return settings; }
    boolean http2() { return http2; }
    boolean http2Only() { return http2Only; }

    void http1(ChannelPipeline pipeline) {
        pipeline.addLast(new Http1Connection(settings, application, connections));
    }

    void http2(ChannelPipeline pipeline) {
        Http2Setup.configure(pipeline, settings, application, connections);
    }
}
