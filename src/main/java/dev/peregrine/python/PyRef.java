package dev.peregrine.python;

import java.lang.foreign.MemorySegment;

/**
 * A new reference owned by one block and given back when the block ends, however it ends:
 * {@code try (PyRef module = PyRef.own(Py.importModule("asyncio"))) { ... module.object() ... }}.
 * It takes the place of a chain of {@link Py#decRef} calls after the fact, which an exception or an early
 * return skips and a new line can forget. A NULL reference (a failed call whose error is still to be fetched)
 * is allowed and releases nothing. It never leaves its block, so escape analysis keeps it off the heap on the
 * request path.
 */
public record PyRef(MemorySegment object) implements AutoCloseable {
    /** Takes over {@code object}, a new reference (or NULL). */
    public static PyRef own(MemorySegment object) {
        return new PyRef(object);
    }

    /** Whether it holds NULL: the call that made it failed. */
    public boolean failed() {
        return object.address() == 0;
    }

    @Override
    public void close() {
        Py.decRef(object);
    }
}
