package dev.peregrine.http;

import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.Locale;

/**
 * HTTP dates in the IMF-fixdate form of RFC 9110 §5.6.7 ("Sun, 06 Nov 1994 08:49:37 GMT", a two-digit
 * day, which the JDK's RFC_1123_DATE_TIME does not write): the Date response header, formatted at most
 * once a second per thread, and Last-Modified.
 */
public final class HttpDate {
    private static final DateTimeFormatter FORMAT = DateTimeFormatter.ofPattern("EEE, dd MMM yyyy HH:mm:ss 'GMT'", Locale.US);
    private static final ThreadLocal<long[]> SECOND = ThreadLocal.withInitial(() -> new long[] {-1});
    private static final ThreadLocal<byte[][]> VALUE = ThreadLocal.withInitial(() -> new byte[1][]);

    private HttpDate() {}

    /** The current date as ASCII bytes; the same array all through one second, so callers may cache by identity. */
    public static byte[] now() {
        long second = System.currentTimeMillis() / 1000;
        long[] cached = SECOND.get();
        byte[][] value = VALUE.get();
        if (cached[0] != second) {
            cached[0] = second;
            value[0] = format(second).getBytes(StandardCharsets.US_ASCII);
        }
        return value[0];
    }

    /** {@code epochSecond} as an HTTP date. */
    public static String format(long epochSecond) {
        return FORMAT.format(ZonedDateTime.ofInstant(Instant.ofEpochSecond(epochSecond), ZoneOffset.UTC));
    }
}
