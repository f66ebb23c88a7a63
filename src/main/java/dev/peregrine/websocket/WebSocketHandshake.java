package dev.peregrine.websocket;

import dev.peregrine.http.HttpChars;
import dev.peregrine.http.HttpRequestHead;
import io.netty.handler.codec.http.websocketx.extensions.WebSocketExtensionData;
import io.netty.handler.codec.http.websocketx.extensions.WebSocketExtensionUtil;
import io.netty.handler.codec.http.websocketx.extensions.WebSocketServerExtension;
import io.netty.handler.codec.http.websocketx.extensions.compression.PerMessageDeflateServerExtensionHandshaker;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The server side of the RFC 6455 opening handshake, read from our own request head. Netty's
 * WebSocketServerHandshaker works on its FullHttpRequest and writes the 101 itself, before the
 * application could choose a subprotocol or deny; so the few checks and the accept key are done here.
 */
final class WebSocketHandshake {
    private static final String GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

    private WebSocketHandshake() {}

    /** Every value of a request header, joined with ", " as repeated list headers mean; null when absent. */
    static String header(HttpRequestHead head, String lowerCaseName) {
        byte[] bytes = head.bytes();
        String joined = null;
        for (int i = 0; i < head.headerCount(); i++) {
            if (!HttpChars.equalsLowerCase(bytes, head.nameStart(i), head.nameLength(i), lowerCaseName)) continue;
            String value = new String(bytes, head.valueStart(i), head.valueLength(i), StandardCharsets.ISO_8859_1);
            joined = joined == null ? value : joined + ", " + value;
        }
        return joined;
    }

    /** True when Sec-WebSocket-Key is the base64 of 16 bytes, as RFC 6455 4.2.1 requires. */
    static boolean validKey(String key) {
        if (key == null) return false;
        try {
            return Base64.getDecoder().decode(key.trim()).length == 16;
        } catch (IllegalArgumentException e) {
            return false;
        }
    }

    static String acceptKey(String key) {
        try {
            byte[] digest = MessageDigest.getInstance("SHA-1").digest((key.trim() + GUID).getBytes(StandardCharsets.US_ASCII));
            return Base64.getEncoder().encodeToString(digest);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The subprotocols the client offers, in its order of preference. */
    static List<String> subprotocols(HttpRequestHead head) {
        String value = header(head, "sec-websocket-protocol");
        List<String> names = new ArrayList<>(2);
        if (value == null) return names;
        for (String name : value.split(",")) {
            String trimmed = name.trim();
            if (!trimmed.isEmpty()) names.add(trimmed);
        }
        return names;
    }

    /** The permessage-deflate agreement with a client that offers it, or null. */
    static WebSocketServerExtension negotiateDeflate(HttpRequestHead head, int maxMessage) {
        String offered = header(head, "sec-websocket-extensions");
        if (offered == null) return null;
        // The client's window and either side's no_context_takeover are granted. An offer that limits the
        // server's window (server_max_window_bits) is declined: the JDK's Deflater only compresses with the
        // full 15-bit window (Netty would need JZlib for smaller ones), and the client may offer another.
        // maxAllocation bounds what one inflated message may grow to, so a small compressed frame cannot exhaust memory.
        PerMessageDeflateServerExtensionHandshaker handshaker =
                new PerMessageDeflateServerExtensionHandshaker(6, false, 15, true, false, maxMessage);
        List<WebSocketExtensionData> offers;
        try {
            offers = WebSocketExtensionUtil.extractExtensions(offered);
        } catch (RuntimeException e) {
            return null;
        }
        for (WebSocketExtensionData offer : offers) {
            WebSocketServerExtension extension = handshaker.handshakeExtension(fullServerWindowDropped(offer));
            if (extension != null) return extension;
        }
        return null;
    }

    /**
     * The offer without a {@code server_max_window_bits=15}: that asks for the window the server uses
     * anyway (wsproto offers it by default), but Netty's handshaker, told not to accept smaller server
     * windows, declines every offer that names one.
     */
    private static WebSocketExtensionData fullServerWindowDropped(WebSocketExtensionData offer) {
        if (!"15".equals(offer.parameters().get("server_max_window_bits"))) return offer;
        Map<String, String> parameters = new LinkedHashMap<>(offer.parameters());
        parameters.remove("server_max_window_bits");
        return new WebSocketExtensionData(offer.name(), parameters);
    }

    /** The Sec-WebSocket-Extensions response value for an agreed extension. */
    static String extensionHeader(WebSocketServerExtension extension) {
        WebSocketExtensionData data = extension.newReponseData();
        StringBuilder value = new StringBuilder(data.name());
        for (Map.Entry<String, String> parameter : data.parameters().entrySet()) {
            value.append("; ").append(parameter.getKey());
            if (parameter.getValue() != null) value.append('=').append(parameter.getValue());
        }
        return value.toString();
    }
}
