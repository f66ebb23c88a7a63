package dev.peregrine.edge.compress;

import dev.peregrine.edge.ContentCoding;
import dev.peregrine.http.HttpChars;
import dev.peregrine.http.ResponseHead;

import java.nio.charset.StandardCharsets;
import java.util.Locale;

/**
 * Which responses --compress touches, and how their head changes when it does. docs/EDGE.md has the
 * list of compressible types; a type is on it when its bodies are text-like and not compressed already.
 */
final class CompressionRules {
    private CompressionRules() {}

    /**
     * Whether the response is one to compress, for a client that takes a coding. {@code size}: the body's
     * declared size (or its whole size when it comes in one piece), -1 when unknown (a stream, compressed).
     */
    static boolean eligible(ResponseHead head, long size, int minSize) {
        int status = head.status();
        if (status < 200 || status == 204 || status == 206 || status == 304) return false;
        if (size >= 0 && size < minSize) return false;
        boolean compressibleType = false;
        byte[] data = head.data();
        for (int i = 0; i < head.count(); i++) {
            int nameStart = head.nameStart(i), nameLength = head.nameLength(i);
            int valueStart = head.valueStart(i), valueLength = head.valueLength(i);
            if (HttpChars.equalsLowerCase(data, nameStart, nameLength, "content-encoding")) return false;
            if (HttpChars.equalsLowerCase(data, nameStart, nameLength, "cache-control")
                    && HttpChars.containsTokenIgnoreCase(data, valueStart, valueLength, "no-transform")) return false;
            if (HttpChars.equalsLowerCase(data, nameStart, nameLength, "content-type")) {
                compressibleType = compressible(new String(data, valueStart, valueLength, StandardCharsets.ISO_8859_1));
            }
        }
        return compressibleType;
    }

    /** Whether bodies of this Content-Type are worth compressing: text-like, and not compressed already. */
    static boolean compressible(String contentType) {
        int semicolon = contentType.indexOf(';');
        String type = (semicolon >= 0 ? contentType.substring(0, semicolon) : contentType).trim().toLowerCase(Locale.ROOT);
        if (type.startsWith("text/")) return true;
        if (type.endsWith("+json") || type.endsWith("+xml")) return true; // image/svg+xml, application/ld+json, atom, rss...
        return switch (type) {
            case "application/json", "application/x-ndjson", "application/javascript", "application/x-javascript",
                 "application/ecmascript", "application/xml", "application/graphql", "application/x-www-form-urlencoded",
                 "application/vnd.ms-fontobject", "font/ttf", "font/otf", "image/x-icon", "image/vnd.microsoft.icon",
                 "image/bmp" -> true;
            default -> false;
        };
    }

    /** The application's head with {@code Vary: Accept-Encoding}: the response depends on that header even when sent as is. */
    static ResponseHead withVary(ResponseHead head) {
        if (variesOnAcceptEncoding(head)) return head;
        ResponseHead out = new ResponseHead(head.status());
        out.reasonOf(head);
        out.addAll(head);
        out.add("vary", "Accept-Encoding");
        return out;
    }

    /**
     * The head of the compressed response: Content-Encoding set, Content-Length dropped (the transport
     * frames the compressed body: its length when it comes in one piece, else chunked or DATA frames),
     * a strong ETag made weak (the bytes differ from the identity representation's), Vary added to.
     */
    static ResponseHead compressed(ResponseHead head, ContentCoding coding) {
        ResponseHead out = new ResponseHead(head.status());
        out.reasonOf(head);
        byte[] data = head.data();
        for (int i = 0; i < head.count(); i++) {
            int nameStart = head.nameStart(i), nameLength = head.nameLength(i);
            if (HttpChars.equalsLowerCase(data, nameStart, nameLength, "content-length")) continue;
            if (HttpChars.equalsLowerCase(data, nameStart, nameLength, "etag")) {
                String tag = new String(data, head.valueStart(i), head.valueLength(i), StandardCharsets.ISO_8859_1).trim();
                out.add(new String(data, nameStart, nameLength, StandardCharsets.ISO_8859_1), tag.startsWith("W/") ? tag : "W/" + tag);
                continue;
            }
            out.add(head, i);
        }
        if (!variesOnAcceptEncoding(head)) out.add("vary", "Accept-Encoding");
        out.add("content-encoding", coding.token());
        return out;
    }

    /** The head of the 304 that answers a matching If-None-Match instead of {@code compressed}: no body, nor the metadata of one. */
    static ResponseHead notModified(ResponseHead compressed) {
        ResponseHead out = new ResponseHead(304);
        byte[] data = compressed.data();
        for (int i = 0; i < compressed.count(); i++) {
            int nameStart = compressed.nameStart(i), nameLength = compressed.nameLength(i);
            if (HttpChars.equalsLowerCase(data, nameStart, nameLength, "content-type")
                    || HttpChars.equalsLowerCase(data, nameStart, nameLength, "content-encoding")) continue;
            out.add(compressed, i);
        }
        return out;
    }

    /** The response's ETag, or null. */
    static String etag(ResponseHead head) {
        byte[] data = head.data();
        for (int i = 0; i < head.count(); i++) {
            if (HttpChars.equalsLowerCase(data, head.nameStart(i), head.nameLength(i), "etag")) {
                return new String(data, head.valueStart(i), head.valueLength(i), StandardCharsets.ISO_8859_1).trim();
            }
        }
        return null;
    }

    /** Whether a Vary of the application already names Accept-Encoding, or is {@code *}. */
    private static boolean variesOnAcceptEncoding(ResponseHead head) {
        byte[] data = head.data();
        for (int i = 0; i < head.count(); i++) {
            if (!HttpChars.equalsLowerCase(data, head.nameStart(i), head.nameLength(i), "vary")) continue;
            if (HttpChars.containsTokenIgnoreCase(data, head.valueStart(i), head.valueLength(i), "accept-encoding")
                    || HttpChars.containsTokenIgnoreCase(data, head.valueStart(i), head.valueLength(i), "*")) return true;
        }
        return false;
    }
}
