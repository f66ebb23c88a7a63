package dev.peregrine.python;

/**
 * Where the few fields that {@link Py} reads straight from memory lie, for a given CPython build. Reading
 * them costs a load instead of a downcall on every header and every item of a response; the price is
 * knowing the builds apart:
 *
 * <ul>
 * <li>A free-threaded build ({@code Py_GIL_DISABLED}, "3.13t") starts every object with its owning
 * thread, a lock, GC bits and two reference counts before {@code ob_type}: a 32-byte header, not 16.
 * <li>3.14 caches a tuple's hash between its size and its items.
 * </ul>
 *
 * <p>Reference counts are never touched here: they go through {@code Py_IncRef}/{@code Py_DecRef},
 * whose fields and atomicity differ between the builds too.
 */
record ObjectLayout(long obType, long obSize, long tupleItems, long listItems) {

    static ObjectLayout of(int minor, boolean freeThreaded) {
        long objectHeader = freeThreaded ? 32 : 16;
        long varObjectHeader = objectHeader + 8;
        long tupleHash = minor >= 14 ? 8 : 0;
        return new ObjectLayout(objectHeader - 8, objectHeader, varObjectHeader + tupleHash, varObjectHeader);
    }
}
