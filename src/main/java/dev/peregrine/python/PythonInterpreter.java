package dev.peregrine.python;

import org.jboss.logging.Logger;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * The embedded CPython: initialised once per process, then entered by Java threads that take the GIL.
 *
 * <p>Initialisation uses the isolated configuration, so the interpreter installs no signal handlers
 * (SIGINT, SIGTERM and SIGHUP stay with the JVM) and ignores PYTHON* variables; argv[0] is the
 * user's interpreter, so that sys.prefix, a venv's pyvenv.cfg and site-packages resolve as when the
 * user runs it. PyConfig's fields are never written directly: their layout changes between versions.
 */
public final class PythonInterpreter {
    private static final Logger LOG = Logger.getLogger("peregrine");
    private static final Arena FOREVER = Arena.global();
    private static PythonInterpreter instance;

    private final PythonInstall install;
    private final Map<String, NativeFunction> functions = new LinkedHashMap<>();
    private final Map<String, MemorySegment> methodDefs = new HashMap<>();
    private MemorySegment nativeModule;

    private PythonInterpreter(PythonInstall install) {
        this.install = install;
    }

    /**
     * Loads libpython and initialises the interpreter on the calling thread, puts {@code pathEntries}
     * (then the Python half of Peregrine) on sys.path, and releases the GIL.
     */
    public static synchronized PythonInterpreter start(PythonInstall install, List<Path> pathEntries) {
        if (instance != null) throw new IllegalStateException("the interpreter is already running");
        LibPython.load(install.library());
        PythonInterpreter interpreter = new PythonInterpreter(install);
        interpreter.initialize(pathEntries);
        instance = interpreter;
        return interpreter;
    }

    private void initialize(List<Path> pathEntries) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment preconfig = arena.allocate(128, 8);
            Py.PyPreConfig_InitIsolatedConfig.invokeExact(preconfig);
            preconfig.set(JAVA_INT, 28, 1); // utf8_mode: the same offset from 3.8 to 3.14, free-threaded or not
            checkStatus((MemorySegment) Py.Py_PreInitialize.invokeExact((SegmentAllocator) arena, preconfig), "Py_PreInitialize");

