package dev.peregrine.python;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.ADDRESS;

/** A Python exception carried into Java: its one-line summary and its formatted traceback. */
public final class PythonException extends RuntimeException {
    private final String traceback;
    private final String typeName;

    public PythonException(String typeName, String summary, String traceback) {
        super(summary, null, false, false);
        this.typeName = typeName;
        this.traceback = traceback;
    }

    /** The full "Traceback (most recent call last): ..." text, as Python prints it. */
    public String traceback() { return traceback; }

    public String typeName() { return typeName; }

    private static volatile MemorySegment formatter;

    /** Called once the interpreter runs: {@code traceback.format_exception} formats what we fetch. */
    static void useFormatter(MemorySegment formatException) {
        formatter = formatException;
    }

    /** Takes the pending Python error (the GIL is held), clearing it. */
    public static PythonException fetch() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment slots = arena.allocate(ADDRESS, 3);
            Py.PyErr_Fetch.invokeExact(slots, slots.asSlice(8), slots.asSlice(16));
            Py.PyErr_NormalizeException.invokeExact(slots, slots.asSlice(8), slots.asSlice(16));
            MemorySegment type = slots.get(ADDRESS, 0), value = slots.get(ADDRESS, 8), tb = slots.get(ADDRESS, 16);
            if (type.address() == 0) return new PythonException("SystemError", "no Python error was set", "");
            MemorySegment nameObject = Py.getAttr(type, "__name__");
            String typeName = Py.toJavaString(nameObject);
            Py.decRef(nameObject);
            String summary = typeName + ": " + (value.address() == 0 ? "" : Py.str(value));
            String text = summary;
            MemorySegment format = formatter;
            if (format != null) {
                MemorySegment lines = Py.callRaw(format, type, value.address() == 0 ? Py.None : value, tb.address() == 0 ? Py.None : tb);
                if (lines.address() != 0) {
                    StringBuilder sb = new StringBuilder();
                    for (long i = 0, n = Py.fastSize(lines); i < n; i++) sb.append(Py.toJavaString(Py.fastItem(lines, i)));
                    text = sb.toString().stripTrailing();
                    Py.decRef(lines);
                } else {
                    Py.clearError();
                }
            }
            Py.decRef(type);
            Py.decRef(value);
            Py.decRef(tb);
            return new PythonException(typeName, summary, text);
        } catch (Throwable t) {
            return new PythonException("SystemError", "could not fetch the Python error: " + t, "");
        }
    }
}
