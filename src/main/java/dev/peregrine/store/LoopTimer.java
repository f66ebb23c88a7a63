package dev.peregrine.store;

import io.netty.channel.EventLoopGroup;
import io.netty.util.Timeout;
import io.netty.util.Timer;
import io.netty.util.TimerTask;
import io.netty.util.concurrent.ScheduledFuture;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Lettuce's timer (reconnect delays) on the worker's I/O threads: its default, a HashedWheelTimer, is a
 * thread of its own in every worker for a handful of tasks a minute.
 */
final class LoopTimer implements Timer {
    private final EventLoopGroup loops;
    private final Set<LoopTimeout> pending = ConcurrentHashMap.newKeySet();

    LoopTimer(EventLoopGroup loops) {
        this.loops = loops;
    }

    @Override
    public Timeout newTimeout(TimerTask task, long delay, TimeUnit unit) {
        LoopTimeout timeout = new LoopTimeout(task);
        pending.add(timeout);
        timeout.future = loops.next().schedule(timeout::expire, delay, unit);
        return timeout;
    }

    @Override
    public Set<Timeout> stop() {
        Set<Timeout> stopped = Set.copyOf(pending);
        for (LoopTimeout timeout : pending) timeout.cancel();
        return stopped;
    }

    private final class LoopTimeout implements Timeout {
        private final TimerTask task;
        private volatile ScheduledFuture<?> future;
        private volatile boolean expired;

        LoopTimeout(TimerTask task) {
            this.task = task;
        }

        private void expire() {
            pending.remove(this);
            expired = true;
            try {
                task.run(this);
            } catch (Exception e) {
                // As HashedWheelTimer does: a task's failure is its own, the timer goes on.
                Logger.getLogger(LoopTimer.class.getName()).log(Level.FINE, "a timer task failed", e);
            }
        }

        @Override public Timer timer() { return LoopTimer.this; }
        @Override public TimerTask task() { return task; }
        @Override public boolean isExpired() { return expired; }
        @Override public boolean isCancelled() { return future != null && future.isCancelled(); }

        @Override
        public boolean cancel() {
            pending.remove(this);
            ScheduledFuture<?> scheduled = future;
            return scheduled != null && scheduled.cancel(false);
        }
    }
}
