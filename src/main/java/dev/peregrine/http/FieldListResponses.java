package dev.peregrine.http;

import io.netty.handler.codec.Headers;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http2.DefaultHttp2Headers;
import io.netty.handler.codec.http2.Http2Headers;
import io.netty.util.AsciiString;

/** The response field list of an HTTP/2 stream (and of an HTTP/3 one, whose rules are the same), from the head the application gave. */
public final class FieldListResponses {
    private static final AsciiString SERVER = AsciiString.cached("server");
    private static final AsciiString SERVER_VALUE = AsciiString.cached("peregrine");
    private static final AsciiString DATE = AsciiString.cached("date");
    private static final AsciiString CONTENT_LENGTH = AsciiString.cached("content-length");
    private static final AsciiString REQUEST_ID = AsciiString.cached("x-request-id");
    /** Header fields of HTTP/1.1 connection management, which HTTP/2 and HTTP/3 forbid (RFC 9113 8.2.2, RFC 9114 4.2). */
    private static final String[] CONNECTION_SPECIFIC = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"};

    private static final ThreadLocal<Object[]> DATE_VALUE = ThreadLocal.withInitial(() -> new Object[2]);

    private FieldListResponses() {}

    /**
     * @param completeSize the whole body's size when the application gave it in one piece, else -1: it
     *                     becomes the content-length when the application declared none
     * @param requestId    the X-Request-ID to echo, or null
     * @param tlsHeaders   Strict-Transport-Security and Alt-Svc to add, or null
     */
    public static Http2Headers headers(ResponseHead response, long completeSize, AsciiString requestId, TlsResponseHeaders tlsHeaders) {
        DefaultHttp2Headers headers = new DefaultHttp2Headers(false, response.count() + 4);
        headers.status(HttpResponseStatus.valueOf(response.status()).codeAsText());
        return fill(headers, response, completeSize, requestId, tlsHeaders);
    }

    /** Adds the application's fields and the server's to {@code headers}, which has its :status already. */
    public static <H extends Headers<CharSequence, CharSequence, H>> H fill(H headers, ResponseHead response, long completeSize,
            AsciiString requestId, TlsResponseHeaders tlsHeaders) {
        byte[] data = response.data();
        for (int i = 0; i < response.count(); i++) {
            int nameStart = response.nameStart(i), nameLength = response.nameLength(i);
            if (connectionSpecific(data, nameStart, nameLength)) continue;
            headers.add(lowerCase(data, nameStart, nameLength), new AsciiString(data, response.valueStart(i), response.valueLength(i), true));
        }
        if (!response.hasServer()) headers.add(SERVER, SERVER_VALUE);
        if (!response.hasDate()) headers.add(DATE, date());
        if (completeSize >= 0 && response.contentLength() < 0) headers.add(CONTENT_LENGTH, AsciiString.of(Long.toString(completeSize)));
        if (requestId != null && !response.has("x-request-id")) headers.add(REQUEST_ID, requestId);
        if (tlsHeaders != null) tlsHeaders.addTo(headers, response);
        return headers;
    }

    private static boolean connectionSpecific(byte[] data, int start, int length) {
        for (String name : CONNECTION_SPECIFIC) {
            if (HttpChars.equalsLowerCase(data, start, length, name)) return true;
        }
        return false;
    }

    private static AsciiString lowerCase(byte[] data, int start, int length) {
        byte[] name = new byte[length];
        for (int i = 0; i < length; i++) {
            byte b = data[start + i];
            name[i] = b >= 'A' && b <= 'Z' ? (byte) (b + 32) : b;
        }
        return new AsciiString(name, false);
    }

    private static AsciiString date() {
        byte[] now = HttpDate.now();
        Object[] cached = DATE_VALUE.get();
        if (cached[0] != now) {
            cached[0] = now;
            cached[1] = new AsciiString(now, false);
        }
        return (AsciiString) cached[1];
    }
}
