package dev.peregrine.asgi;

import dev.peregrine.http.WakeupBatch;
import dev.peregrine.python.BorrowedBytes;
import dev.peregrine.python.Py;
import dev.peregrine.python.PyRef;
import dev.peregrine.python.PythonException;
import org.jboss.logging.Logger;

import java.lang.foreign.MemorySegment;
import java.util.function.Consumer;

/**
 * One asyncio loop as the calls it runs see it. Work reaches the loop from I/O threads through a
 * {@link LoopWakeup}; the responses of one turn go back in one {@link WakeupBatch}; large bodies are lent to
 * the I/O threads ({@link BorrowedBytes}); and the application awaits futures made here. {@link AsgiApplication}
 * owns the thread that runs the loop and the table of its calls; an {@link AsgiCall} asks only this class.
 * Python thread only, except {@link #post}, {@link #fd} and {@link #stalledNanos}.
 */
final class AsgiLoop {
    private static final Logger LOG = Logger.getLogger("peregrine");

    private final LoopWakeup wakeup = new LoopWakeup();
    private final BorrowedBytes borrowed = new BorrowedBytes(() -> wakeup.post(this::drainBorrowed));
    /** The calls running on this loop: how many decides whether a response's last part waits for the batch. */
    private final RequestTable calls;
    /** Responses of one turn of the loop go to the I/O thread with one wake-up; flushed on the loop's next turn. */
    private final WakeupBatch batch = new WakeupBatch(this::scheduleFlush);
    private boolean flushScheduled;

    // Set on the Python thread by prepare().
    private MemorySegment glueResolve;
    private MemorySegment setResult;
    private MemorySegment flushFunction;
    // The running loop's own methods, looked up on first use (the loop does not exist at prepare()).
    private MemorySegment createFuture;
    private MemorySegment createTask;
    private MemorySegment callSoon;
    private MemorySegment completed;

    AsgiLoop(RequestTable calls) {
        this.calls = calls;
    }

    /** Looks up what the futures and the flush need; with the GIL held, {@code glue} being {@code peregrine._asgi}. */
    void prepare(MemorySegment glue) {
        glueResolve = Py.getAttr(glue, "resolve");
        try (PyRef asyncio = PyRef.own(Py.importModule("asyncio"));
             PyRef futureType = PyRef.own(Py.getAttr(asyncio.object(), "Future"));
             PyRef nativeModule = PyRef.own(Py.importModule("peregrine._native"))) {
            setResult = Py.getAttr(futureType.object(), "set_result");
            flushFunction = Py.getAttr(nativeModule.object(), "asgi_flush");
        }
    }

    // ---- any thread ----

    /** Queues a task for the loop's thread. */
    void post(Runnable task) {
        wakeup.post(task);
    }

    /** The eventfd the loop watches for posted tasks. */
    int fd() {
        return wakeup.fd();
    }

    /** How long a posted task has waited for the loop to come back, or 0 when none waits. */
    long stalledNanos() {
        return wakeup.stalledNanos();
    }

    // ---- on the Python thread ----

    /** The loop was woken: runs the posted tasks with {@code runner}. */
    void wake(Consumer<Runnable> runner) {
        borrowed.drain();
        wakeup.drain(runner);
    }

    /** The loop's next turn after responses were batched: hands them to the I/O threads. */
    void flush() {
        flushScheduled = false;
        batch.flush();
        borrowed.drain();
    }

    WakeupBatch batch() {
        return batch;
    }

    /**
     * The batch for a part of a response, or null to hand it over at once. When the part ends the response
     * (or is a WebSocket message), its call is the only one running and nothing waits in the batch, the
     * flush would wake the I/O thread for this part alone: handing it over now costs the same one wake-up,
     * and lets the I/O thread write while the application still unwinds (middleware, the end of its task,
     * its next {@code receive()}) instead of a turn of the loop later. Otherwise it joins the batch, so
     * that a busy turn still wakes the I/O thread once. Whatever a call hands over later in the same turn
     * goes after it, in the batch or at once, so its order holds.
     */
    WakeupBatch batchFor(boolean lastPart) {
        return lastPart && calls.size() == 1 && batch.isEmpty() ? null : batch;
    }

    /** Lends large response bodies to the I/O threads instead of copying them (see {@link BorrowedBytes}). */
    BorrowedBytes borrowed() {
        return borrowed;
    }

    private void drainBorrowed() {
        borrowed.drain();
    }

    private void scheduleFlush() {
        if (flushScheduled) return;
        flushScheduled = true;
        lookUpLoopMethods();
        MemorySegment handle = Py.callRaw(callSoon, flushFunction);
        if (handle.address() == 0) {
            LOG.error("Could not schedule the response flush: " + PythonException.fetch().getMessage());
            flushScheduled = false;
            batch.flush();
        } else {
            Py.decRef(handle);
        }
    }

    /** Runs {@code coroutine} as a task of the loop: a new reference, or NULL with the Python error set. */
    MemorySegment createTask(MemorySegment coroutine) {
        lookUpLoopMethods();
        return Py.callRaw(createTask, coroutine);
    }

    MemorySegment newFuture() {
        lookUpLoopMethods();
        return Py.call(createFuture);
    }

    /** A new future already holding {@code value} (stolen): what receive() returns when it can answer at once. */
    MemorySegment completedFuture(MemorySegment value) {
        MemorySegment future = newFuture();
        MemorySegment r = Py.callRaw(setResult, future, value);
        Py.decRef(value);
        if (r.address() == 0) {
            Py.decRef(future);
            throw PythonException.fetch();
        }
        Py.decRef(r);
        return future;
    }

    /** One future, done with None, that every send() returns when it need not wait: awaiting it returns at once. */
    MemorySegment completed() {
        if (completed == null) completed = completedFuture(Py.newRef(Py.None));
        return Py.newRef(completed);
    }

    /** Completes a future handed to the application earlier; steals our reference to it and to value. */
    void resolve(MemorySegment future, MemorySegment value) {
        MemorySegment result = Py.callRaw(glueResolve, future, value);
        Py.decRef(future);
        Py.decRef(value);
        if (result.address() == 0) {
            LOG.error("Could not resume an ASGI request: " + PythonException.fetch().getMessage());
        } else {
            Py.decRef(result);
        }
    }

    /** The running loop's create_future, create_task and call_soon, looked up on first use. */
    private void lookUpLoopMethods() {
        if (createFuture != null) return;
        try (PyRef asyncio = PyRef.own(Py.importModule("asyncio"));
             PyRef getLoop = PyRef.own(Py.getAttr(asyncio.object(), "get_running_loop"));
             PyRef loop = PyRef.own(Py.call(getLoop.object()))) {
            createFuture = Py.getAttr(loop.object(), "create_future");
            createTask = Py.getAttr(loop.object(), "create_task");
            callSoon = Py.getAttr(loop.object(), "call_soon");
        }
    }
}
