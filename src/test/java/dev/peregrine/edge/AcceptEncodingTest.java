package dev.peregrine.edge;

import org.junit.jupiter.api.Test;

import java.util.EnumSet;
import java.util.Set;

import static dev.peregrine.edge.ContentCoding.BR;
import static dev.peregrine.edge.ContentCoding.GZIP;
import static dev.peregrine.edge.ContentCoding.ZSTD;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

class AcceptEncodingTest {
    private static final Set<ContentCoding> ALL = EnumSet.allOf(ContentCoding.class);

    private static ContentCoding choose(String value) {
        return AcceptEncoding.choose(value, ALL);
    }

    @Test
    void noHeaderOrEmptyMeansIdentity() {
        assertNull(choose(null));
        assertNull(choose(""));
        assertNull(choose("  "));
    }

    @Test
    void serverOrderOnTies() {
        assertEquals(BR, choose("gzip, deflate, br, zstd"));
        assertEquals(ZSTD, choose("gzip, zstd"));
        assertEquals(GZIP, choose("gzip"));
        assertEquals(GZIP, choose("deflate, gzip"));
        assertEquals(BR, choose("gzip;q=0.8, br;q=0.8, zstd;q=0.8"));
    }

    @Test
    void higherWeightWins() {
        assertEquals(GZIP, choose("br;q=0.5, gzip"));
        assertEquals(ZSTD, choose("br;q=0.1, zstd;q=0.9, gzip;q=0.8"));
        assertEquals(GZIP, choose("br;q=0.001,gzip;q=0.002"));
    }

    @Test
    void zeroExcludes() {
        assertEquals(ZSTD, choose("br;q=0, zstd, gzip"));
        assertNull(choose("gzip;q=0"));
        assertNull(choose("gzip;q=0.000"));
        assertEquals(GZIP, choose("gzip;q=0.001"));
    }

    @Test
    void starStandsForUnlistedCodings() {
        assertEquals(BR, choose("*"));
        assertEquals(ZSTD, choose("*, br;q=0"));
        assertNull(choose("*;q=0"));
        assertEquals(GZIP, choose("*;q=0, gzip"));
        assertEquals(GZIP, choose("gzip, *;q=0.5")); // gzip 1 beats br and zstd at 0.5
    }

    @Test
    void identity() {
        assertEquals(GZIP, choose("gzip, identity"));
        assertEquals(GZIP, choose("identity;q=0, gzip"));
        assertNull(choose("gzip;q=0.5, identity"));
        assertNull(choose("*;q=0.5, identity;q=1"));
        assertEquals(BR, choose("*;q=0.5")); // identity unlisted: the tie goes to the coding
        assertNull(choose("identity"));
        // identity refused and nothing acceptable: identity anyway (documented, no 406)
        assertNull(choose("identity;q=0"));
        assertNull(choose("identity;q=0, *;q=0"));
        assertNull(choose("deflate, identity;q=0"));
    }

    @Test
    void caseInsensitiveAndAliases() {
        assertEquals(BR, choose("GZIP, BR"));
        assertEquals(ZSTD, choose("Zstd;Q=1, br;Q=0"));
        assertEquals(GZIP, choose("x-gzip"));
        assertNull(choose("IDENTITY;Q=1, GZIP;Q=0.5"));
    }

    @Test
    void malformedPartsIgnored() {
        assertEquals(GZIP, choose("br;q=2, gzip"));
        assertEquals(GZIP, choose("br;q=abc, gzip"));
        assertEquals(GZIP, choose("br;q=0.5555, gzip;q=0.5"));
        assertEquals(GZIP, choose("br;q=1.5, gzip;q=0.5"));
        assertEquals(GZIP, choose(",, ;q=1, gzip,,"));
        assertEquals(BR, choose("br;level=3, gzip"));
        assertEquals(GZIP, choose(" gzip ; q = 0.7 , br ; q=0.6"));
        assertEquals(GZIP, choose("br;q=, gzip"));
    }

    @Test
    void onlyOfferedCodings() {
        assertEquals(GZIP, AcceptEncoding.choose("br, zstd, gzip", EnumSet.of(GZIP)));
        assertNull(AcceptEncoding.choose("br", EnumSet.of(GZIP)));
        assertNull(AcceptEncoding.choose("br", EnumSet.noneOf(ContentCoding.class)));
        assertEquals(GZIP, AcceptEncoding.choose("*", EnumSet.of(GZIP)));
    }
}
