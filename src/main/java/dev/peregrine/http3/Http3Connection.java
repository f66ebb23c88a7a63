package dev.peregrine.http3;

import dev.peregrine.http.Connections;
import dev.peregrine.http.Connections.DrainEvent;
import dev.peregrine.http.FieldListRequests;
import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.HttpSettings;
import dev.peregrine.http.LoopExchange;
import dev.peregrine.http.RequestCore;
import dev.peregrine.http.RequestHead;
import dev.peregrine.metrics.MetricsLayout;
import dev.peregrine.websocket.HttpUpgrade;
import dev.peregrine.websocket.WebSocketApplication;
import dev.peregrine.websocket.WebSocketConnection;
import dev.peregrine.webtransport.Varint;
import dev.peregrine.webtransport.WebTransportApplication;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.incubator.codec.http3.DefaultHttp3GoAwayFrame;
import io.netty.incubator.codec.http3.Http3;
import io.netty.incubator.codec.http3.Http3ErrorCode;
import io.netty.incubator.codec.http3.Http3Exception;
import io.netty.incubator.codec.http3.Http3Headers;
import io.netty.incubator.codec.quic.QuicChannel;
import io.netty.incubator.codec.quic.QuicStreamChannel;
import io.netty.incubator.codec.quic.QuicStreamType;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.concurrent.ScheduledFuture;
import org.jboss.logging.Logger;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * One QUIC connection carrying HTTP/3: what its request streams share (the peer, the settings), the
 * count against --max-connections, --keep-alive for a connection without requests, --request-timeout
 * for a request body that stalls, and the drain (GOAWAY, then close once the open requests are done).
 * It also knows the connection's WebSockets, and its WebTransport sessions by the ID of their CONNECT
 * stream, to which their streams and datagrams are sent.
 */
final class Http3Connection extends ChannelInboundHandlerAdapter {
    private static final Logger LOG = Logger.getLogger("peregrine");
    /** How long a draining connection without requests stays open, for a request already on its way. */
    private static final long DRAIN_IDLE_MILLIS = 250;

    private final RequestCore core;
    private final HttpSettings settings;
    private final Connections connections;
    private final int spareBytes;
    private final int spareHeaders;
    /** Where WebTransport sessions go; null when the application cannot take them (they get 501). */
    private final WebTransportApplication webTransport;
    /** Where WebSockets (RFC 9220) go; null when they are refused (WSGI, --no-websockets: 501). */
    private final WebSocketApplication webSockets;
    private final Set<Http3Stream> streams = new LinkedHashSet<>();
    /** The streams that carry a WebSocket: the drain reaches them, and they keep the connection from idling. */
    private final Set<QuicStreamChannel> webSocketStreams = new LinkedHashSet<>();
    private final Map<Long, Http3WebTransport> sessions = new HashMap<>();

    private ChannelHandlerContext ctx;
    private QuicChannel quic;
    private InetSocketAddress peer;
    private InetSocketAddress local;
    private boolean peerIsTrustedProxy;
    private long lastActivity = System.nanoTime();
    /** The highest request stream id seen, for GOAWAY; -1 before the first. */
    private long lastStreamId = -1;
    private ScheduledFuture<?> timer;
    private boolean draining;
    private boolean closed;

    Http3Connection(RequestCore core, WebTransportApplication webTransport, WebSocketApplication webSockets) {
        this.core = core;
        this.webTransport = webTransport;
        this.settings = core.settings();
        this.webSockets = settings.webSocket() == null ? null : webSockets;
        this.connections = core.connections();
        this.spareBytes = core.spareBytes();
        this.spareHeaders = core.spareHeaders();
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        this.ctx = ctx;
        this.quic = (QuicChannel) ctx.channel();
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        peer = quic.remoteSocketAddress() instanceof InetSocketAddress inet ? inet : null;
        local = quic.localSocketAddress() instanceof InetSocketAddress inet ? inet : null;
        peerIsTrustedProxy = peer != null && settings.trustedProxies().trusts(peer.getAddress());
        if (!connections.admit(quic)) {
            close(Http3ErrorCode.H3_EXCESSIVE_LOAD);
            return;
        }
        // QUIC has its own idle timeout and stream limits; its connections are not TCP ones to make room among.
        Connections.neverReclaim(quic);
        // A connection that arrives while the server drains (another worker now takes new ones) is
        // served what it sends at once, then told to go.
        if (connections.draining()) startDraining();
        armTimer();
        ctx.fireChannelActive();
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
        if (evt == Connections.DrainEvent.INSTANCE) {
            startDraining();
            return;
        }
        ctx.fireUserEventTriggered(evt);
    }

