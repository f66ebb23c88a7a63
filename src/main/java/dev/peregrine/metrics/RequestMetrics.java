package dev.peregrine.metrics;

import java.lang.foreign.MemorySegment;

import static dev.peregrine.metrics.MetricsLayout.*;

/**
 * What the transport and the application adapters call to count: one worker's slot of the
 * {@link MetricsStore}. Each call is a few atomic adds into shared memory. {@link #OFF}, used when
 * metrics are not served, returns at its first instruction, so the hooks cost a field load and a branch.
 */
public final class RequestMetrics {
    public static final RequestMetrics OFF = new RequestMetrics(null, 0);

    /** Null when off. */
    private final MemorySegment segment;
    private final long base;

    RequestMetrics(MemorySegment segment, long base) {
        this.segment = segment;
        this.base = base;
    }

    public boolean enabled() {
        return segment != null;
    }

    /** A timestamp to hand back to {@link #pythonStarted} later; 0 when off, which spares reading the clock. */
    public long clock() {
        return segment == null ? 0 : System.nanoTime();
    }

    public void connectionOpened() {
        if (segment == null) return;
        add(CONNECTIONS_TOTAL, 1);
        add(CONNECTIONS_ACTIVE, 1);
    }

    public void connectionClosed() {
        if (segment == null) return;
        add(CONNECTIONS_ACTIVE, -1);
    }

    public void requestStarted() {
        if (segment == null) return;
        add(REQUESTS_IN_FLIGHT, 1);
    }

    public void requestEnded() {
        if (segment == null) return;
        add(REQUESTS_IN_FLIGHT, -1);
    }

    /**
     * A response was sent in full (by the application or by the server itself).
     *
     * @param method     the request method; null when the request was refused before its method was known
     * @param protocol   one of {@link MetricsLayout#HTTP_1_0} and the like
     * @param startNanos {@link System#nanoTime()} when the request head had arrived
     * @param bodyIn     request body bytes received
     * @param bytesOut   response bytes written for the body, framing included (all of a response the server
     *                   wrote itself to refuse a request: it is small and has no separate body count)
     */
    public void requestFinished(String method, int protocol, int status, long startNanos, long bodyIn, long bytesOut) {
        if (segment == null) return;
        long duration = System.nanoTime() - startNanos;
        add(REQUESTS + requestCell(methodIndex(method), statusClassIndex(status), protocol), 1);
        add(DURATION_BUCKETS + bucketIndex(DURATION_BOUNDS, duration), 1);
        add(DURATION_SUM_NANOS, duration);
        if (bodyIn != 0) add(REQUEST_BODY_BYTES, bodyIn);
        if (bytesOut != 0) add(RESPONSE_BODY_BYTES, bytesOut);
    }

    /** The rate limit answered a request with 429. */
    public void rateLimited() {
        if (segment == null) return;
        add(RATE_LIMITED, 1);
    }

    /** The rate limit let a request through without counting it: its table had no room the bound allowed. */
    public void rateLimitUntracked() {
        if (segment == null) return;
        add(RATE_LIMIT_UNTRACKED, 1);
    }

    /** The rate limit's table forgot a client whose budget was partly spent, to make room for another. */
    public void rateLimitForgotten() {
        if (segment == null) return;
        add(RATE_LIMIT_FORGOTTEN, 1);
    }

    /** An ACME order for the {@code name}-th --acme-domain ended; names from {@link MetricsLayout#ACME_NAMES} on are not counted. */
    public void acmeOrder(int name, boolean issued) {
        if (segment == null || name < 0 || name >= ACME_NAMES) return;
        add(ACME_ORDERS + 2 * name + (issued ? 0 : 1), 1);
    }

    /** The {@code name}-th --acme-domain is served with a certificate that expires at {@code epochSeconds} (0: none). */
    public void certificateExpires(int name, long epochSeconds) {
        if (segment == null || name < 0 || name >= ACME_NAMES) return;
        set(CERTIFICATE_EXPIRY + name, epochSeconds);
    }

    /** The response cache answered a request. */
    public void cacheHit() {
        if (segment == null) return;
        add(CACHE_HITS, 1);
    }

    /** The response cache passed a GET or HEAD to the application. */
    public void cacheMiss() {
        if (segment == null) return;
        add(CACHE_MISSES, 1);
    }

    /** The response cache stored an entry of {@code bytes}. */
    public void cacheStored(long bytes) {
        if (segment == null) return;
        add(CACHE_STORES, 1);
        add(CACHE_BYTES_STORED, bytes);
    }

    /** The response cache dropped an entry of {@code bytes}; {@code evicted}: to make room. */
    public void cacheReleased(long bytes, boolean evicted) {
        if (segment == null) return;
        if (evicted) add(CACHE_EVICTIONS, 1);
        add(CACHE_BYTES_RELEASED, bytes);
    }

    /** --compress compressed a response body (as it went out, or once for the response cache's coded variant). */
    public void compressed() {
        if (segment == null) return;
        add(COMPRESSED, 1);
    }

    /** A WebTransport datagram arrived while the session's bound of datagrams the application had not received was full. */
    public void webTransportDatagramDropped() {
        if (segment == null) return;
        add(WEBTRANSPORT_DATAGRAMS_DROPPED, 1);
    }

    /** An operation of --shared-store ({@link MetricsLayout#STORE_CONNECT} and the like) failed or timed out. */
    public void storeFailed(int operation) {
        if (segment == null) return;
        add(STORE_ERRORS + operation, 1);
    }

    /** --shared-store answered a command {@code nanos} after it was sent. */
    public void storeAnswered(long nanos) {
        if (segment == null) return;
        add(STORE_ROUND_TRIP_BUCKETS + bucketIndex(STORE_ROUND_TRIP_BOUNDS, nanos), 1);
        add(STORE_ROUND_TRIP_SUM_NANOS, nanos);
    }

    /** The Python thread starts a request that was ready for it at {@code readyNanos} (from {@link #clock}). */
    public void pythonStarted(long readyNanos) {
        if (segment == null) return;
        long wait = Math.max(0, System.nanoTime() - readyNanos);
        add(PYTHON_WAIT_BUCKETS + bucketIndex(PYTHON_WAIT_BOUNDS, wait), 1);
        add(PYTHON_WAIT_SUM_NANOS, wait);
    }

    private void add(int position, long delta) {
        MetricsStore.add(segment, base + (long) position * Long.BYTES, delta);
    }

    private void set(int position, long value) {
        MetricsStore.write(segment, base + (long) position * Long.BYTES, value);
    }
}
