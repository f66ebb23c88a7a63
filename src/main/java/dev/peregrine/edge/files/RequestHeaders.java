package dev.peregrine.edge.files;

import dev.peregrine.http.HttpChars;
import dev.peregrine.http.HttpRequestHead;

import java.nio.charset.StandardCharsets;

/** The request's header values by name, as the preconditions and ranges read them. */
record RequestHeaders(HttpRequestHead head) {

    /** The values of the header with the lower-case {@code name}, several joined by ", " (RFC 9110 §5.3), or null. */
    String get(String name) {
        String joined = null;
        byte[] bytes = head.bytes();
        for (int i = 0; i < head.headerCount(); i++) {
            if (!HttpChars.equalsLowerCase(bytes, head.nameStart(i), head.nameLength(i), name)) continue;
            String value = new String(bytes, head.valueStart(i), head.valueLength(i), StandardCharsets.ISO_8859_1);
            joined = joined == null ? value : joined + ", " + value;
        }
        return joined;
    }
}
