package dev.peregrine.webtransport;

/**
 * WebTransport's application error codes on streams (32 bits) in the HTTP/3 error space that QUIC's
 * RESET_STREAM and STOP_SENDING carry (draft-ietf-webtrans-http3-02 4.3): a block from
 * {@link #FIRST} that skips HTTP/3's reserved greasing codes (0x1f * N + 0x21, RFC 9114 8.1), as
 * Chromium and the web-platform tests map them.
 */
public final class StreamErrors {
    public static final long FIRST = 0x52e4a40fa8dbL;
    public static final long LAST = 0x52e5ac983162L;
    /** The largest WebTransport stream error code. */
    public static final long MAX_CODE = 0xffffffffL;
    /** What {@link #fromHttp3} gives for a code that carries no WebTransport code. */
    public static final long NONE = -1;

    private StreamErrors() {}

    /** The HTTP/3 error code that carries {@code code} (0 to {@link #MAX_CODE}). */
    public static long toHttp3(long code) {
        if (code < 0 || code > MAX_CODE) throw new IllegalArgumentException("not a WebTransport stream error code: " + code);
        return FIRST + code + code / 0x1e;
    }

    /** The WebTransport code an HTTP/3 error code carries, or {@link #NONE}: outside the block, or a greasing code. */
    public static long fromHttp3(long http3) {
        if (http3 < FIRST || http3 > LAST || (http3 - 0x21) % 0x1f == 0) return NONE;
        long shifted = http3 - FIRST;
        return shifted - shifted / 0x1f;
    }
}
