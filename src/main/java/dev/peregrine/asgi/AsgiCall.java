package dev.peregrine.asgi;

import java.lang.foreign.MemorySegment;

/**
 * One call of the application the loop runs, an HTTP request or a WebSocket connection: what its
 * bound {@code receive} and {@code send} reach, and how it ends. Python thread only.
 */
interface AsgiCall {
    /** The scope the application is called with (a new reference). */
    MemorySegment scope(ScopeBuilder scopes);

    /** {@code receive()}: a future holding the next message. */
    MemorySegment receive();

    /** {@code send(message)}: a future to await. */
    MemorySegment send(MemorySegment message);

    /** Keeps the task running the application until the call ends (steals the reference). */
    void holdTask(MemorySegment task);

    /** The application returned (error null), failed (its traceback), or was cancelled (""). */
    void done(String error);
}
