package dev.peregrine.http;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A response status and its headers, copied out of the application's objects into one array. The
 * headers the transport must act on (framing, connection) are noted as they are added.
 */
public final class ResponseHead {
    private final int status;
    private byte[] data = new byte[256];
    private int size;
    private int[] offsets = new int[32];
    private int count;
    private long contentLength = -1;
    private boolean connectionClose;
    private boolean hasDate;
    private boolean hasServer;
    /** The application's own reason phrase (ISO-8859-1), or null for the standard one. */
    private byte[] reason;

    public ResponseHead(int status) {
        if (status < 100 || status > 999) throw new IllegalArgumentException("invalid HTTP status " + status);
        this.status = status;
    }

    /** The head of the 500 the server sends when the application failed before answering. */
    public static ResponseHead internalError() {
        ResponseHead head = new ResponseHead(500);
        head.add("content-type", "text/plain; charset=utf-8");
        return head;
    }

    /** The body that goes with {@link #internalError}. */
    public static ByteBuf internalErrorBody(ByteBufAllocator alloc) {
        ByteBuf text = alloc.directBuffer(24);
        text.writeCharSequence("Internal Server Error", StandardCharsets.US_ASCII);
        return text;
    }

    public int status() { return status; }
    public byte[] reason() { return reason; }

    /** Keeps {@code other}'s reason phrase, for a head rebuilt from it (compression, the cache). */
    public void reasonOf(ResponseHead other) {
        reason = other.reason;
    }

    /**
     * Sets the reason phrase the status line carries over HTTP/1.1 (HTTP/2 and HTTP/3 have none).
     * Refuses what RFC 9112 does not allow in one (HTAB, SP, visible ASCII and bytes 0x80 to 0xFF):
     * CR or LF would let it write headers of its own.
     */
    public void reason(CharSequence text) {
        byte[] bytes = new byte[text.length()];
        for (int i = 0; i < bytes.length; i++) {
            char c = text.charAt(i);
            if (c != '\t' && (c < 0x20 || c == 0x7F || c > 0xFF)) {
                throw new IllegalArgumentException("invalid reason phrase '" + text + "': it must be tabs, spaces, visible ASCII or Latin-1 characters");
            }
            bytes[i] = (byte) c;
        }
        reason = bytes;
    }
    public int count() { return count; }
    public byte[] data() { return data; }
    public int nameStart(int i) { return offsets[4 * i]; }
    public int nameLength(int i) { return offsets[4 * i + 1]; }
    public int valueStart(int i) { return offsets[4 * i + 2]; }
    public int valueLength(int i) { return offsets[4 * i + 3]; }
    /** The Content-Length the application declared, or -1. */
    public long contentLength() { return contentLength; }
    public boolean connectionClose() { return connectionClose; }
    public boolean hasDate() { return hasDate; }
    public boolean hasServer() { return hasServer; }

    /** Whether the application set the header itself; then its value stands. Only looked for when an option needs it. */
    public boolean has(String lowerCaseName) {
        for (int i = 0; i < count; i++) {
            if (HttpChars.equalsLowerCase(data, nameStart(i), nameLength(i), lowerCaseName)) return true;
        }
        return false;
    }

    /**
     * Adds a header from native memory (a Python bytes or str buffer). Refuses what would break the
     * framing of the response: a name that is no token, a value with CR, LF or NUL.
     */
    public void add(MemorySegment name, MemorySegment value) {
        int nameLength = (int) name.byteSize(), valueLength = (int) value.byteSize();
        ensure(nameLength + valueLength);
        int nameStart = size;
        MemorySegment.copy(name, ValueLayout.JAVA_BYTE, 0, data, nameStart, nameLength);
        int valueStart = nameStart + nameLength;
        MemorySegment.copy(value, ValueLayout.JAVA_BYTE, 0, data, valueStart, valueLength);
        record(nameStart, nameLength, valueStart, valueLength);
    }

