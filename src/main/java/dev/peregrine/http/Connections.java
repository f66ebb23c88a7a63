package dev.peregrine.http;

import dev.peregrine.metrics.RequestMetrics;
import io.netty.channel.Channel;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.util.AttributeKey;
import io.netty.util.concurrent.GlobalEventExecutor;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The live connections and requests of this worker: what --max-connections counts, and what a drain
 * waits for.
 *
 * <p>At the limit, a new connection does not simply lose to the ones already open: the connection that
 * has waited longest on its client (an unfinished request head, an idle keep-alive, an answer lingering
 * for the client to stop sending, a TLS handshake or preface not yet complete) is closed to make room.
 * A few thousand slow clients trickling header bytes (slowloris) would otherwise fill the limit and lock
 * every normal client out until --request-timeout cut them; this way they only ever displace each other.
 */
public final class Connections {
    private final int maxConnections;
    private final RequestMetrics metrics;
    private final ChannelGroup channels = new DefaultChannelGroup("connections", GlobalEventExecutor.INSTANCE);
    private final AtomicInteger open = new AtomicInteger();
    private final AtomicInteger inFlight = new AtomicInteger();
    private volatile boolean draining;
    private volatile long drainIdleGraceNanos;

    public Connections(int maxConnections, RequestMetrics metrics) {
        this.maxConnections = maxConnections;
        this.metrics = metrics;
    }

    /**
     * Registers a new connection; false when the server is full (the caller closes it). A connection
     * accepted just before the listener closed may only get here once the drain has begun: it is
     * served (its response closes it), since closing it unanswered would fail its first request.
     */
    public boolean admit(Channel channel) {
        if (open.incrementAndGet() > maxConnections && !reclaimOldestWaiting()) {
            open.decrementAndGet();
            return false;
        }
        // Until a protocol handler says otherwise (a TLS handshake, a preface being read), the connection waits on its client.
        channel.attr(WAITING).set(new Waiting(channel, System.nanoTime()));
        channels.add(channel);
        metrics.connectionOpened();
        channel.closeFuture().addListener(f -> {
            open.decrementAndGet();
            metrics.connectionClosed();
        });
        return true;
    }

    /**
     * Closes the connection that has waited longest on its client, to make room for a new one; false when
     * none waits. The scan costs a pass over the open connections, and runs only at the limit. The new
     * connection is admitted at once, so the count is over the limit by the victims not yet closed on their
     * own I/O threads.
     */
    private boolean reclaimOldestWaiting() {
        for (int attempt = 0; attempt < 4; attempt++) {
            Waiting oldest = null;
            long oldestSince = 0;
            for (Channel channel : channels) {
                Waiting waiting = channel.attr(WAITING).get();
                if (waiting == null) continue;
                long since = waiting.since();
                if (since != Waiting.BUSY && (oldest == null || since - oldestSince < 0)) {
                    oldest = waiting;
                    oldestSince = since;
                }
            }
            if (oldest == null) return false;
            if (oldest.reclaim(oldestSince)) return true;
        }
        return false;
    }

    /** Marks {@code channel} as waiting on its client since {@code nanos} (from now on a candidate to make room), or busy. */
    public static Waiting waiting(Channel channel) {
        Waiting waiting = channel.attr(WAITING).get();
        if (waiting == null) {
            waiting = new Waiting(channel, Waiting.BUSY);
            channel.attr(WAITING).set(waiting);
        }
        return waiting;
    }

    /** The connection serves a protocol whose waits are its own business (HTTP/2 streams): never reclaimed. */
    public static void neverReclaim(Channel channel) {
        channel.attr(WAITING).set(null);
    }

    private static final AttributeKey<Waiting> WAITING = AttributeKey.valueOf(Waiting.class, "waiting");

    /**
     * Since when a connection has waited on its client, written by its I/O thread and read by an admission on
     * another. A reclaim is claimed once, by compare-and-set, and carried out on the connection's own thread,
     * which checks that the connection still waits as it did when it was picked.
     */
    public static final class Waiting {
        public static final long BUSY = Long.MIN_VALUE;
        private static final VarHandle SINCE;
        static {
            try {
                SINCE = MethodHandles.lookup().findVarHandle(Waiting.class, "since", long.class);
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }
        private final Channel channel;
        private volatile long since;
        private Runnable onReclaim;

        Waiting(Channel channel, long since) {
            this.channel = channel;
            this.since = since;
        }

        long since() { return since; }

        /** Called on the connection's I/O thread: it waits on its client from {@code nanos} on. */
        public void since(long nanos) { SINCE.setRelease(this, nanos); }

        /** Called on the connection's I/O thread: it serves a request, and is no candidate. */
        public void busy() { SINCE.setRelease(this, BUSY); }

        /** What closes the connection when it is reclaimed (by default, a plain close). Set on its I/O thread. */
        public void onReclaim(Runnable action) { this.onReclaim = action; }

        private boolean reclaim(long expected) {
            if (!SINCE.compareAndSet(this, expected, BUSY)) return false;
            channel.eventLoop().execute(() -> {
                // Still as picked: a connection that began a request meanwhile has set its own mark since.
                if ((long) SINCE.getAcquire(this) != BUSY || !channel.isActive()) return;
                Runnable action = onReclaim;
                if (action != null) action.run();
                else channel.close();
            });
            return true;
        }
    }

    public void requestStarted() {
        inFlight.incrementAndGet();
        metrics.requestStarted();
    }

    public void requestEnded() {
        inFlight.decrementAndGet();
        metrics.requestEnded();
    }

    /** Where this worker's requests are counted. */
    public RequestMetrics metrics() { return metrics; }
    public int inFlight() { return inFlight.get(); }
    public int open() { return open.get(); }
    public boolean draining() { return draining; }
    /** How long a draining connection may stay idle: set before {@link #draining()} turns true. */
    public long drainIdleGraceNanos() { return drainIdleGraceNanos; }

    /**
     * From now on responses close their connections, and the handlers close a connection once it has
     * been idle for {@code idleGraceNanos}. No close of an idle HTTP/1.1 connection is free of a race: a
     * request the client sends as the close goes out fails. A connection just used is likely to carry
     * another request, so it gets at least that long to send one, which is then answered with
     * Connection: close.
     */
    public void startDraining(long idleGraceNanos) {
        drainIdleGraceNanos = idleGraceNanos;
        draining = true;
        channels.forEach(channel -> channel.pipeline().fireUserEventTriggered(DrainEvent.INSTANCE));
    }

    public void closeAll() {
        channels.close().awaitUninterruptibly();
    }

    /** Tells each connection that the server drains: close when idle, finish what is in flight. */
    public enum DrainEvent { INSTANCE }
}
