package dev.peregrine.http;

import dev.peregrine.metrics.RequestMetrics;

import io.netty.util.concurrent.EventExecutor;

import java.net.InetSocketAddress;
import java.time.Instant;
import java.util.concurrent.CompletableFuture;

/**
 * The one path every transport (HTTP/1.1, HTTP/2, HTTP/3) takes between a parsed request head and the
 * edge chain: the checks a head must pass, what the options add to the request (what a trusted proxy
 * says of the client, the request ID, the start time), the count of requests in flight, the hand-off,
 * and the bookkeeping of a request the server refuses. A transport parses and frames; everything a
 * request means to the server beyond its bytes happens here, once.
 */
public final class RequestCore {
    private final HttpSettings settings;
    private final Connections connections;
    private final Application chain;
    private final UpgradeGate upgrades;

    /** @param chain the edge chain, whose last stage is the application adapter */
    public RequestCore(HttpSettings settings, Connections connections, Application chain) {
        this(settings, connections, chain, UpgradeGate.OPEN);
    }

    /** @param upgrades what the edge chain says of WebSocket handshakes, which do not pass through it */
    public RequestCore(HttpSettings settings, Connections connections, Application chain, UpgradeGate upgrades) {
        this.settings = settings;
        this.connections = connections;
        this.chain = chain;
        this.upgrades = upgrades;
    }

    public HttpSettings settings() { return settings; }
    public Connections connections() { return connections; }
    public RequestMetrics metrics() { return connections.metrics(); }

    /** Bytes and headers the transport's parser leaves free at the end of a head for what the options add. */
    public int spareBytes() { return AddedHeaders.spareBytes(settings); }
    public int spareHeaders() { return AddedHeaders.spareHeaders(settings); }

    /** What a head that cannot be served gets, before any exchange is made; null when it may be served. */
    public Refusal check(HttpRequestHead head) {
        if (head.contentLength() > settings.maxBody()) return Refusal.of(413, "request body larger than --max-body");
        return null;
    }

    /** What a transport does with a WebSocket or WebTransport handshake once it is decided. */
    @FunctionalInterface
    public interface UpgradeDecision {
        /**
         * @param origin  the client and scheme the handshake is served as
         * @param refusal what it gets instead of an upgrade, or null when it may proceed
         */
        void decided(ForwardedHeaders.Origin origin, Refusal refusal);
    }

    /**
     * Decides a WebSocket or WebTransport handshake, the one decision every transport frames its own way:
     * whom it comes from (the connection's peer, or what a trusted proxy said of the client and scheme),
     * and whether the edge lets it through (the rate limit). {@code then} hears at once when the edge
     * knows now, else later on {@code loop} (the connection's), when the answer comes back from
     * --shared-store; a late answer may find the handshake abandoned, which {@code then} looks for first.
     */
    public void decideUpgrade(HttpRequestHead head, InetSocketAddress peer, boolean peerIsTrustedProxy, EventExecutor loop,
                              UpgradeDecision then) {
        ForwardedHeaders.Origin origin = upgradeOrigin(head, peer, peerIsTrustedProxy);
        CompletableFuture<Refusal> answer = upgrades.check(head, origin.client());
        if (answer.isDone()) {
            then.decided(origin, answer.isCompletedExceptionally() ? null : answer.join());
            return;
        }
        answer.whenComplete((refusal, failure) -> loop.execute(() -> then.decided(origin, failure == null ? refusal : null)));
    }

    private ForwardedHeaders.Origin upgradeOrigin(HttpRequestHead head, InetSocketAddress peer, boolean peerIsTrustedProxy) {
        InetSocketAddress client = peer;
        String scheme = settings.scheme();
        if (peerIsTrustedProxy) {
            ForwardedHeaders.Origin origin = ForwardedHeaders.resolve(head, settings.trustedProxies());
            if (origin != null && origin.client() != null) client = origin.client();
            if (origin != null && origin.scheme() != null) scheme = origin.scheme();
        }
        return new ForwardedHeaders.Origin(client, scheme);
    }

    /**
     * Records the HTTP answer to a WebSocket handshake (the switch to WebSocket, or a denial), which no
     * exchange records: in the metrics and the access log. {@code bytes}: what was written.
     */
    public void upgradeAnswered(HttpRequestHead head, int protocol, String httpVersion, InetSocketAddress client, int status,
                                long bytes, long startNanos) {
        connections.metrics().requestFinished(head.method(), protocol, status, startNanos, 0, bytes);
        if (settings.accessLog() != null) settings.accessLog().log(head, httpVersion, client, status, bytes, startNanos);
    }

    /**
     * Settles what the options change about the request, counts it as in flight, and hands it to the
     * edge chain; on the connection's I/O thread. {@code peerIsTrustedProxy}: decided once per
     * connection, so that a direct client pays nothing for --forwarded-allow-ips.
     */
    public void start(LoopExchange exchange, RequestHead head, boolean peerIsTrustedProxy) {
        if (peerIsTrustedProxy) {
            ForwardedHeaders.Origin origin = ForwardedHeaders.resolve(head, settings.trustedProxies());
            if (origin != null) exchange.forwardedAs(origin.client(), origin.scheme());
        }
        if (settings.requestId()) exchange.echoRequestId(AddedHeaders.requestId(head));
        if (settings.requestStartHeader()) AddedHeaders.requestStart(head, epochMicros(exchange.startNanos()), peerIsTrustedProxy);
        connections.requestStarted();
        chain.dispatch(exchange);
    }

    /**
     * Records a refused request once its answer is written: {@code head} is null when it could not be
     * parsed, {@code startNanos} is when its head began to arrive, {@code bytes} what was written.
     */
    public void refused(HttpRequestHead head, int protocol, int status, long startNanos, long bytes) {
        connections.metrics().requestFinished(head == null ? null : head.method(), protocol, status, startNanos, 0, bytes);
    }

    /** The wall-clock time of {@code nanos} (a {@link System#nanoTime} reading), in microseconds since the epoch. */
    static long epochMicros(long nanos) {
        Instant now = Instant.now();
        long nowMicros = now.getEpochSecond() * 1_000_000 + now.getNano() / 1000;
        return nowMicros - Math.max(0, (System.nanoTime() - nanos) / 1000);
    }
}
