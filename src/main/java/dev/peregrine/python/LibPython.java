package dev.peregrine.python;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Opens libpython with {@code RTLD_GLOBAL}: C extension modules (_ctypes, pydantic-core, uvloop) resolve
 * the C API against the global namespace, which {@link java.lang.foreign.SymbolLookup#libraryLookup}
 * alone does not populate.
 */
public final class LibPython {
    private static final int RTLD_NOW = 2, RTLD_GLOBAL = 0x100;
    private static final Linker LINKER = Linker.nativeLinker();
    private static final MethodHandle DLOPEN = LINKER.downcallHandle(
            LINKER.defaultLookup().find("dlopen").orElseThrow(), FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT));
    private static final MethodHandle DLSYM = LINKER.downcallHandle(
            LINKER.defaultLookup().find("dlsym").orElseThrow(), FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS));
    private static final MethodHandle DLERROR = LINKER.downcallHandle(
            LINKER.defaultLookup().find("dlerror").orElseThrow(), FunctionDescriptor.of(ADDRESS));

    private static volatile MemorySegment handle;

    private LibPython() {}

    public static synchronized void load(Path library) {
        if (handle != null) return;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment h = (MemorySegment) DLOPEN.invokeExact(arena.allocateFrom(library.toString()), RTLD_NOW | RTLD_GLOBAL);
            if (h.address() == 0) {
                MemorySegment err = (MemorySegment) DLERROR.invokeExact();
                throw new IllegalStateException("cannot load " + library + ": "
                        + (err.address() == 0 ? "unknown error" : err.reinterpret(4096).getString(0)));
            }
            handle = h;
        } catch (IllegalStateException e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("cannot load " + library, t);
        }
    }

    /** The minor version of the loaded library: {@code Py_Version} exists from 3.11 on. */
    static int minorVersion() {
        if (!hasSymbol("Py_Version")) return 10;
        return (int) ((symbol("Py_Version").get(JAVA_LONG, 0) >>> 16) & 0xff);
    }

    /**
     * Whether the loaded library is a free-threaded build: only those export the function that
     * Py_DECREF calls for an object another thread owns.
     */
    static boolean freeThreaded() {
        return hasSymbol("_Py_DecRefShared");
    }

    static boolean hasSymbol(String name) {
        return lookup(name).address() != 0;
    }

    static MemorySegment symbol(String name) {
        MemorySegment s = lookup(name);
        if (s.address() == 0) throw new IllegalStateException("libpython has no symbol " + name);
        return s;
    }

    private static MemorySegment lookup(String name) {
        if (handle == null) throw new IllegalStateException("libpython is not loaded");
        try (Arena arena = Arena.ofConfined()) {
            return ((MemorySegment) DLSYM.invokeExact(handle, arena.allocateFrom(name))).reinterpret(Long.MAX_VALUE);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }
}
