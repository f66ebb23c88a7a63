package dev.peregrine.wsgi;

import dev.peregrine.http.WakeupBatch;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.locks.LockSupport;

/**
 * Bounds how long a finished response waits in a WSGI thread's {@link WakeupBatch}. A WSGI thread
 * flushes its batch when it runs out of requests or holds 32 responses, but it may go on to a request
 * whose application blocks (a slow query, a sleep) while earlier responses, already made, wait in the
 * batch. While some batch holds responses, this thread looks every millisecond and wakes the I/O
 * threads for any that waited that long; with none, it parks until a WSGI thread starts a request with
 * responses still waiting ({@link #arm}), so an idle server costs nothing.
 */
final class BatchWatchdog implements Runnable {
    static final long PERIOD_NANOS = 1_000_000;
    /** Empty looks before it parks for good: a server under load keeps it polling rather than unparking it. */
    private static final int IDLE_LOOKS = 50;

    private final List<WakeupBatch> batches = new CopyOnWriteArrayList<>();
    private volatile Thread thread;
    /** Parked with no deadline: the next {@link #arm} unparks it. */
    private volatile boolean sleeping;
    private volatile boolean stopped;

    void watch(WakeupBatch batch) {
        batches.add(batch);
    }

    void start() {
        Thread watchdog = new Thread(this, "wsgi-batch-watchdog");
        watchdog.setDaemon(true);
        thread = watchdog;
        watchdog.start();
    }

    void stop() {
        stopped = true;
        LockSupport.unpark(thread);
    }

    /** A WSGI thread starts a request while its batch holds responses (after {@code waitingSince} is set). */
    void arm() {
        if (sleeping) LockSupport.unpark(thread);
    }

    @Override
    public void run() {
        int idle = 0;
        while (!stopped) {
            idle = look() ? 0 : idle + 1;
            if (idle < IDLE_LOOKS) {
                LockSupport.parkNanos(this, PERIOD_NANOS);
                continue;
            }
            sleeping = true;
            // Looked at again after saying so: a WSGI thread that armed before seeing it finds a batch waiting here.
            if (!look() && !stopped) LockSupport.park(this);
            sleeping = false;
            idle = 0;
        }
    }

    /** Wakes for every batch that waited a period; true if any holds responses. */
    private boolean look() {
        boolean waiting = false;
        long now = System.nanoTime();
        for (WakeupBatch batch : batches) {
            long since = batch.waitingSince();
            if (since == 0) continue;
            waiting = true;
            if (now - since >= PERIOD_NANOS) batch.wakeStale(since);
        }
        return waiting;
    }
}
