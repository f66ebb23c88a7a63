package dev.peregrine.python;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The CPython C API as static method handles over the libpython that {@link LibPython#load} opened.
 *
 * <p>Static final handles let the JIT inline each downcall to a direct call. Functions that can run no
 * Python code and never block are linked {@code critical}: a few nanoseconds instead of about ten,
 * with heap arrays passed straight through as pointers. Allocating a container is not critical: on
 * 3.10 and 3.11 it may start the cyclic garbage collector, which runs finalizers. Everything that may call back into Python
 * (calls, attribute access, a DecRef that may run {@code __del__}, the GIL) is linked normally.
 *
 * <p>Every method here requires the calling thread to hold the GIL unless its comment says otherwise.
 */
public final class Py {
    private Py() {}

    public static final MemorySegment NULL = MemorySegment.NULL;
    private static final Linker LINKER = Linker.nativeLinker();
    private static final Linker.Option CRITICAL = Linker.Option.critical(true);

    /** {@code PyStatus} is returned by value from the initialisation functions. */
    public static final StructLayout PY_STATUS = MemoryLayout.structLayout(
            JAVA_INT.withName("_type"), MemoryLayout.paddingLayout(4),
            ADDRESS.withName("func"), ADDRESS.withName("err_msg"),
            JAVA_INT.withName("exitcode"), MemoryLayout.paddingLayout(4));

    private static MethodHandle fn(String name, FunctionDescriptor fd) {
        return LINKER.downcallHandle(LibPython.symbol(name), fd);
    }

    private static MethodHandle critical(String name, FunctionDescriptor fd) {
        return LINKER.downcallHandle(LibPython.symbol(name), fd, CRITICAL);
    }

    private static MethodHandle optional(String name, FunctionDescriptor fd) {
        return LibPython.hasSymbol(name) ? fn(name, fd) : null;
    }

    private static FunctionDescriptor a(ValueLayout... args) { return FunctionDescriptor.of(ADDRESS, args); }
    private static FunctionDescriptor i(ValueLayout... args) { return FunctionDescriptor.of(JAVA_INT, args); }
    private static FunctionDescriptor l(ValueLayout... args) { return FunctionDescriptor.of(JAVA_LONG, args); }
    private static FunctionDescriptor v(ValueLayout... args) { return FunctionDescriptor.ofVoid(args); }

    // Interpreter life cycle (see PythonInterpreter for the order).
    static final MethodHandle PyPreConfig_InitIsolatedConfig = fn("PyPreConfig_InitIsolatedConfig", v(ADDRESS));
    static final MethodHandle Py_PreInitialize = fn("Py_PreInitialize", FunctionDescriptor.of(PY_STATUS, ADDRESS));
    static final MethodHandle PyConfig_InitIsolatedConfig = fn("PyConfig_InitIsolatedConfig", v(ADDRESS));
    static final MethodHandle PyConfig_SetBytesArgv = fn("PyConfig_SetBytesArgv", FunctionDescriptor.of(PY_STATUS, ADDRESS, JAVA_LONG, ADDRESS));
    static final MethodHandle Py_InitializeFromConfig = fn("Py_InitializeFromConfig", FunctionDescriptor.of(PY_STATUS, ADDRESS));
    static final MethodHandle PyConfig_Clear = fn("PyConfig_Clear", v(ADDRESS));
    static final MethodHandle PyEval_SaveThread = fn("PyEval_SaveThread", a());
    static final MethodHandle PyEval_RestoreThread = fn("PyEval_RestoreThread", v(ADDRESS));
    static final MethodHandle PyGILState_Ensure = fn("PyGILState_Ensure", i());
    static final MethodHandle PyGILState_Release = fn("PyGILState_Release", v(JAVA_INT));

    // Objects.
    private static final MethodHandle Py_IncRef = critical("Py_IncRef", v(ADDRESS));
    private static final MethodHandle Py_DecRef = fn("Py_DecRef", v(ADDRESS));
    private static final MethodHandle PyImport_ImportModule = fn("PyImport_ImportModule", a(ADDRESS));
    private static final MethodHandle PyObject_GetAttrString = fn("PyObject_GetAttrString", a(ADDRESS, ADDRESS));
    private static final MethodHandle PyObject_GetAttr = fn("PyObject_GetAttr", a(ADDRESS, ADDRESS));
    private static final MethodHandle PyObject_SetAttrString = fn("PyObject_SetAttrString", i(ADDRESS, ADDRESS, ADDRESS));
    private static final MethodHandle PyObject_Call = fn("PyObject_Call", a(ADDRESS, ADDRESS, ADDRESS));
    private static final MethodHandle PyObject_Vectorcall = optional("PyObject_Vectorcall", a(ADDRESS, ADDRESS, JAVA_LONG, ADDRESS));
    private static final MethodHandle PyObject_GetIter = fn("PyObject_GetIter", a(ADDRESS));
    private static final MethodHandle PyIter_Next = fn("PyIter_Next", a(ADDRESS));
    private static final MethodHandle PyObject_IsTrue = fn("PyObject_IsTrue", i(ADDRESS));
    private static final MethodHandle PyObject_Str = fn("PyObject_Str", a(ADDRESS));
    private static final MethodHandle PyType_IsSubtype = critical("PyType_IsSubtype", i(ADDRESS, ADDRESS));

    // Bytes, str, int.
    private static final MethodHandle PyBytes_FromStringAndSize = critical("PyBytes_FromStringAndSize", a(ADDRESS, JAVA_LONG));
    private static final MethodHandle PyBytes_AsStringAndSize = critical("PyBytes_AsStringAndSize", i(ADDRESS, ADDRESS, ADDRESS));
    private static final MethodHandle PyByteArray_AsString = critical("PyByteArray_AsString", a(ADDRESS));
    private static final MethodHandle PyObject_Size = critical("PyObject_Size", l(ADDRESS));
    private static final MethodHandle PyUnicode_FromStringAndSize = critical("PyUnicode_FromStringAndSize", a(ADDRESS, JAVA_LONG));
    private static final MethodHandle PyUnicode_DecodeLatin1 = critical("PyUnicode_DecodeLatin1", a(ADDRESS, JAVA_LONG, ADDRESS));
    private static final MethodHandle PyUnicode_DecodeUTF8 = critical("PyUnicode_DecodeUTF8", a(ADDRESS, JAVA_LONG, ADDRESS));
    private static final MethodHandle PyUnicode_AsUTF8AndSize = critical("PyUnicode_AsUTF8AndSize", a(ADDRESS, ADDRESS));
    private static final MethodHandle PyUnicode_AsLatin1String = fn("PyUnicode_AsLatin1String", a(ADDRESS));
    private static final MethodHandle PyUnicode_InternFromString = fn("PyUnicode_InternFromString", a(ADDRESS));
    private static final MethodHandle PyLong_FromLongLong = critical("PyLong_FromLongLong", a(JAVA_LONG));
    private static final MethodHandle PyLong_AsLongLong = fn("PyLong_AsLongLong", l(ADDRESS));

    // Containers.
    private static final MethodHandle PyDict_New = fn("PyDict_New", a());
    private static final MethodHandle PyDict_Copy = fn("PyDict_Copy", a(ADDRESS));
    private static final MethodHandle PyDict_SetItem = fn("PyDict_SetItem", i(ADDRESS, ADDRESS, ADDRESS));
    private static final MethodHandle PyDict_GetItemWithError = fn("PyDict_GetItemWithError", a(ADDRESS, ADDRESS));
    private static final MethodHandle PyList_New = fn("PyList_New", a(JAVA_LONG));
    private static final MethodHandle PyList_SetItem = fn("PyList_SetItem", i(ADDRESS, JAVA_LONG, ADDRESS));
    private static final MethodHandle PyTuple_New = fn("PyTuple_New", a(JAVA_LONG));
    private static final MethodHandle PyTuple_SetItem = fn("PyTuple_SetItem", i(ADDRESS, JAVA_LONG, ADDRESS));
    private static final MethodHandle PySequence_Fast = fn("PySequence_Fast", a(ADDRESS, ADDRESS));

    // Errors.
    private static final MethodHandle PyErr_Occurred = critical("PyErr_Occurred", a());
    private static final MethodHandle PyErr_SetString = fn("PyErr_SetString", v(ADDRESS, ADDRESS));
    private static final MethodHandle PyErr_Clear = fn("PyErr_Clear", v());
    private static final MethodHandle PyErr_Restore = fn("PyErr_Restore", v(ADDRESS, ADDRESS, ADDRESS));
    static final MethodHandle PyErr_Fetch = fn("PyErr_Fetch", v(ADDRESS, ADDRESS, ADDRESS));
    static final MethodHandle PyErr_NormalizeException = fn("PyErr_NormalizeException", v(ADDRESS, ADDRESS, ADDRESS));

    // Built-in functions whose C function pointer is a Java upcall stub.
    private static final MethodHandle PyCFunction_NewEx = fn("PyCFunction_NewEx", a(ADDRESS, ADDRESS, ADDRESS));

    public static final MemorySegment None = object("_Py_NoneStruct");
    public static final MemorySegment True = object("_Py_TrueStruct");
    public static final MemorySegment False = object("_Py_FalseStruct");
    public static final MemorySegment BytesType = object("PyBytes_Type");
    public static final MemorySegment ByteArrayType = object("PyByteArray_Type");
    public static final MemorySegment UnicodeType = object("PyUnicode_Type");
    public static final MemorySegment LongType = object("PyLong_Type");
    public static final MemorySegment DictType = object("PyDict_Type");
    public static final MemorySegment TupleType = object("PyTuple_Type");
    public static final MemorySegment ListType = object("PyList_Type");
    public static final MemorySegment ExcRuntimeError = pointedTo("PyExc_RuntimeError");
    public static final MemorySegment ExcTypeError = pointedTo("PyExc_TypeError");
    public static final MemorySegment ExcValueError = pointedTo("PyExc_ValueError");
    public static final MemorySegment ExcOSError = pointedTo("PyExc_OSError");

    /** A statically allocated object: its address as a zero-length segment, compared by address. */
    private static MemorySegment object(String symbol) {
        return MemorySegment.ofAddress(LibPython.symbol(symbol).address());
    }

    /** The object a global {@code PyObject *} variable points to. */
    private static MemorySegment pointedTo(String symbol) {
        return MemorySegment.ofAddress(LibPython.symbol(symbol).get(ADDRESS, 0).address());
    }

    /** Segments from different sources differ in size; identity in Python is the address alone. */
    public static boolean same(MemorySegment a, MemorySegment b) {
        return a.address() == b.address();
    }

    /** Where object fields lie in the loaded library's build; read once, so the JIT folds the offsets. */
    static final ObjectLayout LAYOUT = ObjectLayout.of(LibPython.minorVersion(), LibPython.freeThreaded());
    private static final long OB_TYPE = LAYOUT.obType();
    /** Scratch for out-parameters; the Python threads are few and each call completes before the next. */
    private static final ThreadLocal<MemorySegment> OUT = ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(16, 8));

    private static RuntimeException fail(Throwable t) {
        if (t instanceof RuntimeException r) return r;
        if (t instanceof Error e) throw e;
        return new IllegalStateException(t);
    }

    // ---- reference counts and types ----

    public static void incRef(MemorySegment o) {
        try { Py_IncRef.invokeExact(o); } catch (Throwable t) { throw fail(t); }
    }

    public static void decRef(MemorySegment o) {
        if (o.address() == 0) return;
        try { Py_DecRef.invokeExact(o); } catch (Throwable t) { throw fail(t); }
    }

    /** Returns a new reference to {@code o}. */
    public static MemorySegment newRef(MemorySegment o) {
        incRef(o);
        return o;
    }

    public static MemorySegment typeOf(MemorySegment o) {
        return o.reinterpret(OB_TYPE + 8).get(ADDRESS, OB_TYPE);
    }

    public static boolean isInstance(MemorySegment o, MemorySegment type) {
        MemorySegment t = typeOf(o);
        if (t.address() == type.address()) return true;
        try { return (int) PyType_IsSubtype.invokeExact(t, type) != 0; } catch (Throwable e) { throw fail(e); }
    }

    public static boolean isNone(MemorySegment o) { return o.address() == None.address(); }

    // ---- modules, attributes, calls ----

    /** New reference, or throws {@link PythonException} with the Python error. */
    public static MemorySegment importModule(String name) {
        try (Arena arena = Arena.ofConfined()) {
            return check((MemorySegment) PyImport_ImportModule.invokeExact(arena.allocateFrom(name)));
        } catch (PythonException e) { throw e; } catch (Throwable t) { throw fail(t); }
    }

    public static MemorySegment getAttr(MemorySegment o, String name) {
        try (Arena arena = Arena.ofConfined()) {
            return check((MemorySegment) PyObject_GetAttrString.invokeExact(o, arena.allocateFrom(name)));
        } catch (PythonException e) { throw e; } catch (Throwable t) { throw fail(t); }
    }

    /** {@code getattr(o, name, None)} with a str name object, as a new reference or null when missing. */
    public static MemorySegment getAttrOrNull(MemorySegment o, MemorySegment name) {
        try {
            MemorySegment v = (MemorySegment) PyObject_GetAttr.invokeExact(o, name);
            if (v.address() == 0) {
                clearError();
                return null;
            }
            return v;
        } catch (Throwable t) { throw fail(t); }
    }

    public static void setAttr(MemorySegment o, String name, MemorySegment value) {
        try (Arena arena = Arena.ofConfined()) {
            checkStatus((int) PyObject_SetAttrString.invokeExact(o, arena.allocateFrom(name), value));
        } catch (PythonException e) { throw e; } catch (Throwable t) { throw fail(t); }
    }

    /**
     * Argument arrays for vectorcalls, used as a stack: a call may run Python code that calls back
     * into Java and makes calls of its own before the outer callee has read its arguments.
     */
    private static final class ArgStack {
        final MemorySegment slots = Arena.ofAuto().allocate(ADDRESS, 1024);
        int top;
    }

    private static final ThreadLocal<ArgStack> ARGS = ThreadLocal.withInitial(ArgStack::new);

    /** Calls {@code callable(*args)}; returns a new reference, or null with the Python error set. */
    public static MemorySegment callRaw(MemorySegment callable, MemorySegment... args) {
        try {
            if (PyObject_Vectorcall != null) {
                ArgStack stack = ARGS.get();
                int base = stack.top;
                if (base + args.length > 1024) throw new IllegalStateException("calls nested too deeply");
                for (int k = 0; k < args.length; k++) stack.slots.setAtIndex(ADDRESS, base + k, args[k]);
                stack.top = base + args.length;
                try {
                    return (MemorySegment) PyObject_Vectorcall.invokeExact(callable, stack.slots.asSlice(base * 8L), (long) args.length, NULL);
                } finally {
                    stack.top = base;
                }
            }
            MemorySegment tuple = (MemorySegment) PyTuple_New.invokeExact((long) args.length);
            for (int k = 0; k < args.length; k++) {
                incRef(args[k]);
                int rc = (int) PyTuple_SetItem.invokeExact(tuple, (long) k, args[k]);
            }
            MemorySegment result = (MemorySegment) PyObject_Call.invokeExact(callable, tuple, NULL);
            decRef(tuple);
            return result;
        } catch (Throwable t) { throw fail(t); }
    }

    /** Calls {@code callable(*args)}; returns a new reference or throws {@link PythonException}. */
    public static MemorySegment call(MemorySegment callable, MemorySegment... args) {
        return check(callRaw(callable, args));
    }

    /** Calls and discards the result. */
    public static void callVoid(MemorySegment callable, MemorySegment... args) {
        decRef(call(callable, args));
    }

    public static MemorySegment getIter(MemorySegment o) {
        try { return check((MemorySegment) PyObject_GetIter.invokeExact(o)); } catch (PythonException e) { throw e; } catch (Throwable t) { throw fail(t); }
    }

    /** The next item as a new reference; null at the end; throws if the iterator raised. */
    public static MemorySegment next(MemorySegment iterator) {
        try {
            MemorySegment item = (MemorySegment) PyIter_Next.invokeExact(iterator);
            if (item.address() == 0 && errorOccurred()) throw PythonException.fetch();
            return item.address() == 0 ? null : item;
        } catch (PythonException e) { throw e; } catch (Throwable t) { throw fail(t); }
    }

    public static boolean isTrue(MemorySegment o) {
        try {
            int r = (int) PyObject_IsTrue.invokeExact(o);
            if (r < 0) throw PythonException.fetch();
            return r == 1;
        } catch (PythonException e) { throw e; } catch (Throwable t) { throw fail(t); }
    }

    /** {@code str(o)} as a Java string, for messages. */
    public static String str(MemorySegment o) {
        try {
            MemorySegment s = (MemorySegment) PyObject_Str.invokeExact(o);
            if (s.address() == 0) { clearError(); return "<unprintable>"; }
            String r = toJavaString(s);
            decRef(s);
            return r;
        } catch (Throwable t) { throw fail(t); }
    }

    // ---- bytes ----

    /** New bytes object copied from a heap array range (passed to C without a copy: critical call). */
    public static MemorySegment bytes(byte[] data, int offset, int length) {
        try {
            return (MemorySegment) PyBytes_FromStringAndSize.invokeExact(MemorySegment.ofArray(data).asSlice(offset, length), (long) length);
        } catch (Throwable t) { throw fail(t); }
    }

    public static MemorySegment bytes(byte[] data) { return bytes(data, 0, data.length); }

    /** New bytes object copied from native memory. */
    public static MemorySegment bytes(MemorySegment data, long length) {
        try { return (MemorySegment) PyBytes_FromStringAndSize.invokeExact(data, length); } catch (Throwable t) { throw fail(t); }
    }

    /**
     * The contents of a bytes, bytearray or str object as a native segment valid while the object
     * lives, or null when it is none of those. str is taken as UTF-8.
     */
    public static MemorySegment bufferOf(MemorySegment o) {
        try {
            MemorySegment out = OUT.get();
            if (isInstance(o, BytesType)) {
                int rc = (int) PyBytes_AsStringAndSize.invokeExact(o, out, out.asSlice(8));
                return out.get(ADDRESS, 0).reinterpret(out.get(JAVA_LONG, 8));
            }
            if (isInstance(o, UnicodeType)) {
                MemorySegment p = (MemorySegment) PyUnicode_AsUTF8AndSize.invokeExact(o, out);
                if (p.address() == 0) throw PythonException.fetch();
                return p.reinterpret(out.get(JAVA_LONG, 0));
            }
            if (isInstance(o, ByteArrayType)) {
                long n = (long) PyObject_Size.invokeExact(o);
                MemorySegment p = (MemorySegment) PyByteArray_AsString.invokeExact(o);
                return p.reinterpret(n);
            }
            return null;
        } catch (PythonException e) { throw e; } catch (Throwable t) { throw fail(t); }
    }

    /** Like {@link #bufferOf} but only bytes-like objects: str is refused (null). */
    public static MemorySegment bytesLikeOf(MemorySegment o) {
        MemorySegment type = typeOf(o);
        if (isInstance(o, UnicodeType)) return null;
        return bufferOf(o);
    }

    // ---- str ----

    public static MemorySegment str(String s) {
        byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
        try {
            return check((MemorySegment) PyUnicode_FromStringAndSize.invokeExact(MemorySegment.ofArray(utf8), (long) utf8.length));
        } catch (PythonException e) { throw e; } catch (Throwable t) { throw fail(t); }
    }

    /** An interned str (immortal for our purposes: we keep the reference forever). */
    public static MemorySegment internedStr(String s) {
        try (Arena arena = Arena.ofConfined()) {
            return check((MemorySegment) PyUnicode_InternFromString.invokeExact(arena.allocateFrom(s)));
        } catch (PythonException e) { throw e; } catch (Throwable t) { throw fail(t); }
    }

    /** A str decoded from ISO-8859-1 bytes in a heap array. */
    public static MemorySegment latin1(byte[] data, int offset, int length) {
        try {
            return (MemorySegment) PyUnicode_DecodeLatin1.invokeExact(MemorySegment.ofArray(data).asSlice(offset, length), (long) length, NULL);
        } catch (Throwable t) { throw fail(t); }
    }

    private static final MemorySegment REPLACE = Arena.global().allocateFrom("replace");

    /** A new bytes object with a str encoded as ISO-8859-1 (the "native strings" of PEP 3333). */
    public static MemorySegment latin1Bytes(MemorySegment str) {
        try { return check((MemorySegment) PyUnicode_AsLatin1String.invokeExact(str)); } catch (PythonException e) { throw e; } catch (Throwable t) { throw fail(t); }
    }

    /** A str decoded from UTF-8, with invalid sequences replaced by U+FFFD. */
    public static MemorySegment utf8(byte[] data, int offset, int length) {
        try {
            return (MemorySegment) PyUnicode_DecodeUTF8.invokeExact(MemorySegment.ofArray(data).asSlice(offset, length), (long) length, REPLACE);
        } catch (Throwable t) { throw fail(t); }
    }

    /** A str decoded from UTF-8 in native memory, with invalid sequences replaced by U+FFFD. */
    public static MemorySegment utf8(MemorySegment data, long length) {
        try {
            return check((MemorySegment) PyUnicode_DecodeUTF8.invokeExact(data, length, REPLACE));
        } catch (PythonException e) { throw e; } catch (Throwable t) { throw fail(t); }
    }

    /** The UTF-8 text of a str, or null when {@code o} is not a str. */
    public static String toJavaString(MemorySegment o) {
        if (!isInstance(o, UnicodeType)) return null;
        MemorySegment b = bufferOf(o);
        return new String(b.toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
    }

    // ---- int ----

    public static MemorySegment integer(long v) {
        try { return (MemorySegment) PyLong_FromLongLong.invokeExact(v); } catch (Throwable t) { throw fail(t); }
    }

    /** The value of an int; throws {@link PythonException} when it is no int or does not fit. */
    public static long toLong(MemorySegment o) {
        try {
            long v = (long) PyLong_AsLongLong.invokeExact(o);
            if (v == -1 && errorOccurred()) throw PythonException.fetch();
            return v;
        } catch (PythonException e) { throw e; } catch (Throwable t) { throw fail(t); }
    }

    public static MemorySegment bool(boolean b) { return newRef(b ? True : False); }

    // ---- containers ----

    public static MemorySegment newDict() {
        try { return (MemorySegment) PyDict_New.invokeExact(); } catch (Throwable t) { throw fail(t); }
    }

    public static MemorySegment dictCopy(MemorySegment d) {
        try { return check((MemorySegment) PyDict_Copy.invokeExact(d)); } catch (PythonException e) { throw e; } catch (Throwable t) { throw fail(t); }
    }

    /** d[key] = value; does not steal either reference. */
    public static void dictSet(MemorySegment d, MemorySegment key, MemorySegment value) {
        try { checkStatus((int) PyDict_SetItem.invokeExact(d, key, value)); } catch (PythonException e) { throw e; } catch (Throwable t) { throw fail(t); }
    }

    /** d[key] = value and releases our reference to value. */
    public static void dictSetSteal(MemorySegment d, MemorySegment key, MemorySegment value) {
        try {
            int rc = (int) PyDict_SetItem.invokeExact(d, key, value);
            decRef(value);
            checkStatus(rc);
        } catch (PythonException e) { throw e; } catch (Throwable t) { throw fail(t); }
    }

    /** A borrowed reference to d[key], or null when absent. */
    public static MemorySegment dictGet(MemorySegment d, MemorySegment key) {
        try {
            MemorySegment v = (MemorySegment) PyDict_GetItemWithError.invokeExact(d, key);
            if (v.address() == 0) {
                if (errorOccurred()) throw PythonException.fetch();
                return null;
            }
            return v;
        } catch (PythonException e) { throw e; } catch (Throwable t) { throw fail(t); }
    }

    public static MemorySegment newList(int size) {
        try { return (MemorySegment) PyList_New.invokeExact((long) size); } catch (Throwable t) { throw fail(t); }
    }

    /** list[i] = item, stealing the reference to item (fills a new list). */
    public static void listSetSteal(MemorySegment list, int i, MemorySegment item) {
        try { int rc = (int) PyList_SetItem.invokeExact(list, (long) i, item); } catch (Throwable t) { throw fail(t); }
    }

    public static MemorySegment newTuple(int size) {
        try { return (MemorySegment) PyTuple_New.invokeExact((long) size); } catch (Throwable t) { throw fail(t); }
    }

    /** tuple[i] = item, stealing the reference to item (fills a new tuple). */
    public static void tupleSetSteal(MemorySegment tuple, int i, MemorySegment item) {
        try { int rc = (int) PyTuple_SetItem.invokeExact(tuple, (long) i, item); } catch (Throwable t) { throw fail(t); }
    }

    public static MemorySegment tuple2(MemorySegment a, MemorySegment b) {
        MemorySegment t = newTuple(2);
        tupleSetSteal(t, 0, a);
        tupleSetSteal(t, 1, b);
        return t;
    }

    /** The offsets of {@code ob_size} in variable-size objects, of the items in a tuple, and of a list's item array. */
    private static final long OB_SIZE = LAYOUT.obSize(), TUPLE_ITEMS = LAYOUT.tupleItems(), LIST_ITEMS = LAYOUT.listItems();

    /**
     * A list or tuple view of {@code o} (a new reference: o itself when it is one, otherwise a list
     * made from iterating it), with {@link #fastSize} and {@link #fastItem} to read it.
     */
    public static MemorySegment sequenceFast(MemorySegment o, MemorySegment message) {
        try { return check((MemorySegment) PySequence_Fast.invokeExact(o, message)); } catch (PythonException e) { throw e; } catch (Throwable t) { throw fail(t); }
    }

    public static long fastSize(MemorySegment seq) {
        return seq.reinterpret(OB_SIZE + 8).get(JAVA_LONG, OB_SIZE);
    }

    /** A borrowed reference to item i of a list or tuple, read directly from its memory. */
    public static MemorySegment fastItem(MemorySegment seq, long i) {
        if (isInstance(seq, ListType)) {
            MemorySegment items = seq.reinterpret(LIST_ITEMS + 8).get(ADDRESS, LIST_ITEMS);
            return items.reinterpret((i + 1) * 8).getAtIndex(ADDRESS, i);
        }
        return seq.reinterpret(TUPLE_ITEMS + (i + 1) * 8).get(ADDRESS, TUPLE_ITEMS + i * 8);
    }

    /**
     * Checks {@link #LAYOUT} against this interpreter's own objects before anything relies on it, so that
     * a build whose layout this code does not know (a later version) is refused with a message rather
     * than crashing at the first request. Every read below stays inside the objects it reads.
     */
    static void checkLayout() {
        MemorySegment tuple = tuple2(newRef(None), newRef(True));
        MemorySegment list = newList(1);
        listSetSteal(list, 0, newRef(False));
        try {
            boolean known = same(typeOf(tuple), TupleType) && same(typeOf(list), ListType)
                    && fastSize(tuple) == 2 && fastSize(list) == 1
                    && same(fastItem(tuple, 0), None) && same(fastItem(tuple, 1), True) && same(fastItem(list, 0), False);
            if (!known) {
                throw new PythonInstall.Unusable("this libpython (3." + LibPython.minorVersion()
                        + (LibPython.freeThreaded() ? ", free-threaded" : "") + ") lays out its objects otherwise than "
                        + LAYOUT + ": Peregrine does not support this CPython version yet");
            }
        } finally {
            decRef(list);
            decRef(tuple);
        }
    }

    public static boolean isListOrTuple(MemorySegment o) {
        return isInstance(o, ListType) || isInstance(o, TupleType);
    }

    // ---- errors ----

    public static boolean errorOccurred() {
        try { return ((MemorySegment) PyErr_Occurred.invokeExact()).address() != 0; } catch (Throwable t) { throw fail(t); }
    }

    public static void clearError() {
        try { PyErr_Clear.invokeExact(); } catch (Throwable t) { throw fail(t); }
    }

    /** Re-raises an exception given as (type, value, traceback), as {@code raise value.with_traceback(tb)}. */
    public static void restoreError(MemorySegment type, MemorySegment value, MemorySegment traceback) {
        incRef(type);
        incRef(value);
        if (!isNone(traceback)) incRef(traceback);
        MemorySegment tb = isNone(traceback) ? NULL : traceback;
        try { PyErr_Restore.invokeExact(type, value, tb); } catch (Throwable t) { throw fail(t); }
    }

    /** Sets a Python exception, for an upcall that is about to return NULL. */
    public static void setError(MemorySegment type, String message) {
        try (Arena arena = Arena.ofConfined()) {
            PyErr_SetString.invokeExact(type, arena.allocateFrom(message));
        } catch (Throwable t) { throw fail(t); }
    }

    static MemorySegment check(MemorySegment result) {
        if (result.address() == 0) throw PythonException.fetch();
        return result;
    }

    static void checkStatus(int rc) {
        if (rc != 0) throw PythonException.fetch();
    }

    // ---- built-in functions backed by Java ----

    /**
     * The method definition of a built-in whose C implementation is {@code upcall}, a METH_FASTCALL
     * stub {@code PyObject *f(PyObject *self, PyObject *const *args, Py_ssize_t nargs)}. It must
     * outlive every function made from it: allocate it in an arena that lives as long as Python.
     */
    public static MemorySegment methodDef(Arena arena, String name, MemorySegment upcall) {
        final int METH_FASTCALL = 0x0080;
        MemorySegment def = arena.allocate(32, 8);
        def.set(ADDRESS, 0, arena.allocateFrom(name));
        def.set(ADDRESS, 8, upcall);
        def.set(JAVA_INT, 16, METH_FASTCALL);
        def.set(ADDRESS, 24, NULL);
        return def;
    }

    /**
     * A new built-in function object for {@code def}, bound to {@code self} (which its C function
     * receives first; NULL for none), like a method of a C type.
     */
    public static MemorySegment builtin(MemorySegment def, MemorySegment self) {
        try { return check((MemorySegment) PyCFunction_NewEx.invokeExact(def, self, NULL)); } catch (PythonException e) { throw e; } catch (Throwable t) { throw fail(t); }
    }

    /** The FFM descriptor of a METH_FASTCALL function. */
    public static final FunctionDescriptor FASTCALL = FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, JAVA_LONG);
}
