package dev.peregrine.workers;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.netty.channel.unix.DomainSocketAddress;
import io.netty.channel.unix.FileDescriptor;
import io.netty.handler.codec.LineBasedFrameDecoder;
import io.netty.handler.codec.string.StringDecoder;
import io.netty.handler.codec.string.StringEncoder;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.function.BiConsumer;
import java.util.function.BooleanSupplier;
import java.util.function.LongConsumer;

/**
 * The supervisor's control socket, a unix socket in a private directory: each worker connects, gets
 * the listening socket's descriptor (SCM_RIGHTS, which is how a socket crosses into a process that
 * was not forked from its owner), and answers "ready" once it serves. The supervisor answers
 * "drain" when the worker is to stop. Workers are told apart by the peer pid the kernel reports.
 */
final class ControlServer {
    static final String SOCKET_ENV = "PEREGRINE_WORKER_CONTROL";
    static final String WORKER_ID_ENV = "PEREGRINE_WORKER_ID";
    static final String READY = "ready";
    static final String DRAIN = "drain";

    private final Channel server;

    /**
     * @param listenerOpen whether the listening socket is still open; once the supervisor closed it,
     *     its descriptor number may name another file, and a worker that connects late gets none
     * @param onConnected called with (pid, channel) when a worker connects
     * @param onReady called with the pid of a worker that reports ready
     */
    ControlServer(EventLoopGroup group, Path socket, int listenerFd, BooleanSupplier listenerOpen, BiConsumer<Long, Channel> onConnected,
                  LongConsumer onReady) throws InterruptedException {
        server = new ServerBootstrap()
                .group(group)
                .channel(EpollServerDomainSocketChannel.class)
                .childHandler(new ChannelInitializer<>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(new LineBasedFrameDecoder(256), new StringDecoder(StandardCharsets.US_ASCII),
                                new StringEncoder(StandardCharsets.US_ASCII), new SimpleChannelInboundHandler<String>() {
                                    private long pid;

                                    @Override
                                    public void channelActive(ChannelHandlerContext ctx) throws Exception {
                                        pid = ((EpollDomainSocketChannel) ctx.channel()).peerCredentials().pid();
                                        onConnected.accept(pid, ctx.channel());
                                        // On the event loop that also closes the listener: the check holds until the descriptor is sent.
                                        if (listenerOpen.getAsBoolean()) ctx.writeAndFlush(new FileDescriptor(listenerFd));
                                        else ctx.close();
                                    }

                                    @Override
                                    protected void channelRead0(ChannelHandlerContext ctx, String line) {
                                        if (READY.equals(line)) onReady.accept(pid);
                                    }

                                    @Override
                                    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                                        ctx.close();
                                    }
                                });
                    }
                })
                .bind(new DomainSocketAddress(socket.toFile())).sync().channel();
    }

    void close() {
        server.close().syncUninterruptibly();
    }
}
