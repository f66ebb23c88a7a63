package dev.peregrine.http;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

class PercentDecoderTest {

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.ISO_8859_1);
    }

    private static String decode(String s) {
        byte[] in = bytes(s);
        byte[] out = PercentDecoder.decode(in, 0, in.length);
        return out == null ? null : new String(out, StandardCharsets.ISO_8859_1);
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "/", "/plain/path", "/a+b", "/caf\u00e9"})
    void noPercentGivesNull(String path) {
        assertNull(decode(path));
    }

    @ParameterizedTest
    @CsvSource(value = {
            "%41%42         | AB",
            "/a%20b         | /a b",
            "%2F            | /",
            "/x%2fy         | /x/y",
            "%7e%7E         | ~~",
            "%%41           | %A",
            "%25            | %",
            "%2541          | %41",
            "%zz            | %zz",
            "/a%zz/b        | /a%zz/b",
            "%4             | %4",
            "/x%4           | /x%4",
            "%              | %",
            "/x%            | /x%",
            "%4g%41         | %4gA",
            "%g4            | %g4",
            "a%41%          | aA%",
            "+%2B           | ++",
    }, delimiter = '|')
    void decodes(String input, String expected) {
        assertEquals(expected, decode(input));
    }

    @Test
    void utf8IsDecodedAsBytes() {
        byte[] in = bytes("/caf%C3%A9/%E2%82%AC");
        byte[] out = PercentDecoder.decode(in, 0, in.length);
        assertNotNull(out);
        assertArrayEquals(new byte[] {'/', 'c', 'a', 'f', (byte) 0xC3, (byte) 0xA9, '/', (byte) 0xE2, (byte) 0x82, (byte) 0xAC}, out);
        assertEquals("/caf\u00e9/\u20ac", new String(out, StandardCharsets.UTF_8));
    }

    @Test
    void invalidUtf8IsPassedOnAsBytes() {
        byte[] in = bytes("%FF%C3");
        assertArrayEquals(new byte[] {(byte) 0xFF, (byte) 0xC3}, PercentDecoder.decode(in, 0, in.length));
    }

    @Test
    void rawHighBytesAroundEscapesAreKept() {
        byte[] in = {(byte) 0xC3, (byte) 0xA9, '%', '4', '1', (byte) 0xFF};
        assertArrayEquals(new byte[] {(byte) 0xC3, (byte) 0xA9, 'A', (byte) 0xFF}, PercentDecoder.decode(in, 0, in.length));
    }

    @Test
    void percentFollowedByHighByteIsLiteral() {
        byte[] in = {'%', (byte) 0xC3, (byte) 0xA9};
        assertArrayEquals(in, PercentDecoder.decode(in, 0, in.length));
    }

    @Test
    void onlyTheGivenRangeIsDecoded() {
        byte[] in = bytes("GET /a%41b%42 HTTP/1.1");
        assertEquals("/aAbB", new String(PercentDecoder.decode(in, 4, 9), StandardCharsets.ISO_8859_1));
        // The range ends in the middle of an escape: what lies beyond it must not be used.
        byte[] cut = bytes("/x%4142");
        assertEquals("/x%4", new String(PercentDecoder.decode(cut, 0, 4), StandardCharsets.ISO_8859_1));
        assertEquals("/x%", new String(PercentDecoder.decode(cut, 0, 3), StandardCharsets.ISO_8859_1));
        // A '%' before the range does not count.
        byte[] before = bytes("%41/plain");
        assertNull(PercentDecoder.decode(before, 3, 6));
        assertEquals("A", new String(PercentDecoder.decode(before, 0, 3), StandardCharsets.ISO_8859_1));
    }

    @Test
    void inputIsNotModified() {
        byte[] in = bytes("/a%41");
        PercentDecoder.decode(in, 0, in.length);
        assertArrayEquals(bytes("/a%41"), in);
    }
}
