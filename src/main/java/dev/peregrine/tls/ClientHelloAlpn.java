package dev.peregrine.tls;

import io.netty.buffer.ByteBuf;

import java.nio.charset.StandardCharsets;

/**
 * Whether a ClientHello offers a given ALPN protocol, read before any TLS engine exists. Hand-written
 * because Netty's SNI handler hands over the raw ClientHello and extracts only the server name; the
 * certificate of tls-alpn-01 (RFC 8737) must be chosen by name and ALPN together, before the engine is
 * made. The layout is RFC 8446 4.1.2 (the same as TLS 1.2's), the extension RFC 7301 3.1.
 */
final class ClientHelloAlpn {
    private static final int ALPN_EXTENSION = 16;

    private ClientHelloAlpn() {}

    /** {@code hello} starts at client_version; a malformed or truncated hello offers nothing. */
    static boolean offers(ByteBuf hello, String protocol) {
        byte[] wanted = protocol.getBytes(StandardCharsets.US_ASCII);
        int at = hello.readerIndex() + 2 + 32; // version, random
        int end = hello.writerIndex();
        if (at + 1 > end) return false;
        at += 1 + hello.getUnsignedByte(at); // session id
        if (at + 2 > end) return false;
        at += 2 + hello.getUnsignedShort(at); // cipher suites
        if (at + 1 > end) return false;
        at += 1 + hello.getUnsignedByte(at); // compression methods
        if (at + 2 > end) return false;
        int extensionsEnd = Math.min(end, at + 2 + hello.getUnsignedShort(at));
        at += 2;
        while (at + 4 <= extensionsEnd) {
            int type = hello.getUnsignedShort(at);
            int length = hello.getUnsignedShort(at + 2);
            at += 4;
            if (at + length > extensionsEnd) return false;
            if (type == ALPN_EXTENSION) return listContains(hello, at, at + length, wanted);
            at += length;
        }
        return false;
    }

    private static boolean listContains(ByteBuf hello, int at, int end, byte[] wanted) {
        if (at + 2 > end) return false;
        int listEnd = Math.min(end, at + 2 + hello.getUnsignedShort(at));
        at += 2;
        while (at < listEnd) {
            int length = hello.getUnsignedByte(at++);
            if (at + length > listEnd) return false;
            if (length == wanted.length) {
                boolean same = true;
                for (int i = 0; i < length && same; i++) same = hello.getByte(at + i) == wanted[i];
                if (same) return true;
            }
            at += length;
        }
        return false;
    }
}
