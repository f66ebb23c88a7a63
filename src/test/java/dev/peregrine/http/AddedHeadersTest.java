package dev.peregrine.http;

import dev.peregrine.http1.RequestHeadParser;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

class AddedHeadersTest {

    private static RequestHead head(int spareBytes, int spareHeaders, String... headerLines) {
        StringBuilder raw = new StringBuilder("GET /p?q HTTP/1.1\r\nhost: x\r\n");
        for (String line : headerLines) raw.append(line).append("\r\n");
        ByteBuf in = Unpooled.copiedBuffer(raw.append("\r\n").toString(), StandardCharsets.ISO_8859_1);
        try {
            return new RequestHeadParser(8192, spareBytes, spareHeaders).parse(in);
        } finally {
            in.release();
        }
    }

    private static RequestHead head(String... headerLines) {
        return head(RequestId.HEADER.length + RequestId.GENERATED_LENGTH + 40, 2, headerLines);
    }

    private static List<String> headers(RequestHead h) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < h.headerCount(); i++) {
            out.add(new String(h.bytes(), h.nameStart(i), h.nameLength(i), StandardCharsets.ISO_8859_1) + ": "
                    + new String(h.bytes(), h.valueStart(i), h.valueLength(i), StandardCharsets.ISO_8859_1));
        }
        return out;
    }

    private static String value(RequestHead h, int i) {
        return new String(h.bytes(), h.valueStart(i), h.valueLength(i), StandardCharsets.ISO_8859_1);
    }

    @Test
    void aValidClientIdIsKept() {
        RequestHead h = head("x-request-id: abc-123", "accept: */*");
        int index = AddedHeaders.requestId(h);
        assertEquals("abc-123", value(h, index));
        assertEquals(List.of("host: x", "x-request-id: abc-123", "accept: */*"), headers(h));
    }

    @Test
    void aMissingIdIsAddedWithoutCopyingTheHead() {
        RequestHead h = head("accept: */*");
        byte[] before = h.bytes();
        int index = AddedHeaders.requestId(h);
        assertSame(before, h.bytes(), "the parser's spare room is used");
        assertTrue(value(h, index).matches("[0-9a-f]{32}"), value(h, index));
        assertEquals(List.of("host: x", "accept: */*", "x-request-id: " + value(h, index)), headers(h));
        assertEquals("GET /p?q HTTP/1.1 (3 headers)", h.toString());
    }

    @Test
    void invalidOrRepeatedIdsAreReplacedByOne() {
        for (String[] lines : List.of(new String[] {"x-request-id: bad id", "accept: */*"},
                new String[] {"x-request-id: a", "accept: */*", "x-request-id: b"})) {
            RequestHead h = head(lines);
            int index = AddedHeaders.requestId(h);
            String id = value(h, index);
            assertTrue(id.matches("[0-9a-f]{32}"), id);
            assertEquals(List.of("host: x", "accept: */*", "x-request-id: " + id), headers(h));
        }
    }

    @Test
    void withoutSpareRoomTheHeadGrows() {
        RequestHead h = head(0, 0, "accept: */*");
        int index = AddedHeaders.requestId(h);
        AddedHeaders.requestStart(h, 1_700_000_000_123_456L, false);
        assertEquals(List.of("host: x", "accept: */*", "x-request-id: " + value(h, index), "x-request-start: t=1700000000123456"),
                headers(h));
    }

    @Test
    void requestStartReplacesAClientsValueButKeepsATrustedProxys() {
        RequestHead fromClient = head("x-request-start: t=1", "accept: */*");
        AddedHeaders.requestStart(fromClient, 1_700_000_000_000_001L, false);
        assertEquals(List.of("host: x", "accept: */*", "x-request-start: t=1700000000000001"), headers(fromClient));

        RequestHead fromProxy = head("x-request-start: t=1699999999999999", "accept: */*");
        AddedHeaders.requestStart(fromProxy, 1_700_000_000_000_001L, true);
        assertEquals(List.of("host: x", "x-request-start: t=1699999999999999", "accept: */*"), headers(fromProxy));
    }

    @Test
    void spareRoomIsInvisibleToTheParser() {
        RequestHead plain = head(0, 0, "accept: */*", "cookie: a=b");
        RequestHead roomy = head(500, 4, "accept: */*", "cookie: a=b");
        assertEquals(headers(plain), headers(roomy));
        assertNotEquals(plain.bytes().length, roomy.bytes().length);
    }
}
