package dev.peregrine.http;

import java.util.Arrays;

/** Percent-decoding of a request path, as both ASGI ({@code path}) and WSGI ({@code PATH_INFO}) want it. */
public final class PercentDecoder {
    private PercentDecoder() {}

    /** The decoded bytes of data[offset, offset+length), or null when there is nothing to decode (use the input). */
    public static byte[] decode(byte[] data, int offset, int length) {
        int end = offset + length, first = -1;
        for (int i = offset; i < end; i++) {
            if (data[i] == '%') {
                first = i;
                break;
            }
        }
        if (first < 0) return null;
        byte[] out = new byte[length];
        int n = first - offset;
        System.arraycopy(data, offset, out, 0, n);
        for (int i = first; i < end; i++) {
            byte b = data[i];
            if (b == '%' && i + 2 < end) {
                int hi = Character.digit(data[i + 1], 16), lo = Character.digit(data[i + 2], 16);
                if (hi >= 0 && lo >= 0) {
                    out[n++] = (byte) (hi << 4 | lo);
                    i += 2;
                    continue;
                }
            }
            out[n++] = b;
        }
        return Arrays.copyOf(out, n);
    }
}
