package dev.peregrine.edge.cache;

import dev.peregrine.edge.ContentCoding;
import dev.peregrine.http.HttpChars;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.HttpRequestHead;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * What the cache needs of a request: its key (scheme, host, path and query, RFC 9111 §4.1's target
 * URI), the key's hash, and the request headers that change what the cache may do.
 */
final class CacheRequest {
    final HttpRequestHead head;
    final String method;
    final byte[] key;
    final long hash;
    /** Cache-Control: no-cache (or Pragma: no-cache without Cache-Control): the application answers. */
    final boolean noCache;
    final boolean noStore;
    final boolean authorization;
    final String ifNoneMatch;
    final String ifModifiedSince;
    /** The content coding --compress sends this request's response in; null for identity (and without --compress). */
    final ContentCoding coding;

    private CacheRequest(HttpRequestHead head, byte[] key, ContentCoding coding) {
        this.coding = coding;
        this.head = head;
        this.method = head.method();
        this.key = key;
        this.hash = hash(key);
        String cacheControl = value("cache-control");
        String pragma = value("pragma");
        CacheDirectives directives = cacheControl == null ? null : CacheDirectives.parse(cacheControl);
        noCache = directives != null ? directives.has("no-cache") : pragma != null && CacheDirectives.parse(pragma).has("no-cache");
        noStore = directives != null && directives.has("no-store");
        authorization = value("authorization") != null;
        ifNoneMatch = value("if-none-match");
        ifModifiedSince = value("if-modified-since");
    }

    static CacheRequest of(HttpExchange exchange) {
        return of(exchange, null);
    }

    static CacheRequest of(HttpExchange exchange, ContentCoding coding) {
        HttpRequestHead head = exchange.head();
        byte[] bytes = head.bytes();
        byte[] scheme = exchange.scheme().getBytes(StandardCharsets.US_ASCII);
        int host = -1;
        for (int i = 0; i < head.headerCount(); i++) {
            if (isNamed(head, i, "host")) {
                host = i;
                break;
            }
        }
        int hostLength = host < 0 ? 0 : head.valueLength(host);
        int queryLength = head.queryLength() > 0 ? head.queryLength() + 1 : 0;
        byte[] key = new byte[scheme.length + 3 + hostLength + head.pathLength() + queryLength];
        int at = 0;
        System.arraycopy(scheme, 0, key, at, scheme.length);
        at += scheme.length;
        key[at++] = ':';
        key[at++] = '/';
        key[at++] = '/';
        // Host names are case-insensitive (RFC 3986 §3.2.2): one entry for every spelling.
        for (int i = 0; i < hostLength; i++) {
            byte b = bytes[head.valueStart(host) + i];
            key[at++] = b >= 'A' && b <= 'Z' ? (byte) (b + 32) : b;
        }
        System.arraycopy(bytes, head.pathStart(), key, at, head.pathLength());
        at += head.pathLength();
        if (queryLength > 0) {
            key[at++] = '?';
            System.arraycopy(bytes, head.queryStart(), key, at, head.queryLength());
        }
        return new CacheRequest(head, key, coding);
    }

    boolean conditional() {
        return ifNoneMatch != null || ifModifiedSince != null;
    }

    /** Every field line named {@code name} (lower-case) joined with commas, as RFC 9110 §5.3 allows; null when absent. */
    String value(String name) {
        String joined = null;
        for (int i = 0; i < head.headerCount(); i++) {
            if (!isNamed(head, i, name)) continue;
            String one = new String(head.bytes(), head.valueStart(i), head.valueLength(i), StandardCharsets.ISO_8859_1);
            joined = joined == null ? one : joined + "," + one;
        }
        return joined;
    }

    /**
     * The request's value of a header a response varies on, normalised so that spellings which mean the
     * same select the same variant: list members trimmed and joined by a bare comma; "" when absent.
     */
    String varyValue(String name) {
        String value = value(name);
        if (value == null) return "";
        StringBuilder normal = new StringBuilder(value.length());
        for (String member : value.split(",")) {
            String trimmed = member.strip();
            if (trimmed.isEmpty()) continue;
            if (!normal.isEmpty()) normal.append(',');
            normal.append(trimmed.replaceAll("[ \t]+", " "));
        }
        return normal.toString();
    }

    boolean keyEquals(byte[] record, int from, int length) {
        return Arrays.equals(key, 0, key.length, record, from, from + length);
    }

    private static boolean isNamed(HttpRequestHead head, int i, String name) {
        return HttpChars.equalsLowerCase(head.bytes(), head.nameStart(i), head.nameLength(i), name);
    }

    /** FNV-1a, then a final mix: the index spreads keys by the low bits; never 0, which marks a slot never used. */
    static long hash(byte[] bytes) {
        long h = 0xcbf29ce484222325L;
        for (byte b : bytes) {
            h ^= b & 0xff;
            h *= 0x100000001b3L;
        }
        h ^= h >>> 33;
        h *= 0xff51afd7ed558ccdL;
        h ^= h >>> 33;
        return h == 0 ? 1 : h;
    }
}
