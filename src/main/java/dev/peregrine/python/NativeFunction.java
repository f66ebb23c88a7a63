package dev.peregrine.python;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The Java body of a built-in function that Python code calls. It runs on the calling Python thread
 * with the GIL held, receives borrowed references to its arguments, and returns a new reference.
 */
@FunctionalInterface
public interface NativeFunction {
    MemorySegment call(Arguments args) throws Exception;

    /** The positional arguments of one call (borrowed references). */
    final class Arguments {
        private final MemorySegment self;
        private final MemorySegment array;
        private final long count;

        Arguments(MemorySegment self, MemorySegment array, long count) {
            this.self = self;
            this.array = count == 0 ? MemorySegment.NULL : array.reinterpret(count * 8);
            this.count = count;
        }

        /** The object the function was bound to ({@link PythonInterpreter#bind}), or NULL. */
        public MemorySegment self() { return self; }

        public long count() { return count; }

        public MemorySegment get(int i) {
            if (i >= count) throw new PythonRaise(Py.ExcTypeError, "missing argument " + (i + 1));
            return array.getAtIndex(ValueLayout.ADDRESS, i);
        }

        /** Argument i, or null when fewer were passed. */
        public MemorySegment optional(int i) {
            return i < count ? array.getAtIndex(ValueLayout.ADDRESS, i) : null;
        }
    }
}
