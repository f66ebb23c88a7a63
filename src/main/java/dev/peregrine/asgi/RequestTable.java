package dev.peregrine.asgi;

import java.util.Arrays;

/**
 * The requests and WebSocket connections the application is running, by the number Python code holds for each. A number
 * carries a generation, so a number kept past its request's end (a stray background task calling
 * send) finds nothing rather than a later request in the same slot. Used on the Python thread only.
 */
final class RequestTable {
    private static final int INDEX_BITS = 24;
    private static final long INDEX_MASK = (1L << INDEX_BITS) - 1;

    private AsgiCall[] slots = new AsgiCall[256];
    private long[] generations = new long[256];
    private int[] free = new int[256];
    private int freeCount;
    private int used;

    long add(AsgiCall request) {
        int index;
        if (freeCount > 0) {
            index = free[--freeCount];
        } else {
            if (used == slots.length) grow();
            index = used++;
        }
        slots[index] = request;
        long generation = ++generations[index];
        return generation << INDEX_BITS | index;
    }

    /** How many requests and connections are running. */
    int size() {
        return used - freeCount;
    }

    AsgiCall get(long id) {
        int index = (int) (id & INDEX_MASK);
        if (index >= used || generations[index] != id >>> INDEX_BITS) return null;
        return slots[index];
    }

    AsgiCall remove(long id) {
        AsgiCall request = get(id);
        if (request == null) return null;
        int index = (int) (id & INDEX_MASK);
        slots[index] = null;
        if (freeCount == free.length) free = Arrays.copyOf(free, free.length * 2);
        free[freeCount++] = index;
        return request;
    }

    private void grow() {
        slots = Arrays.copyOf(slots, slots.length * 2);
        generations = Arrays.copyOf(generations, generations.length * 2);
    }
}
