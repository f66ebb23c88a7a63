package dev.peregrine.http;

import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;

/** The value of the Date response header, formatted at most once a second per thread. */
public final class HttpDate {
    private static final DateTimeFormatter FORMAT = DateTimeFormatter.RFC_1123_DATE_TIME;
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
            value[0] = FORMAT.format(ZonedDateTime.ofInstant(Instant.ofEpochSecond(second), ZoneOffset.UTC)).getBytes(StandardCharsets.US_ASCII);
        }
        return value[0];
    }
}
