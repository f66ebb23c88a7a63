package dev.peregrine.python;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** The offsets against the structs of CPython's headers (Include/object.h, cpython/tupleobject.h, cpython/listobject.h). */
class ObjectLayoutTest {

    @Test
    void gilBuildsUpTo313() {
        for (int minor = 10; minor <= 13; minor++) {
            assertEquals(new ObjectLayout(8, 16, 24, 24), ObjectLayout.of(minor, false), "3." + minor);
        }
    }

    @Test
    void python314CachesTheTupleHashBeforeItsItems() {
        assertEquals(new ObjectLayout(8, 16, 32, 24), ObjectLayout.of(14, false));
    }

    @Test
    void freeThreadedBuildsHaveA32ByteHeader() {
        assertEquals(new ObjectLayout(24, 32, 40, 40), ObjectLayout.of(13, true));
        assertEquals(new ObjectLayout(24, 32, 48, 40), ObjectLayout.of(14, true));
    }
}
