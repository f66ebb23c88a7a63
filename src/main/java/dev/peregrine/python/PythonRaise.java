package dev.peregrine.python;

import java.lang.foreign.MemorySegment;

/** Thrown by a {@link NativeFunction} to raise the given Python exception in its caller. */
public final class PythonRaise extends RuntimeException {
    private final MemorySegment type;

    public PythonRaise(MemorySegment type, String message) {
        super(message, null, false, false);
        this.type = type;
    }

    /** The Python error is already set (re-raising an exception the application passed in). */
    public static PythonRaise pending() {
        return new PythonRaise(null, "pending Python exception");
    }

    /** Null when the error is already set. */
    public MemorySegment type() { return type; }
}
