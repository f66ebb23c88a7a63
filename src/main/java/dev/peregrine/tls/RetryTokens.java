package dev.peregrine.tls;

import io.netty.buffer.ByteBuf;
import io.netty.incubator.codec.quic.QuicTokenHandler;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import java.net.InetSocketAddress;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.Base64;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * The tokens of QUIC's Retry (RFC 9000 8.1.2), which prove that a client receives at the address it
 * sends from before the server spends more on it than it received. A token holds its expiry, a MAC and
 * the connection id the client first chose; the MAC covers those and the client's IP address under a
 * key only the server's processes know.
 *
 * <p>Written by hand because Netty ships only {@code InsecureQuicTokenHandler}, whose token is a fixed
 * text, the address and the id, with nothing secret: anyone can write one for any address. Our HTTP/3
 * fuzz target learned to write them, and so could a sender of spoofed packets, whose forged tokens would have
 * each opened a connection and sent its handshake, certificates included, to an address that never
 * asked (the amplification Retry exists to prevent).
 */
public final class RetryTokens implements QuicTokenHandler {
    /** The key, in base64, that a supervisor gives its workers, so that a token minted by one is good at any. */
    public static final String KEY_ENV = "PEREGRINE_QUIC_TOKEN_KEY";
    static final int KEY_BYTES = 32;
    /** A Retry is answered within a round trip; a few seconds cover the slowest path and a retransmission. */
    static final long LIFETIME_MILLIS = 10_000;
    private static final int EXPIRY_BYTES = Long.BYTES, MAC_BYTES = 16, MAX_CONNECTION_ID = 20; // RFC 9000 17.2
    private static final int HEADER_BYTES = EXPIRY_BYTES + MAC_BYTES;

    private final SecretKeySpec key;
    private final LongSupplier clock;
    private final ThreadLocal<Mac> macs;

    RetryTokens(byte[] key, LongSupplier clock) {
        this.key = new SecretKeySpec(key, "HmacSHA256");
        this.clock = clock;
        this.macs = ThreadLocal.withInitial(this::newMac);
    }

    /** With the key of {@value #KEY_ENV} when the environment has one (a worker), else a key of this process's own. */
    public static RetryTokens fromEnvironment(Map<String, String> environment) {
        String given = environment.get(KEY_ENV);
        byte[] key;
        try {
            key = given != null ? Base64.getDecoder().decode(given) : newKey();
        } catch (IllegalArgumentException e) {
            throw new IllegalStateException(KEY_ENV + " is not base64: " + e.getMessage());
        }
        if (key.length != KEY_BYTES) throw new IllegalStateException(KEY_ENV + " holds " + key.length + " bytes, not " + KEY_BYTES);
        return new RetryTokens(key, System::currentTimeMillis);
    }

    /** A new key, as {@value #KEY_ENV} carries it. */
    public static String newEncodedKey() {
        return Base64.getEncoder().encodeToString(newKey());
    }

    private static byte[] newKey() {
        byte[] key = new byte[KEY_BYTES];
        new SecureRandom().nextBytes(key);
        return key;
    }

    @Override
    public boolean writeToken(ByteBuf out, ByteBuf dcid, InetSocketAddress address) {
        long expiry = clock.getAsLong() + LIFETIME_MILLIS;
        out.writeLong(expiry);
        out.writeBytes(mac(expiry, address, dcid, dcid.readerIndex(), dcid.readableBytes()), 0, MAC_BYTES);
        out.writeBytes(dcid, dcid.readerIndex(), dcid.readableBytes());
        return true;
    }

    /** Where the original connection id starts in {@code token}, or -1 when the token is not one of ours, is for another address or has expired. */
    @Override
    public int validateToken(ByteBuf token, InetSocketAddress address) {
        int start = token.readerIndex();
        int idLength = token.readableBytes() - HEADER_BYTES;
        if (idLength < 0 || idLength > MAX_CONNECTION_ID) return -1;
        long expiry = token.getLong(start);
        if (clock.getAsLong() > expiry) return -1;
        byte[] given = new byte[MAC_BYTES];
        token.getBytes(start + EXPIRY_BYTES, given);
        byte[] expected = mac(expiry, address, token, start + HEADER_BYTES, idLength);
        return MessageDigest.isEqual(given, Arrays.copyOf(expected, MAC_BYTES)) ? HEADER_BYTES : -1;
    }

    @Override
    public int maxTokenLength() {
        return HEADER_BYTES + MAX_CONNECTION_ID;
    }

    private byte[] mac(long expiry, InetSocketAddress address, ByteBuf id, int idStart, int idLength) {
        Mac mac = macs.get();
        for (int shift = 56; shift >= 0; shift -= 8) mac.update((byte) (expiry >>> shift));
        // The IP address alone, as RFC 9000 8.1.4 suggests: a NAT may give the retried Initial another port.
        mac.update(address.getAddress().getAddress());
        mac.update(id.nioBuffer(idStart, idLength));
        return mac.doFinal();
    }

    private Mac newMac() {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(key);
            return mac;
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is part of every JDK", e);
        }
    }
}
