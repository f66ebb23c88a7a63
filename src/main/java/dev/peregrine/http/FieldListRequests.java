package dev.peregrine.http;

import io.netty.handler.codec.Headers;
import io.netty.handler.codec.http2.Http2Headers;
import io.netty.util.AsciiString;

import java.util.Map;

/**
 * Turns the header list of an HTTP/2 request into the head form the adapters read (one byte array and
 * offsets), checking what Netty's HPACK decoder leaves to the server: the pseudo-headers a request must
 * have, and field values (RFC 9113 8.2.1, 8.3.1).
 *
 * <p>HTTP/3 requests follow the same rules (RFC 9114 4.2, 4.3) and are read here too.
 *
 * <p>{@code :authority} becomes the {@code host} header, and several {@code cookie} fields are joined
 * with "; " (RFC 9113 8.2.3), so that an application reads them as it would over HTTP/1.1.
 */
public final class FieldListRequests {
    private static final AsciiString COOKIE = AsciiString.cached("cookie");
    private static final AsciiString HOST = AsciiString.cached("host");
    private static final AsciiString CONTENT_LENGTH = AsciiString.cached("content-length");
    private static final byte[] HOST_BYTES = {'h', 'o', 's', 't'};
    private static final byte[] COOKIE_BYTES = {'c', 'o', 'o', 'k', 'i', 'e'};
    private static final String[] METHODS = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT"};

    /** The request cannot be served: the stream is reset with PROTOCOL_ERROR. */
    public static final class Malformed extends Exception {
        Malformed(String message) {
            super(message, null, false, false);
        }
    }

    private FieldListRequests() {}

    /** {@code spareBytes}/{@code spareHeaders}: room kept for the headers the server adds (X-Request-ID, X-Request-Start). */
    public static RequestHead build(Http2Headers headers, boolean endStream, int spareBytes, int spareHeaders) throws Malformed {
        return build(headers, headers.method(), headers.scheme(), headers.path(), headers.authority(), endStream, spareBytes, spareHeaders);
    }

