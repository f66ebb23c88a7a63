package dev.peregrine.asgi;

import dev.peregrine.python.Py;
import dev.peregrine.python.PythonRaise;

import java.lang.foreign.MemorySegment;
import java.util.function.Consumer;

/**
 * One call of the application the loop runs, an HTTP request, a WebSocket connection or a WebTransport session: what its
 * bound {@code receive} and {@code send} reach, and how it ends. This class keeps what both kinds share:
 * the futures the application waits on, the task running it, and the order of the ending. Python
 * thread only, except where a subclass says otherwise.
 */
abstract sealed class AsgiCall permits AsgiRequest, AsgiWebSocket, AsgiWebTransport {
    final AsgiLoop loop;
    final AsgiMessages messages;
    /** The application's task has ended: what arrives later is dropped. */
    boolean ended;
    private MemorySegment receiveWaiter;
    private MemorySegment sendWaiter;
    private MemorySegment task;

    AsgiCall(AsgiLoop loop, AsgiMessages messages) {
        this.loop = loop;
        this.messages = messages;
    }

    /** The scope the application is called with (a new reference). */
    abstract MemorySegment scope(ScopeBuilder scopes);

    /** The message receive() should answer now (a new reference), or null when it must wait. */
    abstract MemorySegment nextMessage();

    /** Called when receive() is about to wait: the moment to ask the transport for more. */
    void beforeWaiting() {
    }

    /** {@code send(message)}: a future to await. */
    abstract MemorySegment send(MemorySegment message);

    /** What the ending means for the transport: answer, close, or abort; release what the call holds. */
    abstract void end(String error);

    /** {@code receive()}: a future holding the next message, already done when there is one. */
    final MemorySegment receive() {
        MemorySegment message = nextMessage();
        if (message != null) return loop.completedFuture(message);
        if (receiveWaiter != null) throw new PythonRaise(Py.ExcRuntimeError, "receive() called while another receive() is waiting");
        beforeWaiting();
        receiveWaiter = loop.newFuture();
        return Py.newRef(receiveWaiter);
    }

    /** Answers a waiting receive() if there is now a message for it. */
    final void wakeReceiver() {
        if (receiveWaiter == null) return;
        MemorySegment message = nextMessage();
        if (message == null) return;
        MemorySegment waiter = receiveWaiter;
        receiveWaiter = null;
        loop.resolve(waiter, message);
    }

    final void wakeSender() {
        if (sendWaiter == null) return;
        MemorySegment waiter = sendWaiter;
        sendWaiter = null;
        loop.resolve(waiter, Py.newRef(Py.None));
    }

    /**
     * The future a send() returns when the peer must drain first (backpressure): done once the
     * transport, through {@code whenWritable}, says the peer has caught up. Every send that waits
     * meanwhile gets the same one.
     */
    final MemorySegment waitUntilWritable(Consumer<Runnable> whenWritable) {
        // Tasks of the application that send at once wait for the same drain, so on one future: a
        // future of its own for each would leave all but the last waiting forever.
        if (sendWaiter == null) {
            sendWaiter = loop.newFuture();
            whenWritable.accept(() -> loop.post(this::wakeSender));
        }
        return Py.newRef(sendWaiter);
    }

    /** Keeps the task running the application until the call ends (steals the reference). */
    final void holdTask(MemorySegment task) {
        if (ended) Py.decRef(task);
        else this.task = task;
    }

    /** The application returned (error null), failed (its traceback), or was cancelled (""). */
    final void done(String error) {
        ended = true;
        end(error);
        receiveWaiter = release(receiveWaiter);
        sendWaiter = release(sendWaiter);
        task = release(task);
    }

    private static MemorySegment release(MemorySegment object) {
        if (object != null) Py.decRef(object);
        return null;
    }
}
