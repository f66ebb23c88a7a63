package dev.peregrine.http1;

import java.nio.charset.StandardCharsets;
import java.util.Objects;

/**
 * A parsed and validated HTTP/1.x request head, in the compact form the Python bridge consumes: one byte array
 * holding the whole head, and offsets into it. Every {@code *Start} / {@code *Length} pair indexes into
 * {@link #bytes()}; header names there are already lower-cased.
 *
 * <p>Instances are created by {@link RequestHeadParser} only and are not modified afterwards.
 */
public final class RequestHead implements dev.peregrine.http.HttpRequestHead {

    private static final int INTS_PER_HEADER = 4;

    private final byte[] bytes;
    private final String method;
    private final int targetStart;
    private final int targetLength;
    private final int pathStart;
    private final int pathLength;
    private final int queryStart;
    private final int queryLength;
    private final boolean http11;
    /** Per header: name start, name length, value start, value length. */
    private final int[] headerOffsets;
    private final int headerCount;
    private final long contentLength;
    private final boolean chunked;
    private final boolean keepAlive;
    private final boolean expectContinue;
    private final boolean upgradeWebSocket;

    RequestHead(byte[] bytes, String method,
                int targetStart, int targetLength, int pathStart, int pathLength, int queryStart, int queryLength,
                boolean http11, int[] headerOffsets, int headerCount,
                long contentLength, boolean chunked, boolean keepAlive, boolean expectContinue,
                boolean upgradeWebSocket) {
        this.bytes = bytes;
        this.method = method;
        this.targetStart = targetStart;
        this.targetLength = targetLength;
        this.pathStart = pathStart;
        this.pathLength = pathLength;
        this.queryStart = queryStart;
        this.queryLength = queryLength;
        this.http11 = http11;
        this.headerOffsets = headerOffsets;
        this.headerCount = headerCount;
        this.contentLength = contentLength;
        this.chunked = chunked;
        this.keepAlive = keepAlive;
        this.expectContinue = expectContinue;
        this.upgradeWebSocket = upgradeWebSocket;
    }

    /** The head as received (request line and header lines, each ending in CRLF), names lower-cased. Not copied. */
    public byte[] bytes() {
        return bytes;
    }

    /** The method; the same String instance every time for the standard methods. */
    public String method() {
        return method;
    }

    public int targetStart() {
        return targetStart;
    }

    public int targetLength() {
        return targetLength;
    }

    /** "/a/b" for "/a/b?x" and for "http://h/a/b?x"; "/" for "http://h"; "*" for "*". */
    public int pathStart() {
        return pathStart;
    }

    public int pathLength() {
        return pathLength;
    }

    /** The query after '?', excluding it; length 0 when there is none. */
    public int queryStart() {
        return queryStart;
    }

    public int queryLength() {
        return queryLength;
    }

    /** True for HTTP/1.1, false for HTTP/1.0. */
    public boolean http11() {
        return http11;
    }

    /** Number of headers kept (names with '_' and the "proxy" header are dropped by the parser). */
    public int headerCount() {
        return headerCount;
    }

    public int nameStart(int i) {
        return headerOffsets[slot(i)];
    }

    public int nameLength(int i) {
        return headerOffsets[slot(i) + 1];
    }

    /** Start of the value, leading SP/HTAB excluded. */
    public int valueStart(int i) {
        return headerOffsets[slot(i) + 2];
    }

    /** Length of the value, trailing SP/HTAB excluded. */
    public int valueLength(int i) {
        return headerOffsets[slot(i) + 3];
    }

    /** The Content-Length, or -1 when the request has none. */
    public long contentLength() {
        return contentLength;
    }

    /** True when the body is sent with Transfer-Encoding: chunked. */
    public boolean chunked() {
        return chunked;
    }

    /** Whether the connection may be reused after this request, by the request's version and Connection header. */
    public boolean keepAlive() {
        return keepAlive;
    }

    /** True when an HTTP/1.1 client waits for "100 Continue" before sending the body. */
    public boolean expectContinue() {
        return expectContinue;
    }

    /** True when an HTTP/1.1 request asks to upgrade the connection to WebSocket. */
    public boolean upgradeWebSocket() {
        return upgradeWebSocket;
    }

    /**
     * The first value of the header with the given lower-case name as an ISO-8859-1 String, or null.
     * A convenience for tests and logging; the bridge reads the offsets instead.
     */
    public String headerString(String lowerCaseName) {
        int length = lowerCaseName.length();
        for (int i = 0; i < headerCount; i++) {
            if (nameLength(i) == length && nameEquals(nameStart(i), lowerCaseName)) {
                return new String(bytes, valueStart(i), valueLength(i), StandardCharsets.ISO_8859_1);
            }
        }
        return null;
    }

    @Override
    public String toString() {
        return method + " " + new String(bytes, targetStart, targetLength, StandardCharsets.ISO_8859_1)
                + (http11 ? " HTTP/1.1" : " HTTP/1.0") + " (" + headerCount + " headers)";
    }

    private boolean nameEquals(int start, String name) {
        for (int k = 0; k < name.length(); k++) {
            if (bytes[start + k] != (byte) name.charAt(k)) {
                return false;
            }
        }
        return true;
    }

    private int slot(int i) {
        return Objects.checkIndex(i, headerCount) * INTS_PER_HEADER;
    }
}
