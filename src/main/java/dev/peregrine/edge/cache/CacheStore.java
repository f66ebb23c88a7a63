package dev.peregrine.edge.cache;

import dev.peregrine.shared.SharedRegion;

import java.util.function.Consumer;

/**
 * The response cache's storage, in its section of the shared memory that every worker maps: a control
 * line, an index of fixed slots, and a ring of entry records.
 *
 * <p><b>Index.</b> {@code slots} (a power of two, one per {@value #BYTES_PER_SLOT} bytes of the section)
 * of {@value #SLOT_BYTES} bytes, eight longs: a version, the key's 64-bit hash (0: never used), the
 * state (free, ready, filling, pass; a filling slot also holds its owner's pid), when the state ends
 * (a ready entry's freshness, a fill's deadline, a pass marker's end, in epoch milliseconds), when the
 * response was received (less the Age it came with), the record's ring position, its length and
 * variant hash, and when the entry was last used. A key's slots are the {@value #PROBE} from its hash:
 * its variants (Vary) and its fill marker all live there.
 *
 * <p><b>Seqlock.</b> A writer takes a slot by moving its version from even to odd with compare-and-set,
 * writes the fields, and makes the version even again; a reader reads the version, the fields, and the
 * version again, and retries (a few times, then takes the slot as absent) when they differ or are odd.
 * The version is held over a few field writes only, never over I/O or a record copy. A writer that
 * dies between the two leaves one slot unusable until the next server start.
 *
 * <p><b>Ring.</b> A record is reserved by adding its length to the control line's cursor (an absolute
 * byte count that never wraps), copied in at the cursor modulo the ring's size, and only then published
 * in a slot. Each record starts with three longs: its own position, its key's hash and its length.
 * Eviction is the ring's: new records overwrite the oldest bytes. Before copying in, a writer walks the
 * records its bytes will cover, from the control line's eviction cursor, advancing that cursor by
 * compare-and-set record by record and freeing the slot of each record it passes (whoever advances the
 * cursor over a record frees it, once); a record whose header is not its own (a writer died before
 * writing it) makes the walker jump to where it needs to be, and entries there are found stale by the
 * next lookup instead. A reader copies a record out and then checks that the cursor has not moved more
 * than a ring past its position: if it has, the copy may be torn and counts as absent. Recent use is
 * favoured by moving an entry that is hit while in the oldest quarter of the ring to its head (second
 * chance), so that what is read often survives what was stored once.
 */
final class CacheStore {
    static final int SLOT_BYTES = 64;
    static final int BYTES_PER_SLOT = 4096;
    static final int PROBE = 8;
    private static final int CONTROL_BYTES = 64;
    private static final long CURSOR = 0, EVICTED = 8;
    private static final int RECORD_HEADER = 24;

    static final int FREE = 0, READY = 1, FILLING = 2, PASS = 3;
    private static final int VERSION = 0, HASH = 8, STATE = 16, UNTIL = 24, RECEIVED = 32, POSITION = 40, LENGTH = 48, LAST_USE = 56;
    private static final int READ_TRIES = 8;

    private final SharedRegion area;
    /** Told of each entry the ring's walk freed. */
    private final Consumer<Slot> onEvicted;
    private final int slots;
    private final long ringBase;
    private final long ringBytes;

    CacheStore(SharedRegion area, Consumer<Slot> onEvicted) {
        this.area = area;
        this.onEvicted = onEvicted;
        int wanted = (int) Math.min(1 << 24, Math.max(PROBE, area.size() / BYTES_PER_SLOT));
        this.slots = Integer.highestOneBit(wanted);
        this.ringBase = CONTROL_BYTES + (long) slots * SLOT_BYTES;
        this.ringBytes = (area.size() - ringBase) / 8 * 8;
    }

    int slots() { return slots; }
    long ringBytes() { return ringBytes; }

    /** The first of a key's {@value #PROBE} slots. */
    int home(long hash) {
        return (int) (hash ^ hash >>> 32) & (slots - 1);
    }

    int probe(int home, int i) {
        return (home + i) & (slots - 1);
    }

    /** A consistent copy of one slot's fields. */
    record Slot(int index, long version, long hash, int state, long owner, long until, long received, long position,
                int length, int variant, long lastUse) {
        boolean live(long now) {
            return state != FREE && until > now;
        }
    }

