package dev.peregrine.server;

import dev.peregrine.python.Py;

import java.lang.foreign.MemorySegment;

/** What a free-threaded process (--free-threaded) asks of the interpreter, with the GIL held. */
final class FreeThreading {
    private FreeThreading() {}

    /**
     * Whether the GIL is on now: a free-threaded CPython turns it on when it imports an extension module
     * that does not declare it can run without it, and warns, naming the module.
     */
    static boolean gilEnabled() {
        MemorySegment sys = Py.importModule("sys");
        MemorySegment name = Py.str("_is_gil_enabled");
        MemorySegment isGilEnabled = Py.getAttrOrNull(sys, name);
        try {
            if (isGilEnabled == null || isGilEnabled.address() == 0) return true;
            MemorySegment value = Py.call(isGilEnabled);
            boolean enabled = Py.isTrue(value);
            Py.decRef(value);
            return enabled;
        } finally {
            if (isGilEnabled != null) Py.decRef(isGilEnabled);
            Py.decRef(name);
            Py.decRef(sys);
        }
    }
}
