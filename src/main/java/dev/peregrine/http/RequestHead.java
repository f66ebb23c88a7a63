package dev.peregrine.http;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Objects;

/**
 * A parsed and validated HTTP/1.x request head, in the compact form the Python bridge consumes: one byte array
 * holding the whole head, and offsets into it. Every {@code *Start} / {@code *Length} pair indexes into
 * {@link #bytes()}; header names there are already lower-cased.
 *
 * <p>Instances are made by the transports' parsers: HTTP/1.1's {@code RequestHeadParser}, and {@link FieldListRequests} for HTTP/2 and HTTP/3. Before the request is handed to the application,
 * the connection may add headers of its own (X-Request-ID, X-Request-Start) or drop client headers it replaces;
 * after that they are not modified. Added headers go into spare room the parser left at the end of the array,
 * so that the adapters, which read names and values through the offsets, see them like any other header.
 */
public final class RequestHead implements HttpRequestHead {

    private static final int INTS_PER_HEADER = 4;

    private byte[] bytes;
    /** Bytes of {@link #bytes} in use; the rest is room for added headers. */
    private int used;
    private final String method;
    private final int targetStart;
    private final int targetLength;
    private final int pathStart;
    private final int pathLength;
    private final int queryStart;
    private final int queryLength;
    private final boolean http11;
    /** Per header: name start, name length, value start, value length. */
    private int[] headerOffsets;
    private int headerCount;
    private final long contentLength;
    private final boolean chunked;
    private final boolean keepAlive;
    private final boolean expectContinue;
    private final boolean upgradeWebSocket;

    public RequestHead(byte[] bytes, int used, String method,
                int targetStart, int targetLength, int pathStart, int pathLength, int queryStart, int queryLength,
                boolean http11, int[] headerOffsets, int headerCount,
                long contentLength, boolean chunked, boolean keepAlive, boolean expectContinue,
                boolean upgradeWebSocket) {
        this.bytes = bytes;
        this.used = used;
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

    /**
     * A head another transport (HTTP/2) built in this form, so that added headers, forwarding headers and
     * the access log treat its requests like HTTP/1.1's. {@code bytes} holds the target then the headers;
     * room past {@code used} takes added headers.
     */
    public static RequestHead of(byte[] bytes, int used, String method, int pathStart, int pathLength, int queryStart, int queryLength,
                                 int[] headerOffsets, int headerCount, long contentLength) {
        int targetLength = queryLength > 0 || queryStart > pathStart + pathLength ? queryStart + queryLength - pathStart : pathLength;
        return new RequestHead(bytes, used, method, pathStart, targetLength, pathStart, pathLength, queryStart, queryLength,
                true, headerOffsets, headerCount, contentLength, false, true, false, false);
    }

    /**
     * The head as received (request line and header lines, each ending in CRLF), names lower-cased, followed by
     * the values and names of headers the server added and possibly unused room. Not copied.
     */
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

    /**
     * Adds a header and returns where in {@link #bytes()} the caller writes its {@code valueLength} bytes of
     * value. Uses the room the parser reserved, and grows the arrays only when that is not enough.
     */
    int appendHeader(byte[] lowerCaseName, int valueLength) {
        int need = used + lowerCaseName.length + valueLength;
        if (need > bytes.length) bytes = Arrays.copyOf(bytes, need);
        int slot = headerCount * INTS_PER_HEADER;
        if (slot + INTS_PER_HEADER > headerOffsets.length) headerOffsets = Arrays.copyOf(headerOffsets, slot + INTS_PER_HEADER);
        System.arraycopy(lowerCaseName, 0, bytes, used, lowerCaseName.length);
        headerOffsets[slot] = used;
        headerOffsets[slot + 1] = lowerCaseName.length;
        headerOffsets[slot + 2] = used + lowerCaseName.length;
        headerOffsets[slot + 3] = valueLength;
        headerCount++;
        used = need;
        return need - valueLength;
    }

    /** Drops header {@code i}; the ones after it move down by one. */
    void removeHeader(int i) {
        int slot = slot(i);
        System.arraycopy(headerOffsets, slot + INTS_PER_HEADER, headerOffsets, slot, (headerCount - 1 - i) * INTS_PER_HEADER);
        headerCount--;
    }

    /** Whether header {@code i} has the given lower-case name. */
    boolean nameIs(int i, byte[] lowerCaseName) {
        int start = nameStart(i), length = nameLength(i);
        return length == lowerCaseName.length && Arrays.equals(bytes, start, start + length, lowerCaseName, 0, length);
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
