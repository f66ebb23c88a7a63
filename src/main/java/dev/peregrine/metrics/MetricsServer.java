package dev.peregrine.metrics;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObject;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpServerKeepAliveHandler;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.QueryStringDecoder;
import io.netty.handler.timeout.ReadTimeoutHandler;
import io.netty.util.concurrent.DefaultThreadFactory;
import org.jboss.logging.Logger;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

/**
 * The metrics port: a small HTTP/1.1 server with an event loop of its own, apart from the
 * application's, answering {@code GET /metrics} (and {@code /}) with the exposition of a
 * {@link MetricsExporter}. A scrape reads shared memory only, so it never waits for a request.
 */
public final class MetricsServer implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger("peregrine");
    /** Scrapers keep their connection between scrapes; one left silent longer than this is closed. */
    private static final int IDLE_SECONDS = 300;

    private final EventLoopGroup group;
    private final Channel listener;

    private MetricsServer(EventLoopGroup group, Channel listener) {
        this.group = group;
        this.listener = listener;
    }

    /** Listens on host:port (port 0 picks a free one); throws with the reason when it cannot. */
    public static MetricsServer start(MetricsExporter exporter, String host, int port) throws IOException {
        boolean epoll = Epoll.isAvailable();
        DefaultThreadFactory threads = new DefaultThreadFactory("peregrine-metrics", true);
        EventLoopGroup group = epoll ? new EpollEventLoopGroup(1, threads) : new NioEventLoopGroup(1, threads);
        try {
            Channel listener = new ServerBootstrap()
                    .group(group)
                    .channel(epoll ? EpollServerSocketChannel.class : NioServerSocketChannel.class)
                    .option(ChannelOption.SO_REUSEADDR, true)
                    .childHandler(new ChannelInitializer<>() {
                        @Override
                        protected void initChannel(Channel channel) {
                            channel.pipeline().addLast(
                                    new ReadTimeoutHandler(IDLE_SECONDS),
                                    new HttpServerCodec(4096, 8192, 8192),
                                    new HttpServerKeepAliveHandler(),
                                    new ScrapeHandler(exporter));
                        }
                    })
                    .bind(host, port).sync().channel();
            return new MetricsServer(group, listener);
        } catch (Exception e) {
            group.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
            throw new IOException(e.getMessage(), e);
        }
    }

    public InetSocketAddress address() {
        return (InetSocketAddress) listener.localAddress();
    }

    /** Where to scrape, for the startup line. */
    public String url() {
        InetSocketAddress bound = address();
        String host = bound.getAddress().getHostAddress();
        return "http://" + (host.contains(":") ? "[" + host + "]" : host) + ":" + bound.getPort() + "/metrics";
    }

    @Override
    public void close() {
        listener.close().syncUninterruptibly();
        group.shutdownGracefully(0, 100, TimeUnit.MILLISECONDS);
    }

    private static final class ScrapeHandler extends SimpleChannelInboundHandler<HttpObject> {
        private final MetricsExporter exporter;

        ScrapeHandler(MetricsExporter exporter) {
            this.exporter = exporter;
        }

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, HttpObject message) {
            // Request bodies (HttpContent) are ignored: nothing here takes one.
            if (!(message instanceof HttpRequest request)) return;
            if (request.decoderResult().isFailure()) {
                respond(ctx, request, HttpResponseStatus.BAD_REQUEST, "text/plain; charset=utf-8", "bad request\n", false);
                return;
            }
            String path = new QueryStringDecoder(request.uri()).path();
            if (!path.equals("/metrics") && !path.equals("/")) {
                respond(ctx, request, HttpResponseStatus.NOT_FOUND, "text/plain; charset=utf-8", "not found; metrics are at /metrics\n", true);
                return;
            }
            HttpMethod method = request.method();
            if (!method.equals(HttpMethod.GET) && !method.equals(HttpMethod.HEAD)) {
                respond(ctx, request, HttpResponseStatus.METHOD_NOT_ALLOWED, "text/plain; charset=utf-8", "use GET\n", true);
                return;
            }
            String contentType = MetricsExporter.contentType(request.headers().get(HttpHeaderNames.ACCEPT));
            String exposition;
            try {
                exposition = exporter.scrape(contentType);
            } catch (RuntimeException e) {
                LOG.error("Could not produce the metrics", e);
                respond(ctx, request, HttpResponseStatus.INTERNAL_SERVER_ERROR, "text/plain; charset=utf-8", "metrics failed\n", false);
                return;
            }
            respond(ctx, request, HttpResponseStatus.OK, contentType, exposition, true);
        }

        private static void respond(ChannelHandlerContext ctx, HttpRequest request, HttpResponseStatus status, String contentType,
                                    String text, boolean keepAlive) {
            byte[] body = text.getBytes(StandardCharsets.UTF_8);
            boolean head = request.method().equals(HttpMethod.HEAD);
            ByteBuf content = head ? Unpooled.EMPTY_BUFFER : Unpooled.wrappedBuffer(body);
            FullHttpResponse response = new DefaultFullHttpResponse(request.protocolVersion(), status, content);
            response.headers().set(HttpHeaderNames.CONTENT_TYPE, contentType);
            HttpUtil.setContentLength(response, body.length);
            if (status == HttpResponseStatus.METHOD_NOT_ALLOWED) response.headers().set(HttpHeaderNames.ALLOW, "GET, HEAD");
            if (!keepAlive) {
                response.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
                ctx.writeAndFlush(response).addListener(ChannelFutureListener.CLOSE);
            } else {
                // HttpServerKeepAliveHandler closes after the response when the request asked for it.
                ctx.writeAndFlush(response);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();
        }
    }
}
