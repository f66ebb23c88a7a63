package dev.peregrine.server;

import dev.peregrine.python.Py;

import java.lang.foreign.MemorySegment;

/** What a free-threaded process (--free-threaded) asks of the interpreter; each with the GIL held. */
final class FreeThreading {
    private FreeThreading() {}

    /** Whether this CPython was built without the GIL (PEP 703: python3.13t and later). */
    static boolean supportedByBuild() {
        MemorySegment sysconfig = Py.importModule("sysconfig");
        MemorySegment getConfigVar = Py.getAttr(sysconfig, "get_config_var");
        MemorySegment name = Py.str("Py_GIL_DISABLED");
        try {
            MemorySegment value = Py.call(getConfigVar, name);
            boolean disabled = !Py.isNone(value) && Py.isTrue(value);
            Py.decRef(value);
            return disabled;
        } finally {
            Py.decRef(name);
            Py.decRef(getConfigVar);
            Py.decRef(sysconfig);
        }
    }

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
