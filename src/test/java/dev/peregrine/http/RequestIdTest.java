package dev.peregrine.http;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class RequestIdTest {

    private static boolean valid(String id) {
        byte[] bytes = id.getBytes(StandardCharsets.ISO_8859_1);
        return RequestId.valid(bytes, 0, bytes.length);
    }

    @ParameterizedTest
    @ValueSource(strings = {"a", "0f8fad5b-d9cb-469f-a165-70867728950e", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "YWJj+ZGVm/Zw==",
            "trace:span.1_2"})
    void acceptsTokenLikeIds(String id) {
        assertTrue(valid(id), id);
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "has space", "quote\"d", "semi;colon", "comma,id", "back\\slash", "caf\u00e9", "tab\tid"})
    void refusesAnythingElse(String id) {
        assertFalse(valid(id), id);
    }

    @Test
    void lengthIsBounded() {
        assertTrue(valid("x".repeat(RequestId.MAX_LENGTH)));
        assertFalse(valid("x".repeat(RequestId.MAX_LENGTH + 1)));
    }

    @Test
    void generatedIdsAreValidHexAndDistinct() {
        Set<String> seen = new HashSet<>();
        for (int i = 0; i < 1000; i++) {
            byte[] out = new byte[RequestId.GENERATED_LENGTH + 2];
            RequestId.generate(out, 1);
            String id = new String(out, 1, RequestId.GENERATED_LENGTH, StandardCharsets.US_ASCII);
            assertTrue(id.matches("[0-9a-f]{32}"), id);
            assertEquals(0, out[0]);
            assertEquals(0, out[out.length - 1]);
            seen.add(id);
        }
        assertEquals(1000, seen.size());
    }
}
