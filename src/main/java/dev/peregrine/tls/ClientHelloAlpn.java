package dev.peregrine.tls;

import io.netty.buffer.ByteBuf;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The ALPN protocols a ClientHello offers, read before any TLS engine exists. Hand-written
 * because Netty's SNI handler hands over the raw ClientHello and extracts only the server name; the
 * certificate of tls-alpn-01 (RFC 8737) must be chosen by name and ALPN together, before the engine is
 * made. The layout is RFC 8446 4.1.2 (the same as TLS 1.2's), the extension RFC 7301 3.1.
 */
final class ClientHelloAlpn {
    private static final int ALPN_EXTENSION = 16;

    private ClientHelloAlpn() {}

    /** {@code hello} starts at client_version; a malformed or truncated hello offers nothing. */
    static boolean offers(ByteBuf hello, String protocol) {
        List<String> offered = offered(hello);
        return offered != null && offered.contains(protocol);
    }

    /** The protocols a hello offers, in its order; null when it has no ALPN extension or is malformed. */
    static List<String> offered(ByteBuf hello) {
        int at = hello.readerIndex() + 2 + 32; // version, random
        int end = hello.writerIndex();
        if (at + 1 > end) return null;
        at += 1 + hello.getUnsignedByte(at); // session id
        if (at + 2 > end) return null;
        at += 2 + hello.getUnsignedShort(at); // cipher suites
        if (at + 1 > end) return null;
        at += 1 + hello.getUnsignedByte(at); // compression methods
        if (at + 2 > end) return null;
        int extensionsEnd = Math.min(end, at + 2 + hello.getUnsignedShort(at));
        at += 2;
        while (at + 4 <= extensionsEnd) {
            int type = hello.getUnsignedShort(at);
            int length = hello.getUnsignedShort(at + 2);
            at += 4;
            if (at + length > extensionsEnd) return null;
            if (type == ALPN_EXTENSION) return protocols(hello, at, at + length);
            at += length;
        }
        return null;
    }

    private static List<String> protocols(ByteBuf hello, int at, int end) {
        if (at + 2 > end) return null;
        int listEnd = Math.min(end, at + 2 + hello.getUnsignedShort(at));
        at += 2;
        List<String> protocols = new ArrayList<>(4);
        while (at < listEnd) {
            int length = hello.getUnsignedByte(at++);
            if (at + length > listEnd) return null;
            protocols.add(hello.toString(at, length, StandardCharsets.US_ASCII));
            at += length;
        }
        return protocols;
    }
}
