package dev.peregrine.http;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.ThreadLocalRandom;

/**
 * X-Request-ID ({@code --request-id}). A client's (or a proxy's) own ID is kept when it is 1 to 200
 * characters of letters, digits and {@code - _ . : + / =}: enough for UUIDs, ULIDs, hex and base64 IDs,
 * and nothing that could break a log line or a header. Otherwise the request gets a new one: 32
 * lower-case hex digits (128 random bits, the shape of nginx's {@code $request_id}).
 *
 * <p>The bits come from {@link ThreadLocalRandom}: an ID must be unique, not unguessable, and a
 * SecureRandom per request would cost far more than the rest of this.
 */
public final class RequestId {
    private RequestId() {}

    public static final byte[] HEADER = "x-request-id".getBytes(StandardCharsets.US_ASCII);
    public static final int MAX_LENGTH = 200;
    public static final int GENERATED_LENGTH = 32;

    private static final byte[] HEX = "0123456789abcdef".getBytes(StandardCharsets.US_ASCII);
    private static final boolean[] ALLOWED = new boolean[256];
    static {
        for (char c = '0'; c <= '9'; c++) ALLOWED[c] = true;
        for (char c = 'a'; c <= 'z'; c++) ALLOWED[c] = true;
        for (char c = 'A'; c <= 'Z'; c++) ALLOWED[c] = true;
        for (char c : "-_.:+/=".toCharArray()) ALLOWED[c] = true;
    }

    public static boolean valid(byte[] data, int start, int length) {
        if (length < 1 || length > MAX_LENGTH) return false;
        for (int i = start; i < start + length; i++) {
            if (!ALLOWED[data[i] & 0xff]) return false;
        }
        return true;
    }

    /** Writes a new ID of {@link #GENERATED_LENGTH} bytes at {@code out[offset]}. */
    public static void generate(byte[] out, int offset) {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        hex(random.nextLong(), out, offset);
        hex(random.nextLong(), out, offset + 16);
    }

    private static void hex(long bits, byte[] out, int offset) {
        for (int i = 15; i >= 0; i--) {
            out[offset + i] = HEX[(int) (bits & 0xf)];
            bits >>>= 4;
        }
    }
}
