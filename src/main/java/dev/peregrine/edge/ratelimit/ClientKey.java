package dev.peregrine.edge.ratelimit;

import dev.peregrine.config.TrustedProxies.IpLiterals;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;

/**
 * A client of the rate limit as one long, the whole key its table stores: an IPv6 client is its /64
 * (one subscriber usually holds a whole /64, and could otherwise pick a fresh address per request), an
 * IPv4 client its address. IPv4 keys, and the few keys below, live in the part of the 64-bit space
 * that IPv6 gives to multicast (ff00::/8), from which no client sends; an IPv6 /64 in that space is
 * itself one key. Every key is stored plus one, so that 0 marks a free entry (::/64, the loopback's,
 * would otherwise read as free).
 */
final class ClientKey {
    private ClientKey() {}

    private static final long IPV4 = 0xFFFF_FFFE_0000_0000L;
    /** Every peer on a unix socket without a trusted proxy in front: one budget, the local host's. */
    static final long UNIX = 0xFFFF_FFFD_0000_0000L + 1;
    private static final long MULTICAST = 0xFFFF_FFFC_0000_0000L;

    /** The stored key of {@code client}; null is a peer on a unix socket. Never 0. */
    static long of(InetSocketAddress client) {
        if (client == null || client.getAddress() == null) return UNIX;
        return of(client.getAddress());
    }

    static long of(InetAddress address) {
        byte[] bytes = address.getAddress();
        if (address instanceof Inet4Address) return (IPV4 | (fourBytes(bytes, 0) & 0xFFFF_FFFFL)) + 1;
        if (IpLiterals.isV4Mapped(bytes)) return (IPV4 | (fourBytes(bytes, 12) & 0xFFFF_FFFFL)) + 1;
        if (bytes[0] == (byte) 0xff) return MULTICAST + 1;
        return ((long) fourBytes(bytes, 0) << 32 | (fourBytes(bytes, 4) & 0xFFFF_FFFFL)) + 1;
    }

    private static int fourBytes(byte[] b, int at) {
        return (b[at] & 0xff) << 24 | (b[at + 1] & 0xff) << 16 | (b[at + 2] & 0xff) << 8 | (b[at + 3] & 0xff);
    }
}