    /** The slot as its last writer left it; null when it stays in the middle of a write. */
    Slot read(int index) {
        long at = (long) index * SLOT_BYTES + CONTROL_BYTES;
        for (int tries = 0; tries < READ_TRIES; tries++) {
            long version = area.get(at + VERSION);
            if ((version & 1) != 0) {
                Thread.onSpinWait();
                continue;
            }
            long hash = area.get(at + HASH), state = area.get(at + STATE), until = area.get(at + UNTIL);
            long received = area.get(at + RECEIVED), position = area.get(at + POSITION), length = area.get(at + LENGTH);
            if (area.get(at + VERSION) != version) continue;
            return new Slot(index, version, hash, (int) (state & 0xff), state >>> 8, until, received, position,
                    (int) length, (int) (length >>> 32), area.get(at + LAST_USE));
        }
        return null;
    }

    /** Writes a slot if it is still as {@code seen} left it; false when another writer got there first. */
    boolean write(Slot seen, long hash, int state, long owner, long until, long received, long position, int length,
                  int variant, long now) {
        long at = (long) seen.index() * SLOT_BYTES + CONTROL_BYTES;
        if (!area.compareAndSet(at + VERSION, seen.version(), seen.version() + 1)) return false;
        area.set(at + HASH, hash);
        area.set(at + STATE, owner << 8 | state);
        area.set(at + UNTIL, until);
        area.set(at + RECEIVED, received);
        area.set(at + POSITION, position);
        area.set(at + LENGTH, (long) variant << 32 | (length & 0xFFFF_FFFFL));
        area.set(at + LAST_USE, now);
        area.set(at + VERSION, seen.version() + 2);
        return true;
    }

    /** Frees a slot if it is still as {@code seen} left it. */
    boolean free(Slot seen) {
        return write(seen, 0, FREE, 0, 0, 0, 0, 0, 0, 0);
    }

    /** Marks an entry used: the slot to reuse last when its key's slots are full. Racy on purpose: a hint. */
    void touch(Slot slot, long now) {
        area.set((long) slot.index() * SLOT_BYTES + CONTROL_BYTES + LAST_USE, now);
    }

    /**
     * Appends a record of the key {@code hash} to the ring and returns its position; -1 when it is larger
     * than a quarter of the ring.
     */
    long append(byte[] record, long hash) {
        int length = record.length;
        if (RECORD_HEADER + length > ringBytes / 4) return -1;
        long reserved = (RECORD_HEADER + length + 7) & ~7L;
        long position = area.getAndAdd(CURSOR, reserved);
        evictUpTo(position + reserved - ringBytes);
        area.set(ringBase + position % ringBytes, position);
        area.set(ringBase + (position + 8) % ringBytes, hash);
        area.set(ringBase + (position + 16) % ringBytes, length);
        long at = (position + RECORD_HEADER) % ringBytes;
        int first = (int) Math.min(length, ringBytes - at);
        area.copyIn(ringBase + at, record, 0, first);
        if (first < length) area.copyIn(ringBase, record, first, length - first);
        return position;
    }

    /** Walks the eviction cursor to {@code end} (absolute), freeing the slot of each record it passes. */
    private void evictUpTo(long end) {
        long evicted;
        while ((evicted = area.get(EVICTED)) < end) {
            long own = area.get(ringBase + evicted % ringBytes);
            long hash = area.get(ringBase + (evicted + 8) % ringBytes);
            long length = area.get(ringBase + (evicted + 16) % ringBytes);
            boolean whole = own == evicted && length >= 0 && RECORD_HEADER + length <= ringBytes / 4;
            long next = whole ? evicted + ((RECORD_HEADER + length + 7) & ~7L) : end;
            if (area.compareAndSet(EVICTED, evicted, next) && whole) freeRecord(hash, evicted);
        }
    }

    private void freeRecord(long hash, long position) {
        int home = home(hash);
        for (int i = 0; i < PROBE; i++) {
            Slot slot = read(probe(home, i));
            if (slot != null && slot.state() == READY && slot.position() == position && free(slot)) {
                onEvicted.accept(slot);
                return;
            }
        }
    }

    /** Whether the record at {@code position} is still whole: no reservation since has reached its bytes. */
    boolean intact(long position) {
        return area.get(CURSOR) <= position + ringBytes;
    }

    /** How far the record at {@code position} is from being overwritten, as a share of the ring (1: just written). */
    double remaining(long position) {
        return 1.0 - (double) (area.get(CURSOR) - position) / ringBytes;
    }

    /** A copy of the record at {@code position}; null when it was overwritten before or while being copied. */
    byte[] record(long position, int length) {
        if (!intact(position)) return null;
        byte[] copy = new byte[length];
        long at = (position + RECORD_HEADER) % ringBytes;
        int first = (int) Math.min(length, ringBytes - at);
        area.copyOut(ringBase + at, copy, 0, first);
        if (first < length) area.copyOut(ringBase, copy, first, length - first);
        SharedRegion.loadFence();
        return intact(position) ? copy : null;
    }
}
