package dev.peregrine.edge.cache;

/**
 * Evaluates a request's conditionals against a stored 200 (RFC 9110 §13.1.2, §13.1.3, §13.2.2):
 * If-None-Match with weak comparison of entity tags, else If-Modified-Since against Last-Modified (or,
 * without one, the stored Date).
 */
final class CacheValidators {
    private CacheValidators() {}

    static boolean notModified(CacheRequest request, CacheEntry entry) {
        if (request.ifNoneMatch != null) {
            String etag = entry.header("etag");
            if (request.ifNoneMatch.strip().equals("*")) return true;
            if (etag == null) return false;
            String stored = opaque(etag);
            for (String candidate : request.ifNoneMatch.split(",")) {
                if (opaque(candidate).equals(stored)) return true;
            }
            return false;
        }
        String lastModified = entry.header("last-modified");
        if (lastModified == null) lastModified = entry.header("date");
        if (lastModified == null) return false;
        long since = CacheStorability.httpDate(request.ifModifiedSince);
        long modified = CacheStorability.httpDate(lastModified);
        return since >= 0 && modified >= 0 && modified <= since;
    }

    /** An entity tag without its weakness indicator: weak comparison. */
    private static String opaque(String tag) {
        String t = tag.strip();
        return t.startsWith("W/") ? t.substring(2) : t;
    }
}
