package dev.peregrine.websocket;

import dev.peregrine.http.HttpRequestHead;
import io.netty.handler.codec.http.websocketx.extensions.WebSocketServerExtension;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

class WebSocketHandshakeTest {

    /** A request head laid out as the transports lay theirs out: one array, offsets into it. */
    private record Head(byte[] bytes, int[] offsets) implements HttpRequestHead {
        static Head of(String... namesAndValues) {
            StringBuilder text = new StringBuilder();
            List<Integer> offsets = new ArrayList<>();
            for (int i = 0; i < namesAndValues.length; i += 2) {
                offsets.add(text.length());
                offsets.add(namesAndValues[i].length());
                text.append(namesAndValues[i]);
                offsets.add(text.length());
                offsets.add(namesAndValues[i + 1].length());
                text.append(namesAndValues[i + 1]);
            }
            return new Head(text.toString().getBytes(StandardCharsets.ISO_8859_1), offsets.stream().mapToInt(Integer::intValue).toArray());
        }

        @Override public String method() { return "GET"; }
        @Override public int pathStart() { return 0; }
        @Override public int pathLength() { return 0; }
        @Override public int queryStart() { return 0; }
        @Override public int queryLength() { return 0; }
        @Override public int headerCount() { return offsets.length / 4; }
        @Override public int nameStart(int i) { return offsets[4 * i]; }
        @Override public int nameLength(int i) { return offsets[4 * i + 1]; }
        @Override public int valueStart(int i) { return offsets[4 * i + 2]; }
        @Override public int valueLength(int i) { return offsets[4 * i + 3]; }
        @Override public long contentLength() { return 0; }
        @Override public boolean chunked() { return false; }
    }

    @Test
    void acceptKeyIsTheOneOfRfc6455() {
        assertEquals("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", WebSocketHandshake.acceptKey("dGhlIHNhbXBsZSBub25jZQ=="));
    }

    @Test
    void keyMustBeSixteenBytesOfBase64() {
        assertTrue(WebSocketHandshake.validKey("dGhlIHNhbXBsZSBub25jZQ=="));
        assertFalse(WebSocketHandshake.validKey("c2hvcnQ="));
        assertFalse(WebSocketHandshake.validKey("not base64!"));
        assertFalse(WebSocketHandshake.validKey(null));
    }

    @Test
    void subprotocolsFromEveryHeaderInOrder() {
        Head head = Head.of("sec-websocket-protocol", "chat.v1, chat.v2", "x-other", "y", "sec-websocket-protocol", " mqtt ,");
        assertEquals(List.of("chat.v1", "chat.v2", "mqtt"), WebSocketHandshake.subprotocols(head));
        assertEquals(List.of(), WebSocketHandshake.subprotocols(Head.of("host", "x")));
    }

    @Test
    void deflateAgreedWithTheParametersAsked() {
        WebSocketServerExtension plain = WebSocketHandshake.negotiateDeflate(Head.of("sec-websocket-extensions", "permessage-deflate"), 1 << 20);
        assertNotNull(plain);
        assertEquals("permessage-deflate", WebSocketHandshake.extensionHeader(plain));
        WebSocketServerExtension noContext = WebSocketHandshake.negotiateDeflate(
                Head.of("sec-websocket-extensions", "permessage-deflate; server_no_context_takeover; client_max_window_bits"), 1 << 20);
        assertNotNull(noContext);
        assertTrue(WebSocketHandshake.extensionHeader(noContext).contains("server_no_context_takeover"));
    }

    @Test
    void deflateOfferLimitingTheServerWindowIsDeclinedAndTheNextTaken() {
        assertNull(WebSocketHandshake.negotiateDeflate(Head.of("sec-websocket-extensions", "permessage-deflate; server_max_window_bits=10"), 1 << 20));
        WebSocketServerExtension fallback = WebSocketHandshake.negotiateDeflate(
                Head.of("sec-websocket-extensions", "permessage-deflate; server_max_window_bits=10, permessage-deflate"), 1 << 20);
        assertNotNull(fallback);
        assertNull(WebSocketHandshake.negotiateDeflate(Head.of("sec-websocket-extensions", "x-webkit-deflate-frame"), 1 << 20));
        assertNull(WebSocketHandshake.negotiateDeflate(Head.of("host", "x"), 1 << 20));
    }

    @Test
    void deflateOfferAskingForTheFullServerWindowIsAgreed() {
        WebSocketServerExtension full = WebSocketHandshake.negotiateDeflate(
                Head.of("sec-websocket-extensions", "permessage-deflate; client_max_window_bits=15; server_max_window_bits=15"), 1 << 20);
        assertNotNull(full);
        assertEquals("permessage-deflate", WebSocketHandshake.extensionHeader(full)); // both windows the full 15 bits: nothing to say
    }
}
