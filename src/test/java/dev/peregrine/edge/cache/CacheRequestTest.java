package dev.peregrine.edge.cache;

import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.HttpRequestHead;
import org.junit.jupiter.api.Test;

import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class CacheRequestTest {
    /** A request head laid out as the transports lay theirs out: the target, then the headers, in one array. */
    private record Head(String method, byte[] bytes, int pathLength, int queryStart, int queryLength, int[] offsets) implements HttpRequestHead {
        @Override public int pathStart() { return 0; }
        @Override public int headerCount() { return offsets.length / 4; }
        @Override public int nameStart(int i) { return offsets[4 * i]; }
        @Override public int nameLength(int i) { return offsets[4 * i + 1]; }
        @Override public int valueStart(int i) { return offsets[4 * i + 2]; }
        @Override public int valueLength(int i) { return offsets[4 * i + 3]; }
        @Override public long contentLength() { return 0; }
        @Override public boolean chunked() { return false; }
    }

    static CacheRequest request(String method, String target, String... headers) {
        int q = target.indexOf('?');
        StringBuilder text = new StringBuilder(target);
        List<Integer> offsets = new ArrayList<>();
        for (int i = 0; i < headers.length; i += 2) {
            offsets.add(text.length());
            offsets.add(headers[i].length());
            text.append(headers[i]);
            offsets.add(text.length());
            offsets.add(headers[i + 1].length());
            text.append(headers[i + 1]);
        }
        Head head = new Head(method, text.toString().getBytes(StandardCharsets.ISO_8859_1), q < 0 ? target.length() : q,
                q < 0 ? 0 : q + 1, q < 0 ? 0 : target.length() - q - 1, offsets.stream().mapToInt(Integer::intValue).toArray());
        HttpExchange exchange = (HttpExchange) Proxy.newProxyInstance(HttpExchange.class.getClassLoader(), new Class<?>[] {HttpExchange.class},
                (proxy, m, args) -> switch (m.getName()) {
                    case "head" -> head;
                    case "scheme" -> "https";
                    default -> throw new UnsupportedOperationException(m.getName());
                });
        return CacheRequest.of(exchange);
    }

    @Test
    void theKeyIsSchemeLowerCaseHostPathAndQuery() {
        CacheRequest r = request("GET", "/a/b?x=1", "host", "Example.COM:8443");
        assertEquals("https://example.com:8443/a/b?x=1", new String(r.key, StandardCharsets.ISO_8859_1));
        assertEquals(r.hash, request("HEAD", "/a/b?x=1", "host", "example.com:8443").hash);
        assertNotEquals(r.hash, request("GET", "/a/b?x=2", "host", "example.com:8443").hash);
    }

    @Test
    void requestDirectives() {
        assertTrue(request("GET", "/", "cache-control", "max-age=0, no-cache").noCache);
        assertTrue(request("GET", "/", "pragma", "no-cache").noCache);
        assertFalse(request("GET", "/", "cache-control", "max-age=5", "pragma", "no-cache").noCache);
        assertTrue(request("GET", "/", "cache-control", "no-store").noStore);
        assertTrue(request("GET", "/", "authorization", "Basic x").authorization);
        assertTrue(request("GET", "/", "if-none-match", "\"a\"").conditional());
    }

    @Test
    void varyValuesAreNormalisedAcrossFieldLinesAndSpaces() {
        CacheRequest spaced = request("GET", "/", "accept-language", " en ,  de", "accept-language", "fr");
        CacheRequest tight = request("GET", "/", "accept-language", "en,de,fr");
        assertEquals("en,de,fr", spaced.varyValue("accept-language"));
        assertEquals(spaced.varyValue("accept-language"), tight.varyValue("accept-language"));
        assertEquals("", tight.varyValue("accept-encoding"));
    }

    @Test
    void aStoredEntrySelectsItsVariantAndAnswersConditionals() {
        CacheRequest en = request("GET", "/", "accept-language", "en", "if-none-match", "W/\"v1\"");
        CacheRequest fr = request("GET", "/", "accept-language", "fr", "if-modified-since", "Tue, 20 Oct 2015 07:28:00 GMT");
        dev.peregrine.http.ResponseHead head = CacheStorabilityTest.head(200, "vary", "Accept-Language", "etag", "\"v1\"",
                "last-modified", "Wed, 21 Oct 2015 07:28:00 GMT", "connection", "close", "content-length", "2");
        CacheEntry entry = CacheEntry.parse(CacheEntry.build(en, head, CacheEntry.varyNames("Accept-Language"), "ok".getBytes(), 2));
        assertTrue(entry.keyEquals(fr));
        assertTrue(entry.variantMatches(en));
        assertFalse(entry.variantMatches(fr));
        assertTrue(CacheValidators.notModified(en, entry));
        assertFalse(CacheValidators.notModified(fr, entry)); // modified after the date asked about
        assertEquals(null, entry.header("connection")); // hop-by-hop: never replayed
        assertEquals("ok", new String(entry.record, entry.bodyStart(), entry.bodyLength()));
    }

    @Test
    void aCodedVariantKeepsTheEntrysKeyAndVaryValuesAndHasASlotVariantOfItsOwn() {
        CacheRequest en = request("GET", "/", "accept-language", "en");
        dev.peregrine.http.ResponseHead head = CacheStorabilityTest.head(200, "vary", "Accept-Language", "content-length", "2");
        List<String> vary = CacheEntry.varyNames("Accept-Language");
        CacheEntry identity = CacheEntry.parse(CacheEntry.build(en, head, vary, "ok".getBytes(), 2));
        dev.peregrine.http.ResponseHead codedHead = CacheStorabilityTest.head(200, "vary", "Accept-Language, Accept-Encoding",
                "content-encoding", "gzip");
        CacheEntry coded = CacheEntry.parse(identity.recoded(codedHead, new byte[] {1, 2, 3}));
        assertTrue(coded.keyEquals(en) && coded.variantMatches(en));
        assertFalse(coded.variantMatches(request("GET", "/", "accept-language", "fr")));
        assertEquals("gzip", coded.header("content-encoding"));
        assertEquals(3, coded.bodyLength());

        int variant = CacheEntry.variantHash(CacheEntry.variant(en, vary));
        assertTrue(CacheEntry.identity(variant) && CacheEntry.codedAs(variant, null));
        java.util.Set<Integer> seen = new java.util.HashSet<>(List.of(variant));
        for (dev.peregrine.edge.ContentCoding coding : dev.peregrine.edge.ContentCoding.values()) {
            int codedVariant = CacheEntry.codedVariant(variant, coding);
            assertTrue(seen.add(codedVariant), "one slot variant per coding");
            assertFalse(CacheEntry.identity(codedVariant));
            assertTrue(CacheEntry.codedAs(codedVariant, coding) && CacheEntry.sameVariant(codedVariant, variant));
        }
        int other = CacheEntry.variantHash(CacheEntry.variant(request("GET", "/", "accept-language", "fr"), vary));
        assertFalse(CacheEntry.sameVariant(other, variant));
    }
}
