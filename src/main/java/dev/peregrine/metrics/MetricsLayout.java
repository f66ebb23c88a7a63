package dev.peregrine.metrics;

import java.util.concurrent.TimeUnit;

/**
 * Where each number lives in the shared metrics area, and how a request's method, status, protocol
 * and durations map to a counter. The area is a header followed by slots of one fixed layout; every
 * position below counts in longs from the start of the header or of a slot.
 *
 * <p>The layout is the contract between processes that map one file, possibly built from different
 * versions during an upgrade: change any position and {@link #VERSION} must change with it.
 */
public final class MetricsLayout {
    private MetricsLayout() {}

    /** "PEREGRIN" in ASCII: a file that does not start with it is not a metrics area. */
    static final long MAGIC = 0x50455245_4752494EL;
    static final long VERSION = 8;

    /** Longs in a cache line: sections written by different threads start on a line of their own. */
    private static final int LINE = 8;

    public static final String[] METHODS = {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "other"};
    public static final String[] STATUS_CLASSES = {"1xx", "2xx", "3xx", "4xx", "5xx"};
    public static final String[] PROTOCOLS = {"HTTP/1.0", "HTTP/1.1", "HTTP/2", "HTTP/3"};
    public static final int HTTP_1_0 = 0;
    public static final int HTTP_1_1 = 1;
    public static final int HTTP_2 = 2;
    public static final int HTTP_3 = 3;
    static final int OTHER_METHOD = METHODS.length - 1;
    static final int REQUEST_CELLS = METHODS.length * STATUS_CLASSES.length * PROTOCOLS.length;

    /** Upper bounds of the request duration buckets: from a cached answer to a slow report. */
    static final long[] DURATION_BOUNDS = micros(500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
            500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000, 30_000_000, 60_000_000);
    /** Upper bounds of the shared store's round-trip buckets: a store on the same host or zone answers well under a millisecond. */
    static final long[] STORE_ROUND_TRIP_BOUNDS = micros(100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000);
    /** What the request path asks of --shared-store, for its error counts: the index is the operation's cell. */
    public static final String[] STORE_OPERATIONS = {"connect", "rate_limit", "cache_lookup", "cache_store", "cache_invalidate", "acme"};
    public static final int STORE_CONNECT = 0;
    public static final int STORE_RATE_LIMIT = 1;
    /** A response cache miss asking the store (and claiming the key's fill), and a fill's lock given back. */
    public static final int STORE_CACHE_LOOKUP = 2;
    public static final int STORE_CACHE_STORE = 3;
    public static final int STORE_CACHE_INVALIDATE = 4;
    /** The ACME account, certificates, order locks and challenges (--acme-domain with --shared-store). */
    public static final int STORE_ACME = 5;
    /** Cells kept for operations to come, so that adding one leaves the layout as it is. */
    private static final int STORE_OPERATION_CELLS = 8;
    /** Upper bounds of the Python-thread wait buckets: microseconds when idle, milliseconds and more when saturated. */
    static final long[] PYTHON_WAIT_BOUNDS = micros(10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000,
            50_000, 100_000, 250_000, 500_000, 1_000_000);

    // ---- the header ----
    static final int HEADER_MAGIC = 0;
    static final int HEADER_VERSION = 1;
    static final int HEADER_SLOTS = 2;
    static final int HEADER_SLOT_LONGS = 3;
    /** Written by the supervisor only. */
    static final int WORKER_STARTS = 4;
    static final int WORKER_EXITS = 5;
    static final int WORKER_RESTARTS = 6;
    static final int HEADER_LONGS = LINE;

