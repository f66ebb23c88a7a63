package dev.peregrine.workers;

import dev.peregrine.config.ServerSettings;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFactory;
import io.netty.channel.ChannelOption;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.unix.DomainSocketAddress;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.file.Files;

/**
 * The application's listening socket: bound here (one process, or the supervisor), or adopted from
 * a file descriptor the supervisor passed, so that every worker, and every replacement of a worker,
 * accepts on the very same socket and none of its queued connections is ever reset.
 */
public final class Listeners {
    private Listeners() {}

    /** Binds --host/--port or --unix with the bootstrap's group, handler and options. */
    public static Channel bind(ServerBootstrap bootstrap, ServerSettings settings) throws IOException, InterruptedException {
        boolean epoll = Epoll.isAvailable();
        bootstrap.option(ChannelOption.SO_BACKLOG, settings.listen().backlog()).option(ChannelOption.SO_REUSEADDR, true);
        if (settings.listen().unix() != null) {
            if (!epoll) throw new IOException("--unix needs the epoll transport, which is not available here");
            Files.deleteIfExists(settings.listen().unix());
            return bootstrap.channel(EpollServerDomainSocketChannel.class)
                    .bind(new DomainSocketAddress(settings.listen().unix().toFile())).sync().channel();
        }
        bootstrap.channel(epoll ? EpollServerSocketChannel.class : NioServerSocketChannel.class);
        return bootstrap.bind(settings.listen().host(), settings.listen().port()).sync().channel();
    }

    /** Registers a listening socket received from the supervisor; it accepts at once. */
    public static Channel adopt(ServerBootstrap bootstrap, int fd, boolean unix) throws InterruptedException {
        ChannelFactory<ServerChannel> factory = unix ? () -> new EpollServerDomainSocketChannel(fd) : () -> new EpollServerSocketChannel(fd);
        return bootstrap.channelFactory(factory).register().sync().channel();
    }

    /** The address as the startup line shows it: http(s)://host:port or unix:path. */
    public static String describe(Channel listener, ServerSettings settings) {
        if (settings.listen().unix() != null) return "unix:" + settings.listen().unix();
        int port = listener.localAddress() instanceof InetSocketAddress bound ? bound.getPort() : settings.listen().port();
        String host = settings.listen().host().contains(":") ? "[" + settings.listen().host() + "]" : settings.listen().host();
        return (settings.tls().enabled() ? "https://" : "http://") + host + ":" + port;
    }
}
