package dev.peregrine.server;

import io.netty.channel.SelectStrategy;
import io.netty.channel.SelectStrategyFactory;
import io.netty.channel.SingleThreadEventLoop;
import io.netty.util.IntSupplier;
import io.netty.util.internal.ThreadExecutorMap;

/**
 * Lets an I/O thread that serves one or two connections keep polling for up to 50 µs before it sleeps,
 * for as long as that keeps paying off.
 *
 * <p>Why: work an I/O thread hands to the Python thread (a request, a WebSocket message) often comes
 * back within tens of microseconds. A sleeping I/O thread must then be woken: an eventfd write by the
 * Python thread, an interrupt between processors, a context switch, each dear on these virtual
 * machines. A single-threaded server such as uvicorn never pays that, and on one connection taking
 * turns with the server it was the difference: a WebSocket echo on one connection went from 0.70x
 * uvicorn's messages per second to 0.96x (keep-alive requests one at a time, whose answer takes the
 * Python thread longer, moved within the noise). While this thread polls, Netty counts it as awake,
 * so a task queued for it costs its producer no system call either.
 *
 * <p>A poll that ends with nothing found wastes a core that the application or its database wanted:
 * when the answer is a database round trip away the poll always loses. So the thread polls only while
 * most recent polls found work, and otherwise tries one poll every {@link #PROBE_EVERY} sleeps to notice
 * when the traffic changes. Netty's own busy-wait mode ({@link SelectStrategy#BUSY_WAIT}) spins without
 * a bound, which is why this is not it.
 */
final class PollBeforeSleep implements SelectStrategy {
    /** How long one poll lasts at most: a Python round trip of a small application fits within it. */
    static final long POLL_NANOS = 50_000;
    /** How many task checks between two checks of the sockets (a system call each). */
    private static final int TASK_CHECKS_PER_SOCKET_CHECK = 8;
    private static final int MAX_SCORE = 8, SPIN_FROM = 3, PROBE_EVERY = 32;
    /**
     * Beyond a few connections the thread does not poll. Their requests reach the Python thread and come
     * back in batches, one wake-up for many, and a poll would take a core from the other workers' Python
     * threads (or the load generator, here): at 64 connections on FastAPI's hello-world it cost up to 30 %.
     */
    static final int MAX_CHANNELS = 2;

    /** The strategy of each I/O thread; {@code cores}, when not null, looks at each turn whether the threads share a core. */
    static SelectStrategyFactory factory(CoreSharing cores) {
        return () -> new PollBeforeSleep(cores);
    }

    private final CoreSharing cores;

    private SingleThreadEventLoop self;
    /** Recent polls that found work count up, those that did not halve it. */
    private int score = MAX_SCORE;
    private int sleepsSinceProbe;

    private PollBeforeSleep(CoreSharing cores) {
        this.cores = cores;
    }

    @Override
    public int calculateStrategy(IntSupplier selectSupplier, boolean hasTasks) throws Exception {
        if (cores != null) cores.update();
        if (hasTasks) return selectSupplier.get();
        if (self == null) {
            if (!(ThreadExecutorMap.currentExecutor() instanceof SingleThreadEventLoop loop)) return SELECT;
            self = loop;
        }
        if (self.registeredChannels() > MAX_CHANNELS) return SELECT;
        if (score < SPIN_FROM && ++sleepsSinceProbe < PROBE_EVERY) return SELECT;
        sleepsSinceProbe = 0;
        long deadline = System.nanoTime() + POLL_NANOS;
        int checks = 0;
        do {
            if (self.pendingTasks() > 0) return found(0);
            if (++checks % TASK_CHECKS_PER_SOCKET_CHECK == 0) {
                int ready = selectSupplier.get();
                if (ready > 0) return found(ready);
            }
            Thread.onSpinWait();
        } while (System.nanoTime() < deadline);
        score >>= 1;
        return SELECT;
    }

    /** A poll that found work: the loop goes on to the sockets that are ready (0: only tasks). */
    private int found(int ready) {
        if (score < MAX_SCORE) score++;
        return ready;
    }
}
