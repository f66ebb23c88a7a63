package dev.peregrine.http;

import dev.peregrine.ops.metrics.RequestMetrics;
import io.netty.channel.Channel;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.util.concurrent.GlobalEventExecutor;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * The live connections and requests of this worker: what --max-connections counts, and what a drain
 * waits for.
 */
public final class Connections {
    private final int maxConnections;
    private final RequestMetrics metrics;
    private final ChannelGroup channels = new DefaultChannelGroup("connections", GlobalEventExecutor.INSTANCE);
    private final AtomicInteger open = new AtomicInteger();
    private final AtomicInteger inFlight = new AtomicInteger();
    private volatile boolean draining;

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
        if (open.incrementAndGet() > maxConnections) {
            open.decrementAndGet();
            return false;
        }
        channels.add(channel);
        metrics.connectionOpened();
        channel.closeFuture().addListener(f -> {
            open.decrementAndGet();
            metrics.connectionClosed();
        });
        return true;
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

    /** From now on responses close their connections and idle ones are closed by their handlers. */
    public void startDraining() {
        draining = true;
        channels.forEach(channel -> channel.pipeline().fireUserEventTriggered(DrainEvent.INSTANCE));
    }

    public void closeAll() {
        channels.close().awaitUninterruptibly();
    }

    /** Tells each connection that the server drains: close when idle, finish what is in flight. */
    public enum DrainEvent { INSTANCE }
}
