package dev.peregrine.asgi;

import io.netty.util.internal.PlatformDependent;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.Queue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The hand-off from I/O threads to the asyncio loop: a queue of tasks plus an eventfd that the loop
 * watches with {@code add_reader}. The eventfd is written only by the producer that first sets the
 * wake-pending flag, so under load one wake-up carries many requests. The consumer clears the flag
 * after reading the eventfd and before draining the queue (with a full fence between): in that order
 * no task can be left in the queue without a wake-up on its way.
 */
final class LoopWakeup {
    private static final Linker LINKER = Linker.nativeLinker();
    private static final MethodHandle EVENTFD = libc("eventfd", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle WRITE = libc("write", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG));
    private static final MethodHandle READ = libc("read", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG));
    private static final int EFD_CLOEXEC = 0x80000, EFD_NONBLOCK = 0x800;

    private static MethodHandle libc(String name, FunctionDescriptor fd) {
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(), fd);
    }

    private final int fd;
    private final Queue<Runnable> tasks = PlatformDependent.newMpscQueue();
    private final AtomicBoolean wakePending = new AtomicBoolean();
    /** When the wake-up that is pending was sent (System.nanoTime). */
    private volatile long wokenAt;
    private final MemorySegment one = Arena.global().allocate(JAVA_LONG);
    private final MemorySegment sink = Arena.global().allocate(JAVA_LONG);

    LoopWakeup() {
        try {
            fd = (int) EVENTFD.invokeExact(0, EFD_CLOEXEC | EFD_NONBLOCK);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
        if (fd < 0) throw new IllegalStateException("eventfd failed");
        one.set(JAVA_LONG, 0, 1L);
    }

    int fd() { return fd; }

    /** Queues a task for the loop's thread; any thread. */
    void post(Runnable task) {
        tasks.offer(task);
        if (!wakePending.get() && wakePending.compareAndSet(false, true)) {
            wokenAt = System.nanoTime();
            try {
                long n = (long) WRITE.invokeExact(fd, one, 8L);
            } catch (Throwable t) {
                throw new IllegalStateException(t);
            }
        }
    }

    /**
     * How long work has been waiting for the loop to come back to its eventfd, or 0 when none waits. A
     * loop that runs well comes back within milliseconds; one that an application blocks (a synchronous
     * call in an {@code async def}) does not, and requests queue behind it. Any thread.
     */
    long stalledNanos() {
        if (!wakePending.get()) return 0;
        return Math.max(0, System.nanoTime() - wokenAt);
    }

    /** Runs every queued task; on the loop's thread, when the eventfd is readable. */
    void drain(Consumer<Runnable> runner) {
        try {
            long n = (long) READ.invokeExact(fd, sink, 8L);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
        wakePending.set(false);
        VarHandle.fullFence();
        Runnable task;
        while ((task = tasks.poll()) != null) runner.accept(task);
    }
}