    /** Adds every header of {@code other}, in order. */
    public void addAll(ResponseHead other) {
        for (int i = 0; i < other.count; i++) add(other, i);
    }

    /** Adds header {@code i} of {@code other}. */
    public void add(ResponseHead other, int i) {
        MemorySegment source = MemorySegment.ofArray(other.data);
        add(source.asSlice(other.nameStart(i), other.nameLength(i)), source.asSlice(other.valueStart(i), other.valueLength(i)));
    }

    /** Adds a header from Java strings (ISO-8859-1). */
    public void add(String name, String value) {
        byte[] n = name.getBytes(StandardCharsets.ISO_8859_1);
        byte[] v = value.getBytes(StandardCharsets.ISO_8859_1);
        ensure(n.length + v.length);
        int nameStart = size;
        System.arraycopy(n, 0, data, nameStart, n.length);
        System.arraycopy(v, 0, data, nameStart + n.length, v.length);
        record(nameStart, n.length, nameStart + n.length, v.length);
    }

    private void record(int nameStart, int nameLength, int valueStart, int valueLength) {
        if (nameLength == 0) throw new IllegalArgumentException("empty response header name");
        for (int i = nameStart; i < nameStart + nameLength; i++) {
            if (!HttpChars.isTokenChar(data[i])) {
                throw new IllegalArgumentException("invalid response header name " + quoted(nameStart, nameLength));
            }
        }
        for (int i = valueStart; i < valueStart + valueLength; i++) {
            byte b = data[i];
            if (b == '\r' || b == '\n' || b == 0) {
                throw new IllegalArgumentException("response header " + quoted(nameStart, nameLength) + " contains CR, LF or NUL");
            }
        }
        if (HttpChars.equalsLowerCase(data, nameStart, nameLength, "content-length")) {
            contentLength = parseLength(valueStart, valueLength, nameStart, nameLength);
        } else if (HttpChars.equalsLowerCase(data, nameStart, nameLength, "transfer-encoding")) {
            return; // the transport frames the body itself; an application's own claim would contradict it
        } else if (HttpChars.equalsLowerCase(data, nameStart, nameLength, "connection")) {
            connectionClose |= HttpChars.containsTokenIgnoreCase(data, valueStart, valueLength, "close");
        } else if (HttpChars.equalsLowerCase(data, nameStart, nameLength, "date")) {
            hasDate = true;
        } else if (HttpChars.equalsLowerCase(data, nameStart, nameLength, "server")) {
            hasServer = true;
        }
        if (4 * count + 4 > offsets.length) offsets = Arrays.copyOf(offsets, offsets.length * 2);
        offsets[4 * count] = nameStart;
        offsets[4 * count + 1] = nameLength;
        offsets[4 * count + 2] = valueStart;
        offsets[4 * count + 3] = valueLength;
        count++;
        size = valueStart + valueLength;
    }

    private long parseLength(int start, int length, int nameStart, int nameLength) {
        long value = 0;
        int end = start + length;
        while (start < end && data[start] == ' ') start++;
        while (end > start && data[end - 1] == ' ') end--;
        if (start == end || end - start > 18) throw new IllegalArgumentException("invalid response Content-Length " + quoted(start, end - start));
        for (int i = start; i < end; i++) {
            byte b = data[i];
            if (b < '0' || b > '9') throw new IllegalArgumentException("invalid response Content-Length " + quoted(start, end - start));
            value = value * 10 + (b - '0');
        }
        if (contentLength >= 0 && contentLength != value) throw new IllegalArgumentException("conflicting response Content-Length headers");
        return value;
    }

    private String quoted(int start, int length) {
        return "'" + new String(data, start, Math.min(length, 64), StandardCharsets.ISO_8859_1) + "'";
    }

    private void ensure(int more) {
        if (size + more > data.length) data = Arrays.copyOf(data, Math.max(data.length * 2, size + more));
    }
}
