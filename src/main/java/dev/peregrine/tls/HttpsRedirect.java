package dev.peregrine.tls;

import dev.peregrine.config.ServerSettings;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.timeout.ReadTimeoutHandler;

import java.net.URI;
import java.net.URISyntaxException;

/**
 * {@code --redirect-http PORT}: every plain-HTTP request on PORT is sent to the same host and target
 * over https, so that a site can serve TLS alone without a proxy in front. GET and HEAD get a 301 (what
 * browsers and caches remember); other methods a 308, which keeps the method and body.
 */
public final class HttpsRedirect extends SimpleChannelInboundHandler<HttpRequest> {
    private final int tlsPort;

    private HttpsRedirect(int tlsPort) {
        this.tlsPort = tlsPort;
    }

    /** Binds --host:PORT and serves the redirects on {@code group}. */
    public static Channel bind(EventLoopGroup group, ServerSettings settings) throws InterruptedException {
        int tlsPort = settings.listen().port();
        ServerBootstrap bootstrap = new ServerBootstrap()
                .group(group)
                .channel(group instanceof EpollEventLoopGroup ? EpollServerSocketChannel.class : NioServerSocketChannel.class)
                .option(ChannelOption.SO_REUSEADDR, true)
                .childHandler(new ChannelInitializer<>() {
                    @Override
                    protected void initChannel(Channel channel) {
                        channel.pipeline().addLast(new ReadTimeoutHandler(30), new HttpServerCodec(8192, settings.limits().maxHeaderSize(), 8192),
                                new HttpsRedirect(tlsPort));
                    }
                });
        return bootstrap.bind(settings.listen().host(), settings.tls().redirectHttpPort()).sync().channel();
    }

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, HttpRequest request) {
        if (!request.decoderResult().isSuccess()) {
            answer(ctx, HttpResponseStatus.BAD_REQUEST, null);
            return;
        }
        String host = hostWithoutPort(request.headers().get(HttpHeaderNames.HOST));
        String target = originForm(request.uri());
        if (host == null || target == null) {
            answer(ctx, HttpResponseStatus.BAD_REQUEST, null);
            return;
        }
        String location = "https://" + host + (tlsPort == 443 ? "" : ":" + tlsPort) + target;
        boolean safe = request.method().equals(HttpMethod.GET) || request.method().equals(HttpMethod.HEAD);
        answer(ctx, safe ? HttpResponseStatus.MOVED_PERMANENTLY : HttpResponseStatus.PERMANENT_REDIRECT, location);
    }

    /** The host name of a Host header, or null when it is missing or not a plain name or address. */
    static String hostWithoutPort(String host) {
        if (host == null || host.isEmpty()) return null;
        String name;
        if (host.startsWith("[")) {
            int end = host.indexOf(']');
            if (end < 0) return null;
            name = host.substring(0, end + 1);
            String rest = host.substring(end + 1);
            if (!rest.isEmpty() && !rest.matches(":[0-9]{1,5}")) return null;
            return name.matches("\\[[0-9A-Fa-f:.]+\\]") ? name : null;
        }
        int colon = host.indexOf(':');
        name = colon < 0 ? host : host.substring(0, colon);
        if (colon >= 0 && !host.substring(colon).matches(":[0-9]{1,5}")) return null;
        // Only what a host name can hold: the Location must not become another site's address.
        return !name.isEmpty() && name.matches("[A-Za-z0-9.-]+") ? name : null;
    }

    /** The path and query of the request target (also when a client sent the absolute form), or null. */
    static String originForm(String uri) {
        if (uri.startsWith("/")) return uri;
        if (uri.startsWith("http://") || uri.startsWith("https://")) {
            try {
                URI parsed = new URI(uri);
                String path = parsed.getRawPath() == null || parsed.getRawPath().isEmpty() ? "/" : parsed.getRawPath();
                return parsed.getRawQuery() == null ? path : path + "?" + parsed.getRawQuery();
            } catch (URISyntaxException e) {
                return null;
            }
        }
        return null;
    }

    private static void answer(ChannelHandlerContext ctx, HttpResponseStatus status, String location) {
        FullHttpResponse response = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status, Unpooled.EMPTY_BUFFER);
        if (location != null) response.headers().set(HttpHeaderNames.LOCATION, location);
        response.headers().set(HttpHeaderNames.CONTENT_LENGTH, 0);
        response.headers().set(HttpHeaderNames.SERVER, "peregrine");
        // One redirect per connection: the client's next request goes to the https port anyway.
        response.headers().set(HttpHeaderNames.CONNECTION, "close");
        ctx.writeAndFlush(response).addListener(ChannelFutureListener.CLOSE);
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        ctx.close();
    }
}
