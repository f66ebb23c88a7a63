package dev.peregrine.python;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * Python objects made once for byte strings that recur in every request (header names, methods), so
 * that a request reuses them instead of allocating its own. Used on Python threads only: the entries
 * are Python references. It stops growing at a fixed size, so hostile clients inventing header names
 * cannot make it grow without bound; past that, callers build a fresh object.
 */
public final class InternTable {
    /** Makes the Python object for a byte range (a new reference). */
    public interface Factory {
        MemorySegment make(byte[] data, int offset, int length);
    }

    private static final int CAPACITY = 512; // a power of two; at most half is used
    private final byte[][] keys = new byte[CAPACITY][];
    private final MemorySegment[] values = new MemorySegment[CAPACITY];
    private final Factory factory;
    private int size;

    public InternTable(Factory factory) {
        this.factory = factory;
    }

    /** A new reference to the object for data[offset, offset+length). */
    public MemorySegment get(byte[] data, int offset, int length) {
        int hash = hash(data, offset, length);
        for (int i = hash & (CAPACITY - 1); ; i = (i + 1) & (CAPACITY - 1)) {
            byte[] key = keys[i];
            if (key == null) {
                MemorySegment value = factory.make(data, offset, length);
                if (size < CAPACITY / 2 && value.address() != 0) {
                    keys[i] = Arrays.copyOfRange(data, offset, offset + length);
                    values[i] = value;
                    size++;
                    Py.incRef(value);
                }
                return value;
            }
            if (key.length == length && Arrays.equals(key, 0, length, data, offset, offset + length)) {
                return Py.newRef(values[i]);
            }
        }
    }

    private static int hash(byte[] data, int offset, int length) {
        int h = length;
        for (int i = offset; i < offset + length; i++) h = 31 * h + data[i];
        return h ^ (h >>> 16);
    }
}
