package dev.peregrine.edge.cache;

import dev.peregrine.shared.SharedRegion;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

class CacheStoreTest {
    private final List<CacheStore.Slot> evicted = new ArrayList<>();
    private final CacheStore store = new CacheStore(SharedRegion.inProcess(1024 * 1024, 1), evicted::add);

    @Test
    void theIndexTakesOneSlotPerFourKibibytesAndTheRingTheRest() {
        assertEquals(256, store.slots());
        assertEquals(1024 * 1024 - 64 - 256 * CacheStore.SLOT_BYTES, store.ringBytes());
    }

    @Test
    void aSlotWriteNeedsTheVersionItWasReadAt() {
        CacheStore.Slot seen = store.read(3);
        assertEquals(CacheStore.FREE, seen.state());
        assertTrue(store.write(seen, 42, CacheStore.READY, 0, 1000, 10, 64, 100, 7, 5));
        // a writer that read the slot before that write loses
        assertFalse(store.write(seen, 43, CacheStore.FILLING, 1, 2000, 0, 0, 0, 0, 5));
        CacheStore.Slot now = store.read(3);
        assertEquals(seen.version() + 2, now.version());
        assertEquals(42, now.hash());
        assertEquals(CacheStore.READY, now.state());
        assertEquals(1000, now.until());
        assertEquals(100, now.length());
        assertEquals(7, now.variant());
        assertTrue(store.free(now));
        assertEquals(CacheStore.FREE, store.read(3).state());
    }

    @Test
    void aFillingSlotKeepsItsOwner() {
        assertTrue(store.write(store.read(0), 9, CacheStore.FILLING, 123456, 99, 0, 0, 0, 0, 0));
        CacheStore.Slot slot = store.read(0);
        assertEquals(123456, slot.owner());
        assertTrue(slot.live(98));
        assertFalse(slot.live(99));
    }

    @Test
    void aRecordReadsBackWhileTheRingHasNotPassedIt() {
        byte[] record = "a record".getBytes();
        long position = store.append(record, 5);
        assertArrayEquals(record, store.record(position, record.length));
        assertTrue(store.intact(position));
    }

    @Test
    void aRecordLargerThanAQuarterOfTheRingIsRefused() {
        assertEquals(-1, store.append(new byte[(int) (store.ringBytes() / 4)], 1));
    }

    @Test
    void recordsStraddlingTheRingsEndReadBackWhole() {
        byte[] record = new byte[100_000];
        for (int i = 0; i < record.length; i++) record[i] = (byte) i;
        long last = -1;
        for (int i = 0; i < 25; i++) {
            last = store.append(record, 100 + i);
            assertArrayEquals(record, store.record(last, record.length), "record " + i);
        }
        assertTrue(last + record.length > store.ringBytes());
    }

    @Test
    void overwrittenRecordsAreGoneAndTheirSlotsFreedOnce() {
        byte[] record = new byte[60_000];
        Arrays.fill(record, (byte) 1);
        long hash = 77;
        int home = store.home(hash);
        long first = store.append(record, hash);
        assertTrue(store.write(store.read(home), hash, CacheStore.READY, 0, Long.MAX_VALUE, 0, first, record.length, 0, 0));
        for (int i = 0; i < 20; i++) store.append(record, 1000 + i); // 1.2 MB through a ring of less than 1 MiB
        assertFalse(store.intact(first));
        assertNull(store.record(first, record.length));
        assertEquals(CacheStore.FREE, store.read(home).state());
        assertEquals(1, evicted.size());
        assertEquals(record.length, evicted.get(0).length());
    }

    @Test
    void recordsAlreadyReplacedFreeNothing() {
        byte[] record = new byte[60_000];
        long hash = 78;
        int home = store.home(hash);
        long first = store.append(record, hash);
        assertTrue(store.write(store.read(home), hash, CacheStore.READY, 0, Long.MAX_VALUE, 0, first, record.length, 0, 0));
        long second = store.append(record, hash); // the same entry moved to the ring's head
        CacheStore.Slot slot = store.read(home);
        assertTrue(store.write(slot, hash, CacheStore.READY, 0, Long.MAX_VALUE, 0, second, record.length, 0, 0));
        for (int i = 0; i < 14; i++) store.append(record, 2000 + i); // past the first copy, not the second
        assertNotNull(store.record(second, record.length));
        assertEquals(CacheStore.READY, store.read(home).state());
        assertTrue(evicted.isEmpty());
    }

    @Test
    void aKeysSlotsWrapAroundTheIndex() {
        assertEquals(0, store.probe(store.slots() - 1, 1));
    }
}
