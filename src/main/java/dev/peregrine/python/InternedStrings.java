package dev.peregrine.python;

import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.Map;

/**
 * Interned Python strs for the few values that recur across requests (methods, protocol versions,
 * schemes, server addresses): made once, then shared by every scope or environ. Python threads only.
 */
public final class InternedStrings {
    private final Map<String, MemorySegment> strings = new HashMap<>();

    /** A borrowed reference, valid for the life of the interpreter. */
    public MemorySegment get(String value) {
        MemorySegment s = strings.get(value);
        if (s == null) {
            s = Py.internedStr(value);
            strings.put(value, s);
        }
        return s;
    }
}
