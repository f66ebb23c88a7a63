package dev.peregrine.edge.cache;

import dev.peregrine.http.HttpChars;
import dev.peregrine.http.ResponseHead;

import java.nio.charset.StandardCharsets;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Set;

/**
 * Whether a response to a GET may be stored by a shared cache (RFC 9111 §3) and for how long it is
 * fresh (§4.2.1). Only explicit freshness is used: s-maxage, then max-age, then Expires less Date. The
 * cache computes no heuristic freshness: an application that says nothing is not cached.
 */
final class CacheStorability {
    private CacheStorability() {}

    /**
     * The statuses a cache may store (RFC 9110 §15.1's heuristically cacheable ones, which the RFC
     * lets a cache know; with explicit freshness only here); 206 is left out: the cache stores no parts.
     */
    private static final Set<Integer> STATUSES = Set.of(200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501);

    /** A response head as the cache judges it: its freshness in milliseconds (≤ 0: not storable) and the Age it came with. */
    record Verdict(long freshMillis, long ageSeconds) {
        boolean storable() {
            return freshMillis > 0;
        }
    }

    static final Verdict NOT_STORABLE = new Verdict(0, 0);

    static Verdict judge(CacheRequest request, ResponseHead response, long nowMillis, int ttlMaxSeconds) {
        if (!request.method.equals("GET") || request.noStore || !STATUSES.contains(response.status())) return NOT_STORABLE;
        String cacheControl = value(response, "cache-control");
        CacheDirectives d = CacheDirectives.parse(cacheControl == null ? "" : cacheControl);
        if (d.has("no-store") || d.has("private") || d.has("no-cache")) return NOT_STORABLE;
        if (value(response, "set-cookie") != null || value(response, "content-range") != null) return NOT_STORABLE;
        String vary = value(response, "vary");
        if (vary != null && CacheDirectives.parse(vary).has("*")) return NOT_STORABLE;
        if (request.authorization && !d.has("public") && !d.has("s-maxage") && !d.has("must-revalidate")) return NOT_STORABLE;
        long age = ageSeconds(value(response, "age"));
        long lifetimeSeconds;
        if (d.seconds("s-maxage") >= 0) {
            lifetimeSeconds = d.seconds("s-maxage");
        } else if (d.seconds("max-age") >= 0) {
            lifetimeSeconds = d.seconds("max-age");
        } else {
            String expires = value(response, "expires");
            if (expires == null) return NOT_STORABLE;
            long expiresMillis = httpDate(expires);
            String date = value(response, "date");
            long dateMillis = date == null ? nowMillis : httpDate(date);
            if (expiresMillis < 0 || dateMillis < 0) return NOT_STORABLE;
            lifetimeSeconds = (expiresMillis - dateMillis) / 1000;
        }
        long fresh = Math.min(lifetimeSeconds, ttlMaxSeconds) - age;
        return fresh <= 0 ? NOT_STORABLE : new Verdict(fresh * 1000, age);
    }

    /** The value of a response header, its field lines joined by commas; null when absent. */
    static String value(ResponseHead head, String lowerCaseName) {
        String joined = null;
        for (int i = 0; i < head.count(); i++) {
            if (!HttpChars.equalsLowerCase(head.data(), head.nameStart(i), head.nameLength(i), lowerCaseName)) continue;
            String one = new String(head.data(), head.valueStart(i), head.valueLength(i), StandardCharsets.ISO_8859_1);
            joined = joined == null ? one : joined + "," + one;
        }
        return joined;
    }

    /** An HTTP-date (IMF-fixdate, as RFC 9110 §5.6.7 says senders use) in epoch milliseconds; -1 when it is not one. */
    static long httpDate(String text) {
        try {
            return ZonedDateTime.parse(text.strip(), DateTimeFormatter.RFC_1123_DATE_TIME).toInstant().toEpochMilli();
        } catch (DateTimeParseException e) {
            return -1;
        }
    }

    private static long ageSeconds(String age) {
        if (age == null) return 0;
        String text = age.strip();
        if (text.isEmpty() || text.length() > 9 || !text.chars().allMatch(c -> c >= '0' && c <= '9')) return 0;
        return Long.parseLong(text);
    }
}
