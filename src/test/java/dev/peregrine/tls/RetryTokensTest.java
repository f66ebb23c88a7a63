package dev.peregrine.tls;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class RetryTokensTest {
    private static final byte[] KEY = "0123456789abcdef0123456789abcdef".getBytes(StandardCharsets.US_ASCII);
    private static final InetSocketAddress CLIENT = new InetSocketAddress("192.0.2.7", 40123);
    private static final byte[] ORIGINAL_ID = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

    private final AtomicLong now = new AtomicLong(1_000_000);
    private final RetryTokens tokens = new RetryTokens(KEY, now::get);

    private ByteBuf mint(RetryTokens by, InetSocketAddress address) {
        ByteBuf token = Unpooled.buffer(by.maxTokenLength());
        assertTrue(by.writeToken(token, Unpooled.wrappedBuffer(ORIGINAL_ID), address));
        assertTrue(token.readableBytes() <= by.maxTokenLength());
        return token;
    }

    @Test
    void aTokenIsGoodForItsAddressAndGivesBackTheOriginalConnectionId() {
        ByteBuf token = mint(tokens, CLIENT);
        int offset = tokens.validateToken(token.slice(), CLIENT);
        assertTrue(offset > 0);
        byte[] id = new byte[token.readableBytes() - offset];
        token.getBytes(offset, id);
        assertArrayEquals(ORIGINAL_ID, id);
        // Another port of the same address: a NAT may rebind between the Retry and the retried Initial.
        assertEquals(offset, tokens.validateToken(token.slice(), new InetSocketAddress("192.0.2.7", 50000)));
    }

    @Test
    void aTokenIsRefusedFromAnotherAddress() {
        assertEquals(-1, tokens.validateToken(mint(tokens, CLIENT), new InetSocketAddress("192.0.2.8", 40123)));
        assertEquals(-1, tokens.validateToken(mint(tokens, CLIENT), new InetSocketAddress("2001:db8::7", 40123)));
    }

    @Test
    void aTokenIsRefusedOnceExpired() {
        ByteBuf token = mint(tokens, CLIENT);
        now.addAndGet(RetryTokens.LIFETIME_MILLIS);
        assertTrue(tokens.validateToken(token.slice(), CLIENT) > 0, "good up to its expiry");
        now.incrementAndGet();
        assertEquals(-1, tokens.validateToken(token.slice(), CLIENT));
    }

    @Test
    void anyChangedByteIsRefused() {
        ByteBuf token = mint(tokens, CLIENT);
        for (int i = 0; i < token.readableBytes(); i++) {
            ByteBuf changed = token.copy();
            changed.setByte(i, changed.getByte(i) ^ 0x01);
            assertEquals(-1, tokens.validateToken(changed, CLIENT), "byte " + i + " changed");
        }
        assertEquals(-1, tokens.validateToken(token.copy(0, token.readableBytes() - 1), CLIENT), "cut short");
        assertEquals(-1, tokens.validateToken(Unpooled.buffer().writeBytes(token.copy()).writeByte(0), CLIENT), "lengthened");
        assertEquals(-1, tokens.validateToken(Unpooled.EMPTY_BUFFER, CLIENT));
    }

    @Test
    void nettysInsecureTokenForTheRightAddressIsRefused() {
        // "netty", the address, the id: what anyone can write for any address, and what the fuzzer learned to.
        ByteBuf forged = Unpooled.buffer().writeBytes("netty".getBytes(StandardCharsets.US_ASCII))
                .writeBytes(CLIENT.getAddress().getAddress()).writeBytes(ORIGINAL_ID);
        assertEquals(-1, tokens.validateToken(forged, CLIENT));
    }

    @Test
    void workersGivenTheSameKeyTakeEachOthersTokensAndOthersDoNot() {
        Map<String, String> environment = Map.of(RetryTokens.KEY_ENV, RetryTokens.newEncodedKey());
        RetryTokens one = RetryTokens.fromEnvironment(environment), other = RetryTokens.fromEnvironment(environment);
        assertTrue(other.validateToken(mint(one, CLIENT), CLIENT) > 0);
        assertEquals(-1, RetryTokens.fromEnvironment(Map.of()).validateToken(mint(one, CLIENT), CLIENT), "a key of its own");
        assertEquals(-1, tokens.validateToken(mint(one, CLIENT), CLIENT));
    }

    @Test
    void aKeyOfTheWrongLengthIsNamed() {
        String shortKey = Base64.getEncoder().encodeToString(new byte[16]);
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> RetryTokens.fromEnvironment(Map.of(RetryTokens.KEY_ENV, shortKey)));
        assertTrue(e.getMessage().contains(RetryTokens.KEY_ENV), e.getMessage());
    }
}
