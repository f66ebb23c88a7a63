package dev.peregrine.webtransport;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

class StreamErrorsTest {
    @Test
    void theEndsOfTheBlockAreThoseChromiumUses() {
        assertEquals(0x52e4a40fa8dbL, StreamErrors.toHttp3(0));
        assertEquals(0x52e5ac983162L, StreamErrors.toHttp3(0xffffffffL));
        // 0x1e codes in a row, then one greasing code is stepped over.
        assertEquals(StreamErrors.FIRST + 0x1d, StreamErrors.toHttp3(0x1d));
        assertEquals(StreamErrors.FIRST + 0x1f, StreamErrors.toHttp3(0x1e));
    }

    @ParameterizedTest
    @ValueSource(longs = {0, 1, 5, 7, 9, 0x1d, 0x1e, 0x1f, 0xff, 0x10000, 0x7fffffffL, 0xfffffffeL, 0xffffffffL})
    void codesRoundTripAndNeverLandOnAGreasingCode(long code) {
        long http3 = StreamErrors.toHttp3(code);
        assertNotEquals(0, (http3 - 0x21) % 0x1f, "a greasing code: " + Long.toHexString(http3));
        assertEquals(code, StreamErrors.fromHttp3(http3));
    }

    @Test
    void everyCodeOfTheBlockButTheGreasingOnesCarriesOneInOrder() {
        long expected = 0;
        for (long http3 = StreamErrors.FIRST; http3 < StreamErrors.FIRST + 10_000; http3++) {
            long code = StreamErrors.fromHttp3(http3);
            if ((http3 - 0x21) % 0x1f == 0) {
                assertEquals(StreamErrors.NONE, code, Long.toHexString(http3));
            } else {
                assertEquals(expected++, code, Long.toHexString(http3));
            }
        }
    }

    @ParameterizedTest
    @ValueSource(longs = {0, 0x100, 0x10c, 0x170d7b68L, StreamErrors.FIRST - 1, StreamErrors.LAST + 1, Varint.MAX})
    void codesOutsideTheBlockCarryNone(long http3) {
        assertEquals(StreamErrors.NONE, StreamErrors.fromHttp3(http3));
    }

    @ParameterizedTest
    @ValueSource(longs = {-1, 0x100000000L})
    void onlyThirtyTwoBitCodesAreMapped(long code) {
        assertThrows(IllegalArgumentException.class, () -> StreamErrors.toHttp3(code));
    }
}
