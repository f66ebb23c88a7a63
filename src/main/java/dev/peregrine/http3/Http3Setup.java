package dev.peregrine.http3;

import dev.peregrine.http.HttpSettings;
import dev.peregrine.http.RequestCore;
import dev.peregrine.tls.RetryTokens;
import dev.peregrine.websocket.WebSocketApplication;
import dev.peregrine.webtransport.WebTransportApplication;
import io.netty.bootstrap.Bootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.epoll.EpollChannelOption;
import io.netty.channel.epoll.EpollDatagramChannel;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.socket.nio.NioDatagramChannel;
import io.netty.incubator.codec.http3.DefaultHttp3SettingsFrame;
import io.netty.incubator.codec.http3.Http3;
import io.netty.incubator.codec.http3.Http3ServerConnectionHandler;
import io.netty.incubator.codec.http3.Http3SettingsFrame;
import io.netty.incubator.codec.quic.QuicChannel;
import io.netty.incubator.codec.quic.QuicSslEngine;
import io.netty.incubator.codec.quic.QuicStreamChannel;
import io.netty.incubator.codec.quic.QuicTokenHandler;
import io.netty.util.ReferenceCountUtil;

import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * The handler of the UDP socket that serves HTTP/3: Netty's QUIC codec (quiche: packets, TLS 1.3,
 * loss recovery, flow control), its HTTP/3 connection handler (control streams, QPACK, frame
 * checks), then {@link Http3Connection} per connection and {@link Http3Stream} per request stream.
 */
public final class Http3Setup {
    /** Request streams a client may have open at once, as over HTTP/2. */
    static final int MAX_CONCURRENT_STREAMS = 100;
    /** Request body a stream may send ahead of the application's reading. */
    static final long STREAM_WINDOW = 256 * 1024;
    /** WebTransport sessions a connection may have open at once; more CONNECTs are refused with a reset. */
    static final int MAX_SESSIONS = 16;
    /** Unidirectional streams a client may have open at once: its control and QPACK streams, and WebTransport's. */
    static final int MAX_UNIDIRECTIONAL_STREAMS = 100;
    /** QUIC datagrams held for the connection before they are read, and queued for sending: past it they are dropped. */
    private static final int DATAGRAM_QUEUE = 256;
    /** Settings of WebTransport as Chromium speaks it (draft-ietf-webtrans-http3-02) and of HTTP datagrams (RFC 9297). */
    static final long SETTINGS_ENABLE_WEBTRANSPORT = 0x2b603742L, SETTINGS_H3_DATAGRAM = 0x33, SETTINGS_ENABLE_CONNECT_PROTOCOL = 0x08;
    /**
     * QUIC's own idle timeout, longer than any --keep-alive: {@link Http3Connection} closes idle
     * connections itself, and a request the application takes long over must not lose its connection
     * because no packet crossed meanwhile (browsers ping only every 15 s or so).
     */
    private static final long TRANSPORT_IDLE_MILLIS = 120_000;

    private Http3Setup() {}