    /** The same from any field list (HTTP/3's), given its pseudo-headers. */
    public static <H extends Headers<CharSequence, CharSequence, H>> RequestHead build(H headers, CharSequence method, CharSequence scheme,
            CharSequence path, CharSequence authority, boolean endStream, int spareBytes, int spareHeaders) throws Malformed {
        if (method == null || scheme == null || path == null || path.isEmpty()) {
            throw new Malformed(method != null && AsciiString.contentEquals(method, "CONNECT")
                    ? "CONNECT is not served" : "missing :method, :scheme or :path");
        }
        int size = path.length() + (authority != null ? HOST_BYTES.length + authority.length() : 0);
        int count = authority != null ? 1 : 0;
        int cookieBytes = 0;
        int cookies = 0;
        for (Map.Entry<CharSequence, CharSequence> header : headers) {
            CharSequence name = header.getKey();
            if (name.length() > 0 && name.charAt(0) == ':') continue;
            if (COOKIE.contentEquals(name)) {
                cookieBytes += header.getValue().length() + 2;
                cookies++;
                continue;
            }
            if (authority != null && HOST.contentEquals(name)) continue;
            size += name.length() + header.getValue().length();
            count++;
        }
        if (cookies > 0) {
            size += COOKIE_BYTES.length + cookieBytes - 2;
            count++;
        }
        byte[] bytes = new byte[size + spareBytes];
        int[] offsets = new int[4 * (count + spareHeaders)];
        int at = copy(path, bytes, 0);
        int pathLength = path.length(), queryStart = path.length(), queryLength = 0;
        for (int i = 0; i < path.length(); i++) {
            byte b = bytes[i];
            if (b <= ' ' || b == 0x7f) throw new Malformed("invalid :path");
            if (b == '?' && queryStart == path.length()) {
                pathLength = i;
                queryStart = i + 1;
                queryLength = path.length() - i - 1;
            }
        }
        if (bytes[0] != '/' && !(pathLength == 1 && bytes[0] == '*' && AsciiString.contentEquals(method, "OPTIONS"))) {
            throw new Malformed("invalid :path");
        }
        int n = 0;
        long contentLength = endStream ? 0 : -1;
        if (authority != null) {
            offsets[0] = at;
            offsets[1] = HOST_BYTES.length;
            System.arraycopy(HOST_BYTES, 0, bytes, at, HOST_BYTES.length);
            at += HOST_BYTES.length;
            offsets[2] = at;
            offsets[3] = authority.length();
            at = copyValue(authority, bytes, at);
            n = 1;
        }
        for (Map.Entry<CharSequence, CharSequence> header : headers) {
            CharSequence name = header.getKey();
            if (name.length() > 0 && name.charAt(0) == ':') continue;
            if (COOKIE.contentEquals(name) || (authority != null && HOST.contentEquals(name))) continue;
            CharSequence value = header.getValue();
            offsets[4 * n] = at;
            offsets[4 * n + 1] = name.length();
            at = copy(name, bytes, at);
            offsets[4 * n + 2] = at;
            offsets[4 * n + 3] = value.length();
            int valueStart = at;
            at = copyValue(value, bytes, at);
            if (CONTENT_LENGTH.contentEquals(name)) contentLength = contentLength(bytes, valueStart, value.length(), contentLength);
            n++;
        }
        if (cookies > 0) {
            offsets[4 * n] = at;
            offsets[4 * n + 1] = COOKIE_BYTES.length;
            System.arraycopy(COOKIE_BYTES, 0, bytes, at, COOKIE_BYTES.length);
            at += COOKIE_BYTES.length;
            offsets[4 * n + 2] = at;
            int start = at;
            for (CharSequence value : headers.getAll(COOKIE)) {
                if (at > start) {
                    bytes[at++] = ';';
                    bytes[at++] = ' ';
                }
                at = copyValue(value, bytes, at);
            }
            offsets[4 * n + 3] = at - start;
            n++;
        }
        return RequestHead.of(bytes, at, method(method), 0, pathLength, queryStart, queryLength, offsets, n, contentLength);
    }

    private static String method(CharSequence method) {
        for (String known : METHODS) {
            if (AsciiString.contentEquals(known, method)) return known;
        }
        return method.toString();
    }

    private static long contentLength(byte[] bytes, int start, int length, long previous) throws Malformed {
        if (length == 0 || length > 18) throw new Malformed("invalid content-length");
        long value = 0;
        for (int i = start; i < start + length; i++) {
            byte b = bytes[i];
            if (b < '0' || b > '9') throw new Malformed("invalid content-length");
            value = value * 10 + (b - '0');
        }
        if (previous > 0 && previous != value) throw new Malformed("conflicting content-length");
        return value;
    }

    private static int copy(CharSequence text, byte[] out, int at) {
        if (text instanceof AsciiString ascii) {
            System.arraycopy(ascii.array(), ascii.arrayOffset(), out, at, ascii.length());
            return at + ascii.length();
        }
        for (int i = 0; i < text.length(); i++) out[at++] = (byte) text.charAt(i);
        return at;
    }

    /** Copies a field value, refusing NUL, CR and LF, and whitespace at either end (RFC 9113 8.2.1). */
    private static int copyValue(CharSequence value, byte[] out, int at) throws Malformed {
        int start = at;
        int end = copy(value, out, at);
        for (int i = start; i < end; i++) {
            byte b = out[i];
            if (b == 0 || b == '\r' || b == '\n') throw new Malformed("invalid character in a header value");
        }
        if (end > start && (isBlank(out[start]) || isBlank(out[end - 1]))) throw new Malformed("whitespace around a header value");
        return end;
    }

    private static boolean isBlank(byte b) {
        return b == ' ' || b == '\t';
    }
}