    /**
     * The client's unidirectional streams (control, QPACK) get a last handler: Netty closes the connection
     * for their protocol errors but passes the error on, where it would be logged at WARN each time;
     * errors Netty does not handle (its QPACK encoder fails on some instructions) close the connection.
     */
    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (msg instanceof ByteBuf datagram) {
            datagramRead(datagram);
            return;
        }
        if (msg instanceof QuicStreamChannel stream && stream.type() == QuicStreamType.BIDIRECTIONAL) {
            stream.pipeline().addFirst(new ExtendedConnect(this));
        }
        if (msg instanceof QuicStreamChannel stream && stream.type() == QuicStreamType.UNIDIRECTIONAL) {
            stream.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                @Override
                public void exceptionCaught(ChannelHandlerContext streamCtx, Throwable cause) {
                    LOG.debugf("HTTP/3 unidirectional stream from %s: %s", peer, cause.toString());
                    if (!(cause instanceof Http3Exception)) close(Http3ErrorCode.H3_INTERNAL_ERROR);
                }
            });
        }
        ctx.fireChannelRead(msg);
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        closed = true;
        if (timer != null) timer.cancel(false);
        for (Http3Stream stream : new ArrayList<>(streams)) stream.connectionClosed();
        streams.clear();
        for (Http3WebTransport session : new ArrayList<>(sessions.values())) session.connectionClosed();
        sessions.clear();
        ctx.fireChannelInactive();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        // Protocol errors were answered by Netty's HTTP/3 handler with the connection's close.
        LOG.debugf("HTTP/3 connection from %s: %s", peer, cause.toString());
    }

    /** A request stream began; false when the connection no longer takes requests (the stream is refused). */
    boolean opened(Http3Stream stream, QuicStreamChannel channel) {
        lastActivity = System.nanoTime();
        lastStreamId = Math.max(lastStreamId, channel.streamId());
        if (closed) return false;
        streams.add(stream);
        return true;
    }

    void ended(Http3Stream stream) {
        lastActivity = System.nanoTime();
        if (streams.remove(stream) && draining && idle()) closeWhenStillIdle();
    }

    void touched() {
        lastActivity = System.nanoTime();
    }

    QuicChannel quic() {
        return quic;
    }

    /** A WebTransport session began on its CONNECT stream; false when the connection no longer takes any. */
    boolean sessionOpened(Http3WebTransport session) {
        lastActivity = System.nanoTime();
        long id = session.id();
        lastStreamId = Math.max(lastStreamId, id);
        if (closed || draining || sessions.size() >= Http3Setup.MAX_SESSIONS) return false;
        sessions.put(id, session);
        return true;
    }

    void sessionEnded(Http3WebTransport session) {
        lastActivity = System.nanoTime();
        if (sessions.remove(session.id()) != null && draining && idle()) closeWhenStillIdle();
    }

    /** Decides an extended CONNECT (a WebSocket's, a WebTransport session's) from this connection's peer ({@link RequestCore#decideUpgrade}). */
    void decideUpgrade(HttpRequestHead head, EventExecutor loop, RequestCore.UpgradeDecision then) {
        core.decideUpgrade(head, peer, peerIsTrustedProxy, loop, then);
    }

    // ---- what its request streams, WebSockets and WebTransport sessions ask of the connection ----

    InetSocketAddress peer() { return peer; }
    InetSocketAddress local() { return local; }
    HttpSettings settings() { return settings; }
    /** For the request streams' exchanges, which report to the request core themselves. */
    RequestCore core() { return core; }

    /** A HEADERS frame's fields as a request head, with room for the headers the options add to it. */
    RequestHead requestHead(Http3Headers fields) throws FieldListRequests.Malformed {
        return FieldListRequests.build(fields, fields.method(), fields.scheme(), fields.path(), fields.authority(), false,
                spareBytes, spareHeaders);
    }

    /** Hands a request to the request core, which believes its forwarding headers only from a trusted proxy. */
    void start(LoopExchange exchange, RequestHead head) {
        core.start(exchange, head, peerIsTrustedProxy);
    }

    /** {@link RequestCore#refused}, as HTTP/3. */
    void refused(HttpRequestHead head, int status, long startNanos, long bytes) {
        core.refused(head, MetricsLayout.HTTP_3, status, startNanos, bytes);
    }

    /** {@link RequestCore#upgradeAnswered}, as HTTP/3: a WebSocket's or a WebTransport session's handshake. */
    void upgradeAnswered(HttpRequestHead head, InetSocketAddress client, int status, long bytes, long startNanos) {
        core.upgradeAnswered(head, MetricsLayout.HTTP_3, "3", client, status, bytes, startNanos);
    }

    boolean takesWebSockets() {
        return webSockets != null;
    }

    /** The WebSocket side of a handshake on {@code stream}, which counts itself as a request in flight. */
    WebSocketConnection webSocket(HttpUpgrade http, QuicStreamChannel stream, HttpRequestHead head, String scheme, InetSocketAddress client) {
        return new WebSocketConnection(http, stream, head, "3", scheme, client, settings.webSocket(), connections);
    }

    /** Lets the application accept or deny the handshake of {@code webSocket}. */
    void startWebSocket(WebSocketConnection webSocket) {
        webSocket.begin(webSockets);
    }

    boolean takesWebTransport() {
        return webTransport != null;
    }

    /** Hands a session whose CONNECT may proceed to the application, which accepts or refuses it. */
    void startSession(Http3WebTransport session) {
        webTransport.dispatch(session);
    }

    /** A session handed to the application counts as a request in flight, which the drain waits for. */
    void countSession() {
        connections.requestStarted();
    }

    void uncountSession() {
        connections.requestEnded();
    }

    void datagramDropped() {
        core.metrics().webTransportDatagramDropped();
    }

    /** A WebSocket's CONNECT stream was handed to the application. */
    void webSocketOpened(QuicStreamChannel stream) {
        lastActivity = System.nanoTime();
        lastStreamId = Math.max(lastStreamId, stream.streamId());
        webSocketStreams.add(stream);
    }

    void webSocketEnded(QuicStreamChannel stream) {
        lastActivity = System.nanoTime();
        if (webSocketStreams.remove(stream) && draining && idle()) closeWhenStillIdle();
    }

    Http3WebTransport session(long connectStreamId) {
        return sessions.get(connectStreamId);
    }

    /** A QUIC datagram: HTTP datagrams (RFC 9297) name their session by a quarter stream ID; others are dropped. */
    private void datagramRead(ByteBuf datagram) {
        lastActivity = System.nanoTime();
        if (!Varint.readable(datagram)) {
            datagram.release();
            return;
        }
        long quarter = Varint.read(datagram);
        Http3WebTransport session = quarter <= Varint.MAX / 4 ? sessions.get(quarter * 4) : null;
        if (session == null) datagram.release();
        else session.datagram(datagram);
    }

    void sendDatagram(ByteBuf datagram) {
        // A datagram larger than the path takes fails its write: datagrams are unreliable, it is dropped.
        quic.writeAndFlush(datagram).addListener(future -> {
            if (!future.isSuccess()) LOG.debugf("HTTP/3 datagram to %s dropped: %s", peer, future.cause());
        });
    }

    /** A protocol error on a stream the codec no longer sees: the connection is closed with {@code code}. */
    void closeWith(Http3ErrorCode code) {
        close(code);
    }

    private boolean idle() {
        return streams.isEmpty() && sessions.isEmpty() && webSocketStreams.isEmpty();
    }

    private void startDraining() {
        if (draining || closed) return;
        draining = true;
        QuicStreamChannel control = Http3.getLocalControlStream(quic);
        if (control != null) {
            // Requests up to the last one seen are served; later ones the client retries elsewhere (RFC 9114 5.2).
            control.writeAndFlush(new DefaultHttp3GoAwayFrame(lastStreamId < 0 ? 0 : lastStreamId + 4));
        }
        for (Http3WebTransport session : new ArrayList<>(sessions.values())) session.drain();
        // Each WebSocket closes with 1001, in its own pipeline, as over the other transports.
        for (QuicStreamChannel webSocket : new ArrayList<>(webSocketStreams)) {
            webSocket.pipeline().fireUserEventTriggered(DrainEvent.INSTANCE);
        }
        if (idle()) closeWhenStillIdle();
    }

    private void closeWhenStillIdle() {
        ctx.executor().schedule(() -> {
            if (idle()) close(Http3ErrorCode.H3_NO_ERROR);
        }, DRAIN_IDLE_MILLIS, TimeUnit.MILLISECONDS);
    }

    private void close(Http3ErrorCode code) {
        if (closed) return;
        closed = true;
        quic.close(true, code.code(), Unpooled.EMPTY_BUFFER);
    }

    private void armTimer() {
        timer = ctx.executor().schedule(this::checkTimeouts, settings.timeoutCheckMillis(), TimeUnit.MILLISECONDS);
    }

    private void checkTimeouts() {
        if (closed) return;
        long now = System.nanoTime();
        if (settings.keepAliveMillis() > 0 && idle()
                && now - lastActivity >= TimeUnit.MILLISECONDS.toNanos(settings.keepAliveMillis())) {
            close(Http3ErrorCode.H3_NO_ERROR);
            return;
        }
        if (settings.requestTimeoutMillis() > 0) {
            long limit = TimeUnit.MILLISECONDS.toNanos(settings.requestTimeoutMillis());
            for (Http3Stream stream : new ArrayList<>(streams)) stream.checkStall(now, limit);
        }
        armTimer();
    }
}
