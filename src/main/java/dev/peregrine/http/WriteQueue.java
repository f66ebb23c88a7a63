package dev.peregrine.http;

import io.netty.util.concurrent.EventExecutor;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

/**
 * What is handed from the application's thread to a connection's I/O thread for writing, shared by the
 * HTTP exchanges and the WebSocket connection: the hand-over itself (at once, or in the batch the
 * Python thread flushes once per turn of its loop), the count of bytes handed over but not yet written
 * against a high-water mark, and the tasks that wait until the connection takes more.
 */
public final class WriteQueue {
    /** Above this much data handed over but not yet written, a sender is told to wait. */
    public static final long HIGH_WATER = 256 * 1024;

    private final EventExecutor executor;
    private final AtomicLong queued = new AtomicLong();
    /** Touched on the I/O thread only. */
    private List<Runnable> writableTasks;

    public WriteQueue(EventExecutor executor) {
        this.executor = executor;
    }

    /** Runs {@code task} on the I/O thread: now if already there, else in {@code batch} when given (its flush wakes the thread). */
    public void run(Runnable task, WakeupBatch batch) {
        run(task, 0, batch);
    }

    /** {@link #run(Runnable, WakeupBatch)} for a task that writes {@code bytes} of response data. */
    public void run(Runnable task, int bytes, WakeupBatch batch) {
        if (executor.inEventLoop()) task.run();
        else if (batch != null) batch.submit(executor, task, bytes);
        else executor.execute(task);
    }

    /** {@code bytes} are handed over: they count until {@link #written}. Any thread. */
    public void queued(int bytes) {
        queued.addAndGet(bytes);
    }

    /** {@code bytes} handed over have reached the connection. */
    public void written(int bytes) {
        queued.addAndGet(-bytes);
    }

    /** Whether what is handed over and not yet written is under the high-water mark. Any thread. */
    public boolean fewQueued() {
        return queued.get() < HIGH_WATER;
    }

    /**
     * Runs {@code task} on the I/O thread once {@code takesMore} says so, at once if it already does;
     * until then it waits for {@link #runWritableTasks}. Any thread.
     */
    public void whenWritable(Runnable task, BooleanSupplier takesMore) {
        executor.execute(() -> {
            if (takesMore.getAsBoolean()) {
                task.run();
            } else {
                if (writableTasks == null) writableTasks = new ArrayList<>(1);
                writableTasks.add(task);
            }
        });
    }

    /** Runs the tasks waiting for the connection to take more: when it does, or when it is gone. I/O thread. */
    public void runWritableTasks() {
        List<Runnable> tasks = writableTasks;
        writableTasks = null;
        if (tasks != null) tasks.forEach(Runnable::run);
    }
}