    // ---- one slot: counters, cumulative over every process that used the slot ----
    static final int REQUESTS = 0;
    static final int DURATION_BUCKETS = REQUESTS + REQUEST_CELLS;
    static final int DURATION_SUM_NANOS = DURATION_BUCKETS + DURATION_BOUNDS.length + 1;
    static final int REQUEST_BODY_BYTES = DURATION_SUM_NANOS + 1;
    static final int RESPONSE_BODY_BYTES = REQUEST_BODY_BYTES + 1;
    static final int CONNECTIONS_TOTAL = RESPONSE_BODY_BYTES + 1;
    // Gauges belong to the live process: the supervisor zeroes them when it exits.
    static final int CONNECTIONS_ACTIVE = CONNECTIONS_TOTAL + 1;
    static final int REQUESTS_IN_FLIGHT = CONNECTIONS_ACTIVE + 1;
    /** Requests the rate limit answered with 429. */
    static final int RATE_LIMITED = REQUESTS_IN_FLIGHT + 1;
    /** Requests let through uncounted: every table entry their key may use held a client being limited. */
    static final int RATE_LIMIT_UNTRACKED = RATE_LIMITED + 1;
    /** Clients with part of their budget spent that the table forgot to make room (they start afresh). */
    static final int RATE_LIMIT_FORGOTTEN = RATE_LIMIT_UNTRACKED + 1;
    /** GET and HEAD requests the response cache answered, and those it passed to the application. */
    static final int CACHE_HITS = RATE_LIMIT_FORGOTTEN + 1;
    static final int CACHE_MISSES = CACHE_HITS + 1;
    /** Responses the cache stored, and entries it dropped for room (not for expiry or invalidation). */
    static final int CACHE_STORES = CACHE_MISSES + 1;
    static final int CACHE_EVICTIONS = CACHE_STORES + 1;
    /** Bytes of entries stored and of entries dropped (evicted, expired, invalidated): the difference is what the cache holds. */
    static final int CACHE_BYTES_STORED = CACHE_EVICTIONS + 1;
    static final int CACHE_BYTES_RELEASED = CACHE_BYTES_STORED + 1;
    /** Response bodies --compress compressed: a cache hit sent from a stored coded variant is not one. */
    static final int COMPRESSED = CACHE_BYTES_RELEASED + 1;
    /** WebTransport datagrams dropped because the application had not received the ones before them. */
    static final int WEBTRANSPORT_DATAGRAMS_DROPPED = COMPRESSED + 1;
    /** Operations on --shared-store that failed or timed out, by {@link #STORE_OPERATIONS}. */
    static final int STORE_ERRORS = WEBTRANSPORT_DATAGRAMS_DROPPED + 1;
    static final int STORE_ROUND_TRIP_BUCKETS = STORE_ERRORS + STORE_OPERATION_CELLS;
    static final int STORE_ROUND_TRIP_SUM_NANOS = STORE_ROUND_TRIP_BUCKETS + STORE_ROUND_TRIP_BOUNDS.length + 1;
    // Written by the Python thread(s) rather than the I/O thread: a cache line of their own.
    static final int PYTHON_WAIT_BUCKETS = lineAfter(STORE_ROUND_TRIP_SUM_NANOS);
    static final int PYTHON_WAIT_SUM_NANOS = PYTHON_WAIT_BUCKETS + PYTHON_WAIT_BOUNDS.length + 1;
    /** The worker (position, numbered from 1) the slot's process serves as; 0 while the slot was never assigned. */
    static final int WORKER_ID = lineAfter(PYTHON_WAIT_SUM_NANOS);
    /**
     * ACME orders by name (the position of the --acme-domain, the same in every process) and outcome:
     * issued at {@code ACME_ORDERS + 2 * name}, failed one further. Written by the ordering thread.
     */
    static final int ACME_ORDERS = lineAfter(WORKER_ID);
    /** The names whose orders are counted: the first of --acme-domain, as a slot's layout is fixed. */
    public static final int ACME_NAMES = 32;
    /**
     * When the certificate each ACME name is served with expires (Unix seconds, 0 while it has none), at
     * {@code CERTIFICATE_EXPIRY + name}: a gauge of the live process, written by its certificate manager.
     */
    static final int CERTIFICATE_EXPIRY = lineAfter(ACME_ORDERS + 2 * ACME_NAMES - 1);
    static final int SLOT_LONGS = lineAfter(CERTIFICATE_EXPIRY + ACME_NAMES - 1);

    static final int[] GAUGES = gauges();

    private static int[] gauges() {
        int[] gauges = new int[2 + ACME_NAMES];
        gauges[0] = CONNECTIONS_ACTIVE;
        gauges[1] = REQUESTS_IN_FLIGHT;
        for (int name = 0; name < ACME_NAMES; name++) gauges[2 + name] = CERTIFICATE_EXPIRY + name;
        return gauges;
    }

    static long byteSize(int slots) {
        return (HEADER_LONGS + (long) slots * SLOT_LONGS) * Long.BYTES;
    }

    /** Byte offset of a slot's first long. */
    static long slotBase(int slot) {
        return (HEADER_LONGS + (long) slot * SLOT_LONGS) * Long.BYTES;
    }

    static int methodIndex(String method) {
        if (method == null) return OTHER_METHOD;
        return switch (method) {
            case "GET" -> 0;
            case "HEAD" -> 1;
            case "POST" -> 2;
            case "PUT" -> 3;
            case "DELETE" -> 4;
            case "PATCH" -> 5;
            case "OPTIONS" -> 6;
            default -> OTHER_METHOD;
        };
    }

    /** 1xx to 5xx; a status outside 100..599 (which the server never sends) counts in the nearest class. */
    static int statusClassIndex(int status) {
        return Math.clamp(status / 100 - 1, 0, STATUS_CLASSES.length - 1);
    }

    static int requestCell(int method, int statusClass, int protocol) {
        return (method * STATUS_CLASSES.length + statusClass) * PROTOCOLS.length + protocol;
    }

    /**
     * The bucket a duration falls in: the first whose upper bound it does not exceed (Prometheus' "le"),
     * or the last, +Inf. Linear: most requests are fast and stop in the first few buckets.
     */
    static int bucketIndex(long[] bounds, long nanos) {
        for (int i = 0; i < bounds.length; i++) {
            if (nanos <= bounds[i]) return i;
        }
        return bounds.length;
    }

    /** Upper bounds in seconds, +Inf last, as a Prometheus histogram states them. */
    static double[] boundsInSeconds(long[] bounds) {
        double[] seconds = new double[bounds.length + 1];
        for (int i = 0; i < bounds.length; i++) seconds[i] = bounds[i] / 1e9;
        seconds[bounds.length] = Double.POSITIVE_INFINITY;
        return seconds;
    }

    private static long[] micros(long... values) {
        long[] nanos = new long[values.length];
        for (int i = 0; i < values.length; i++) nanos[i] = TimeUnit.MICROSECONDS.toNanos(values[i]);
        return nanos;
    }

    private static int lineAfter(int position) {
        return (position / LINE + 1) * LINE;
    }
}
