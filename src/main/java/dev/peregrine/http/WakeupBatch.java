package dev.peregrine.http;

import io.netty.util.concurrent.AbstractEventExecutor;
import io.netty.util.concurrent.EventExecutor;

import java.util.ArrayList;
import java.util.List;

/**
 * Lets an application thread hand many responses to the I/O threads and wake each of them once.
 *
 * <p>Waking a sleeping I/O thread is a system call plus, on a virtual machine, an interrupt between
 * processors: several microseconds that the Python thread would pay for every response. Responses sent
 * with a batch are queued without a wake-up ({@code lazyExecute}); {@link #flush} then wakes each I/O
 * thread that got work, once. Used by one application thread; {@code onFirst} runs when the batch
 * goes from empty to non-empty, so that the owner can arrange the flush (the asyncio loop schedules
 * it for its next turn).
 */
public final class WakeupBatch {
    private static final Runnable NOTHING = () -> {};

    private final List<EventExecutor> executors = new ArrayList<>(2);
    private final Runnable onFirst;

    public WakeupBatch(Runnable onFirst) {
        this.onFirst = onFirst;
    }

    /** Queues {@code task} on {@code executor} without waking it; it runs by the next flush at the latest. */
    public void submit(EventExecutor executor, Runnable task) {
        if (executor instanceof AbstractEventExecutor lazy) lazy.lazyExecute(task);
        else executor.execute(task);
        for (int i = 0; i < executors.size(); i++) {
            if (executors.get(i) == executor) return;
        }
        executors.add(executor);
        if (executors.size() == 1) onFirst.run();
    }

    public void flush() {
        for (int i = 0; i < executors.size(); i++) executors.get(i).execute(NOTHING);
        executors.clear();
    }
}