    /**
     * @param engines the TLS engine of each new connection (its certificate), so that a reload of the
     *                certificates reaches new connections
     * @param webSockets where WebSockets over HTTP/3 (RFC 9220) go; null when they are refused
     */
    public static ChannelHandler quicCodec(Function<QuicChannel, QuicSslEngine> engines, RequestCore core,
                                           WebTransportApplication webTransport, WebSocketApplication webSockets) {
        HttpSettings settings = core.settings();
        return Http3.newQuicServerCodecBuilder()
                .sslEngineProvider(engines)
                .maxIdleTimeout(Math.max(TRANSPORT_IDLE_MILLIS, settings.keepAliveMillis()), TimeUnit.MILLISECONDS)
                .initialMaxData(MAX_CONCURRENT_STREAMS * STREAM_WINDOW)
                .initialMaxStreamDataBidirectionalRemote(STREAM_WINDOW)
                .initialMaxStreamDataBidirectionalLocal(STREAM_WINDOW)
                .initialMaxStreamDataUnidirectional(Math.max(STREAM_WINDOW, Http3.MIN_INITIAL_MAX_STREAM_DATA_UNIDIRECTIONAL))
                .initialMaxStreamsBidirectional(MAX_CONCURRENT_STREAMS)
                .initialMaxStreamsUnidirectional(Math.max(MAX_UNIDIRECTIONAL_STREAMS, Http3.MIN_INITIAL_MAX_STREAMS_UNIDIRECTIONAL))
                // WebTransport's datagrams ride on QUIC datagrams (RFC 9221).
                .datagram(DATAGRAM_QUEUE, DATAGRAM_QUEUE)
                // Clients are asked not to move their connections to a new address of their own accord (Chromium
                // does so when a path seems slow): under SO_REUSEPORT a new address can land on another worker,
                // and quiche failed such moves here under load (INVALID_STATE, the connection lost).
                .activeMigration(false)
                .tokenHandler(TOKENS)
                .handler(new ChannelInitializer<QuicChannel>() {
                    @Override
                    protected void initChannel(QuicChannel quic) {
                        Http3Connection connection = new Http3Connection(core, webTransport, webSockets);
                        quic.pipeline().addLast(
                                new Http3ServerConnectionHandler(new ChannelInitializer<QuicStreamChannel>() {
                                    @Override
                                    protected void initChannel(QuicStreamChannel stream) {
                                        stream.pipeline().addLast(new Http3Stream(connection));
                                    }
                                }, null, type -> unidirectionalStream(connection, type), localSettings(settings), true),
                                connection);
                    }
                })
                .build();
    }

    /**
     * Address validation by a Retry round trip (RFC 9000 8.1): a spoofed source address cannot make
     * the server send more than the client did, since only the address itself receives the token.
     */
    private static final QuicTokenHandler TOKENS = RetryTokens.fromEnvironment(System.getenv());

    /**
     * Binds the UDP socket. {@code shared}: under a supervisor every worker binds the port (SO_REUSEPORT),
     * and the kernel keeps each client address with one worker for as long as the set of workers stays.
     */
    public static Channel bind(EventLoopGroup group, String host, int port, boolean shared, ChannelHandler codec) throws InterruptedException {
        Bootstrap bootstrap = new Bootstrap().group(group).handler(codec);
        if (group instanceof EpollEventLoopGroup) {
            bootstrap.channel(EpollDatagramChannel.class);
            if (shared) bootstrap.option(EpollChannelOption.SO_REUSEPORT, true);
        } else {
            if (shared) throw new IllegalStateException("HTTP/3 under a supervisor needs the epoll transport (SO_REUSEPORT)");
            bootstrap.channel(NioDatagramChannel.class);
        }
        return bootstrap.bind(new InetSocketAddress(host, port)).sync().channel();
    }

    private static Http3SettingsFrame localSettings(HttpSettings settings) {
        DefaultHttp3SettingsFrame frame = new DefaultHttp3SettingsFrame();
        frame.put(Http3SettingsFrame.HTTP3_SETTINGS_MAX_FIELD_SECTION_SIZE, (long) settings.maxHeadSize());
        // Chromium opens a WebTransport session only on a connection whose SETTINGS say draft-02 and datagrams.
        // Extended CONNECT serves WebSockets too (RFC 9220); it stays on without them, for WebTransport, and
        // a WebSocket's CONNECT is then answered 501, as over HTTP/2.
        frame.put(SETTINGS_ENABLE_CONNECT_PROTOCOL, 1L);
        frame.put(SETTINGS_ENABLE_WEBTRANSPORT, 1L);
        frame.put(SETTINGS_H3_DATAGRAM, 1L);
        return frame;
    }

    /** A client's unidirectional stream of a type HTTP/3 itself does not define: WebTransport's, or one to ignore (RFC 9114 6.2). */
    private static ChannelHandler unidirectionalStream(Http3Connection connection, long type) {
        if (type == WebTransportStream.UNIDIRECTIONAL_TYPE) return new WebTransportStream(connection, false);
        return new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                ReferenceCountUtil.release(msg);
            }
        };
    }
}