            MemorySegment config = arena.allocate(16 * 1024, 16);
            Py.PyConfig_InitIsolatedConfig.invokeExact(config);
            MemorySegment argv = arena.allocate(ADDRESS, 2);
            argv.setAtIndex(ADDRESS, 0, arena.allocateFrom(install.executable().toString()));
            argv.setAtIndex(ADDRESS, 1, MemorySegment.NULL);
            checkStatus((MemorySegment) Py.PyConfig_SetBytesArgv.invokeExact((SegmentAllocator) arena, config, 1L, argv), "PyConfig_SetBytesArgv");
            MemorySegment status = (MemorySegment) Py.Py_InitializeFromConfig.invokeExact((SegmentAllocator) arena, config);
            Py.PyConfig_Clear.invokeExact(config);
            checkStatus(status, "Py_InitializeFromConfig");
            Py.checkLayout();
        } catch (PythonInstall.Unusable e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("could not initialise Python: " + t, t);
        }
        // 3.11 and 3.12 take whichever thread first imports threading as the main thread.
        Py.decRef(Py.importModule("threading"));
        MemorySegment traceback = Py.importModule("traceback");
        PythonException.useFormatter(Py.getAttr(traceback, "format_exception"));
        Py.decRef(traceback);

        MemorySegment sys = Py.importModule("sys");
        MemorySegment path = Py.getAttr(sys, "path");
        MemorySegment insert = Py.getAttr(path, "insert");
        List<Path> entries = new ArrayList<>(pathEntries);
        entries.add(gluePath());
        for (int i = 0; i < entries.size(); i++) {
            MemorySegment index = Py.integer(i);
            MemorySegment entry = Py.str(entries.get(i).toString());
            Py.callVoid(insert, index, entry);
            Py.decRef(index);
            Py.decRef(entry);
        }
        Py.decRef(insert);
        Py.decRef(path);
        Py.decRef(sys);
        // Python's own writes reach the log promptly, as they would on a terminal.
        runStatement("import sys\nfor s in (sys.stdout, sys.stderr):\n    try:\n        s.reconfigure(line_buffering=True)\n    except Exception:\n        pass\n");
        try {
            MemorySegment state = (MemorySegment) Py.PyEval_SaveThread.invokeExact();
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private static void runStatement(String code) {
        MemorySegment builtins = Py.importModule("builtins");
        MemorySegment exec = Py.getAttr(builtins, "exec");
        MemorySegment source = Py.str(code);
        MemorySegment globals = Py.newDict(); // exec() called from C has no frame whose globals it could use
        Py.callVoid(exec, source, globals);
        Py.decRef(globals);
        Py.decRef(source);
        Py.decRef(exec);
        Py.decRef(builtins);
    }

    /** Where the Python half of Peregrine lies: the python/ folder of our jar (zipimport) or of the class folder. */
    private static Path gluePath() {
        try {
            Path location = Path.of(PythonInterpreter.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            return location.resolve("python");
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    private static void checkStatus(MemorySegment status, String what) {
        if (status.get(JAVA_INT, 0) != 0) {
            MemorySegment message = status.get(ADDRESS, 16);
            String text = message.address() == 0 ? "unknown error" : message.reinterpret(4096).getString(0);
            throw new PythonInstall.Unusable(what + " failed: " + text);
        }
    }

    // ---- the GIL ----

    /** Takes the GIL on the calling (platform) thread; pass the result to {@link #release}. */
    public static int acquire() {
        try {
            return (int) Py.PyGILState_Ensure.invokeExact();
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    public static void release(int state) {
        try {
            Py.PyGILState_Release.invokeExact(state);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /**
     * Collects the garbage there is now, then moves every object the collector tracks into its permanent
     * generation ({@code gc.freeze()}), where no later collection walks it. Called once the application
     * has started, before it serves: its imports and lifespan startup made most of the objects it will
     * ever have, and they live as long as the process. Without this, each full collection walks them all,
     * tens of thousands of objects for FastAPI, 15 to 21 ms each on this project's machines; they come
     * every ten thousand requests or so once many requests are in flight (docs/benchmarks/request-path.md).
     * Frozen objects are still freed when their last reference goes; a reference cycle among them that
     * becomes garbage later is never collected.
     */
    public static void freezeStartupObjects() {
        int gil = acquire();
        try {
            runStatement("import gc\ngc.collect()\ngc.freeze()\n");
        } finally {
            release(gil);
        }
    }

    /**
     * Gives the calling thread a Python thread state that lives as long as the thread, so that each
     * later acquire/release costs tens of nanoseconds instead of creating and destroying one.
     */
    public static void pinThreadState() {
        try {
            int state = (int) Py.PyGILState_Ensure.invokeExact();
            MemorySegment saved = (MemorySegment) Py.PyEval_SaveThread.invokeExact();
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** Lets other Python threads run while the calling thread blocks in Java; pair with {@link #restoreThread}. */
    public static MemorySegment saveThread() {
        try {
            return (MemorySegment) Py.PyEval_SaveThread.invokeExact();
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    public static void restoreThread(MemorySegment state) {
        try {
            Py.PyEval_RestoreThread.invokeExact(state);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    // ---- peregrine._native: built-in functions implemented in Java ----

    /** Registers a function of {@code peregrine._native}; all must be registered before {@link #publishNativeModule}. */
    public void define(String name, NativeFunction function) {
        functions.put(name, function);
    }

    /** Creates {@code peregrine._native} with the registered functions (the GIL is held). */
    public void publishNativeModule() {
        MemorySegment types = Py.importModule("types");
        MemorySegment moduleType = Py.getAttr(types, "ModuleType");
        MemorySegment name = Py.str("peregrine._native");
        nativeModule = Py.call(moduleType, name);
        Py.decRef(name);
        Py.decRef(moduleType);
        Py.decRef(types);
        for (Map.Entry<String, NativeFunction> entry : functions.entrySet()) {
            MemorySegment def = Py.methodDef(FOREVER, entry.getKey(), upcall(entry.getKey(), entry.getValue()));
            methodDefs.put(entry.getKey(), def);
            MemorySegment function = Py.builtin(def, MemorySegment.NULL);
            Py.setAttr(nativeModule, entry.getKey(), function);
            Py.decRef(function);
        }
        MemorySegment sys = Py.importModule("sys");
        MemorySegment modules = Py.getAttr(sys, "modules");
        MemorySegment key = Py.str("peregrine._native");
        Py.dictSet(modules, key, nativeModule);
        Py.decRef(key);
        Py.decRef(modules);
        Py.decRef(sys);
    }

    /**
     * A new function object for the registered function {@code name} bound to {@code self}: the
     * per-request {@code receive} and {@code send} of ASGI are such functions, so that a call reaches
     * Java with its request attached and no Python frame in between.
     */
    public MemorySegment bind(String name, MemorySegment self) {
        MemorySegment def = methodDefs.get(name);
        if (def == null) throw new IllegalStateException("no native function " + name);
        return Py.builtin(def, self);
    }

    private static final MethodHandle INVOKE;
    static {
        try {
            INVOKE = MethodHandles.lookup().findVirtual(Builtin.class, "invoke",
                    MethodType.methodType(MemorySegment.class, MemorySegment.class, MemorySegment.class, long.class));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private static MemorySegment upcall(String name, NativeFunction function) {
        return Linker.nativeLinker().upcallStub(INVOKE.bindTo(new Builtin(name, function)), Py.FASTCALL, FOREVER);
    }

    /**
     * The C-level entry of a built-in. An exception escaping an upcall would kill the JVM, so every
     * failure becomes a Python exception in the caller.
     */
    private static final class Builtin {
        private final String name;
        private final NativeFunction function;

        Builtin(String name, NativeFunction function) {
            this.name = name;
            this.function = function;
        }

        @SuppressWarnings("unused") // called from native code through the upcall stub
        MemorySegment invoke(MemorySegment self, MemorySegment args, long nargs) {
            try {
                MemorySegment result = function.call(new NativeFunction.Arguments(self, args, nargs));
                return result == null ? Py.newRef(Py.None) : result;
            } catch (PythonRaise e) {
                if (e.type() != null) Py.setError(e.type(), e.getMessage());
            } catch (PythonException e) {
                Py.setError(Py.ExcRuntimeError, e.getMessage());
            } catch (Throwable t) {
                try {
                    LOG.errorf(t, "peregrine._native.%s failed", name);
                    Py.setError(Py.ExcRuntimeError, "peregrine._native." + name + ": " + t);
                } catch (Throwable ignored) {
                    // Nothing more can be done without risking the process.
                }
            }
            return MemorySegment.NULL;
        }
    }
}
