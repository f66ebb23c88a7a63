package dev.peregrine.http1;

import dev.peregrine.http.Application;
import dev.peregrine.server.Connections;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;

/** Sets up each accepted connection for HTTP/1.1, or closes it at once when the server is full. */
public final class Http1Initializer extends ChannelInitializer<Channel> {
    private final Http1Settings settings;
    private final Application application;
    private final Connections connections;

    public Http1Initializer(Http1Settings settings, Application application, Connections connections) {
        this.settings = settings;
        this.application = application;
        this.connections = connections;
    }

    @Override
    protected void initChannel(Channel channel) {
        if (!connections.admit(channel)) {
            // Past --max-connections a connection is closed rather than queued: the ones being served keep their share.
            channel.close();
            return;
        }
        channel.pipeline().addLast(new Http1Connection(settings, application, connections));
    }
}
