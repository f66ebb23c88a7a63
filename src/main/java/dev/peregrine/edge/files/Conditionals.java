package dev.peregrine.edge.files;

import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;

/**
 * The preconditions of RFC 9110 §13 for a file, evaluated in the order of §13.2.2: If-Match, else
 * If-Unmodified-Since; then If-None-Match, else If-Modified-Since; and If-Range for a Range. Dates
 * compare at the one-second resolution of HTTP dates; a date that does not parse is ignored, as the
 * RFC asks.
 */
final class Conditionals {
    enum Verdict { PROCEED, NOT_MODIFIED, PRECONDITION_FAILED }

    private Conditionals() {}

    /** What the preconditions say for a GET or HEAD of the representation with {@code etag} (strong) and {@code lastModified} (epoch seconds). */
    static Verdict evaluate(RequestHeaders headers, String etag, long lastModified) {
        String ifMatch = headers.get("if-match");
        if (ifMatch != null) {
            if (!matches(ifMatch, etag, true)) return Verdict.PRECONDITION_FAILED;
        } else {
            long since = date(headers.get("if-unmodified-since"));
            if (since >= 0 && lastModified > since) return Verdict.PRECONDITION_FAILED;
        }
        String ifNoneMatch = headers.get("if-none-match");
        if (ifNoneMatch != null) {
            if (matches(ifNoneMatch, etag, false)) return Verdict.NOT_MODIFIED;
        } else {
            long since = date(headers.get("if-modified-since"));
            if (since >= 0 && lastModified <= since) return Verdict.NOT_MODIFIED;
        }
        return Verdict.PROCEED;
    }

    /**
     * Whether a Range may be honoured: without If-Range always; with one, only when it names this
     * representation: its entity tag, compared strongly, or exactly its Last-Modified date (a date is a
     * strong validator here since the tag changes with the modification time).
     */
    static boolean rangeApplies(RequestHeaders headers, String etag, long lastModified) {
        String ifRange = headers.get("if-range");
        if (ifRange == null) return true;
        String value = ifRange.strip();
        if (value.startsWith("\"") || value.startsWith("W/")) return value.equals(etag);
        return date(value) == lastModified;
    }

    /** Whether the list of entity tags {@code list} (or "*") has one that matches {@code etag}. */
    static boolean matches(String list, String etag, boolean strong) {
        if (list.strip().equals("*")) return true;
        String opaque = etag.substring(etag.indexOf('"'));
        for (String raw : list.split(",")) {
            String tag = raw.strip();
            boolean weak = tag.startsWith("W/");
            if (weak && strong) continue;
            if ((weak ? tag.substring(2) : tag).equals(opaque)) return true;
        }
        return false;
    }

    /** An HTTP date as epoch seconds, or -1 when absent or not understood. */
    static long date(String value) {
        if (value == null) return -1;
        try {
            return ZonedDateTime.parse(value.strip(), DateTimeFormatter.RFC_1123_DATE_TIME).toEpochSecond();
        } catch (DateTimeParseException e) {
            return -1;
        }
    }
}
