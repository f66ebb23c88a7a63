package dev.peregrine.http;

import io.netty.buffer.ByteBuf;
import io.netty.handler.codec.Headers;
import io.netty.util.AsciiString;

import java.nio.charset.StandardCharsets;

/**
 * Headers the server adds to every response over TLS, each unless the application set it:
 * Strict-Transport-Security (--hsts) and Alt-Svc, which tells browsers that HTTP/3 is on (--http3).
 */
public final class TlsResponseHeaders {
    private static final String HSTS = "strict-transport-security";
    private static final String ALT_SVC = "alt-svc";

    private final String[] names;
    private final AsciiString[] asciiNames;
    private final AsciiString[] values;
    /** The HTTP/1.1 lines, "name: value\r\n", one per header. */
    private final byte[][] lines;

    private TlsResponseHeaders(String[] names, String[] values) {
        this.names = names;
        this.asciiNames = new AsciiString[names.length];
        this.values = new AsciiString[names.length];
        this.lines = new byte[names.length][];
        for (int i = 0; i < names.length; i++) {
            asciiNames[i] = AsciiString.cached(names[i]);
            this.values[i] = AsciiString.cached(values[i]);
            lines[i] = (names[i] + ": " + values[i] + "\r\n").getBytes(StandardCharsets.US_ASCII);
        }
    }

    /** Null when there is nothing to add: {@code hsts} and {@code altSvc} are the values, or null. */
    public static TlsResponseHeaders of(String hsts, String altSvc) {
        if (hsts == null && altSvc == null) return null;
        if (hsts == null) return new TlsResponseHeaders(new String[] {ALT_SVC}, new String[] {altSvc});
        if (altSvc == null) return new TlsResponseHeaders(new String[] {HSTS}, new String[] {hsts});
        return new TlsResponseHeaders(new String[] {HSTS, ALT_SVC}, new String[] {hsts, altSvc});
    }

    /** Appends the HTTP/1.1 header lines the response lacks. */
    public void writeLines(ByteBuf out, ResponseHead response) {
        for (int i = 0; i < names.length; i++) {
            if (!response.has(names[i])) out.writeBytes(lines[i]);
        }
    }

    /** Adds the fields the response lacks to an HTTP/2 or HTTP/3 field list. */
    public <H extends Headers<CharSequence, CharSequence, H>> void addTo(H headers, ResponseHead response) {
        for (int i = 0; i < names.length; i++) {
            if (!response.has(names[i])) headers.add(asciiNames[i], values[i]);
        }
    }
}
