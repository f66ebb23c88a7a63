package dev.peregrine.shared;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class SharedRegionTest {
    @Test
    void twoMappingsOfOneFileSeeEachOthersWrites(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("area");
        SharedRegion a = SharedRegion.create(file, 128, 42);
        SharedRegion b = SharedRegion.open(file, 128, 42);
        assertEquals(SharedRegion.HEADER_BYTES + 128, Files.size(file));
        a.set(8, 5);
        assertEquals(5, b.get(8));
        assertTrue(b.compareAndSet(8, 5, 6));
        assertFalse(a.compareAndSet(8, 5, 7));
        assertEquals(6, a.getAndAdd(8, 1));
        assertEquals(7, b.slice(8, 16).get(0));
    }

    @Test
    void anAreaOfAnotherLayoutOrSizeIsRefused(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("area");
        SharedRegion.create(file, 128, 42);
        assertThrows(IOException.class, () -> SharedRegion.open(file, 128, 43));
        assertThrows(IOException.class, () -> SharedRegion.open(file, 64, 42));
        Files.write(dir.resolve("other"), new byte[SharedRegion.HEADER_BYTES + 128]);
        assertThrows(IOException.class, () -> SharedRegion.open(dir.resolve("other"), 128, 42));
    }

    @Test
    void accessOutsideTheAreaOrUnalignedIsRefused() {
        SharedRegion r = SharedRegion.inProcess(64, 1);
        assertThrows(IndexOutOfBoundsException.class, () -> r.get(64));
        assertThrows(IndexOutOfBoundsException.class, () -> r.get(-8));
        assertThrows(IndexOutOfBoundsException.class, () -> r.set(4, 1));
        assertThrows(IndexOutOfBoundsException.class, () -> r.slice(32, 40));
        assertEquals(0, r.get(56));
    }
}
