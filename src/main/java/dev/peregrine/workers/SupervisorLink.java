package dev.peregrine.workers;

import io.netty.bootstrap.Bootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.epoll.EpollChannelOption;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.unix.DomainSocketAddress;
import io.netty.channel.unix.DomainSocketReadMode;
import io.netty.channel.unix.FileDescriptor;
import io.netty.handler.codec.LineBasedFrameDecoder;
import io.netty.handler.codec.string.StringDecoder;
import io.netty.handler.codec.string.StringEncoder;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * A worker's end of its supervisor's control socket: it receives the listening socket's file
 * descriptor, reports when the application is ready to serve, and hears when to drain. A closed
 * link means the supervisor is gone, and a worker without its supervisor drains and exits rather
 * than serve on unsupervised.
 */
public final class SupervisorLink {
    private final int id;
    private final Channel channel;
    private final CompletableFuture<Integer> listenerFd;

    private SupervisorLink(int id, Channel channel, CompletableFuture<Integer> listenerFd) {
        this.id = id;
        this.channel = channel;
        this.listenerFd = listenerFd;
    }

    /** Whether this process is a worker started by a supervisor. */
    public static boolean supervised() {
        String path = System.getenv(ControlServer.SOCKET_ENV);
        return path != null && !path.isEmpty();
    }

    /** The link when this process was started by a supervisor, else null. */
    public static SupervisorLink connectIfSupervised(EventLoopGroup group, Runnable onDrain) throws InterruptedException {
        if (!supervised()) return null;
        String path = System.getenv(ControlServer.SOCKET_ENV);
        int id = Integer.parseInt(System.getenv().getOrDefault(ControlServer.WORKER_ID_ENV, "1"));
        CompletableFuture<Integer> fd = new CompletableFuture<>();
        Channel channel = new Bootstrap()
                .group(group)
                .channel(EpollDomainSocketChannel.class)
                // The descriptor arrives first; the channel then switches to bytes for the commands.
                .option(EpollChannelOption.DOMAIN_SOCKET_READ_MODE, DomainSocketReadMode.FILE_DESCRIPTORS)
                .handler(new ChannelInitializer<>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(new LineBasedFrameDecoder(256), new StringDecoder(StandardCharsets.US_ASCII),
                                new StringEncoder(StandardCharsets.US_ASCII), new Commands(fd, onDrain));
                    }
                })
                .connect(new DomainSocketAddress(path)).sync().channel();
        return new SupervisorLink(id, channel, fd);
    }

    /** This worker's number, 1 to --workers, for logs. */
    public int id() {
        return id;
    }

    /**
     * The supervisor closed the link before it handed over the listening socket: it is stopping (or gone),
     * and this worker will never serve.
     */
    public static final class Closed extends IllegalStateException {
        Closed() {
            super("the supervisor closed the control socket");
        }
    }

    /** The listening socket the supervisor owns; waits for it to arrive ({@link Closed} as the cause if it never will). */
    public int listenerFd() throws Exception {
        return listenerFd.get(30, TimeUnit.SECONDS);
    }

    /** Tells the supervisor that this worker accepts connections with its application started. */
    public void ready() {
        channel.writeAndFlush(ControlServer.READY + "\n");
    }

    private static final class Commands extends SimpleChannelInboundHandler<Object> {
        private final CompletableFuture<Integer> fd;
        private final Runnable onDrain;

        Commands(CompletableFuture<Integer> fd, Runnable onDrain) {
            this.fd = fd;
            this.onDrain = onDrain;
        }

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, Object msg) {
            if (msg instanceof FileDescriptor descriptor) {
                ((EpollDomainSocketChannel) ctx.channel()).config().setReadMode(DomainSocketReadMode.BYTES);
                fd.complete(descriptor.intValue());
            } else if (ControlServer.DRAIN.equals(msg)) {
                onDrain.run();
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            fd.completeExceptionally(new Closed());
            onDrain.run();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();
        }
    }
}
