package dev.peregrine.python;

import java.lang.foreign.MemorySegment;

/**
 * The Java body of a built-in function that Python code calls. It runs on the calling Python thread
 * with the GIL held, receives borrowed references to its arguments, and returns a new reference.
 */
@FunctionalInterface
public interface NativeFunction {
    MemorySegment call(Arguments args) throws Exception;

    /** The positional arguments of one call (borrowed references). */
    final class Arguments {
        private final MemorySegment array;
        private final long count;

        Arguments(MemorySegment array, long count) {
            this.array = count == 0 ? MemorySegment.NULL : array.reinterpret(count * 8);
            this.count = count;
        }

        public long count() { return count; }

        public MemorySegment get(int i) {
            if (i >= count) throw new PythonRaise(Py.ExcTypeError, "missing argument " + (i + 1));
            return array.getAtIndex(java.lang.foreign.ValueLayout.ADDRESS, i);
        }

        /** Argument i, or null when fewer were passed. */
        public MemorySegment optional(int i) {
            return i < count ? array.getAtIndex(java.lang.foreign.ValueLayout.ADDRESS, i) : null;
        }

        public int intAt(int i) {
            return (int) Py.toLong(get(i));
        }
    }
}
