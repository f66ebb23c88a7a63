package dev.peregrine.edge.cache;

import dev.peregrine.http.ResponseHead;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class CacheStorabilityTest {
    @Test
    void directivesParseTokensAndQuotedValues() {
        CacheDirectives d = CacheDirectives.parse("Public, max-age=60, s-maxage=\"120\", no-cache=\"Set-Cookie, X\", max-age=1");
        assertTrue(d.has("public"));
        assertEquals(60, d.seconds("max-age")); // the first of a repeated directive counts
        assertEquals(120, d.seconds("s-maxage"));
        assertTrue(d.has("no-cache"));
        assertFalse(d.has("x"));
        assertEquals(-1, d.seconds("stale-while-revalidate"));
        assertEquals(0, CacheDirectives.parse("max-age=soon").seconds("max-age"));
    }

    @Test
    void sMaxAgeWinsOverMaxAgeAndTheTtlMaxCapsBoth() {
        assertEquals(30_000, CacheStorability.judge(get(), head(200, "cache-control", "max-age=10, s-maxage=30"), 0, 300).freshMillis());
        assertEquals(300_000, CacheStorability.judge(get(), head(200, "cache-control", "max-age=100000"), 0, 300).freshMillis());
    }

    @Test
    void theAgeAResponseCameWithIsSpentFreshness() {
        CacheStorability.Verdict v = CacheStorability.judge(get(), head(200, "cache-control", "max-age=60", "age", "20"), 0, 300);
        assertEquals(40_000, v.freshMillis());
        assertEquals(20, v.ageSeconds());
        assertFalse(CacheStorability.judge(get(), head(200, "cache-control", "max-age=60", "age", "60"), 0, 300).storable());
    }

    @Test
    void expiresCountsFromTheResponsesDate() {
        ResponseHead h = head(200, "date", "Wed, 21 Oct 2015 07:28:00 GMT", "expires", "Wed, 21 Oct 2015 07:29:00 GMT");
        assertEquals(60_000, CacheStorability.judge(get(), h, 0, 300).freshMillis());
        assertFalse(CacheStorability.judge(get(), head(200, "expires", "0"), 0, 300).storable());
    }

    @Test
    void whatIsNeverStored() {
        for (ResponseHead h : List.of(
                head(200),
                head(200, "cache-control", "no-store, max-age=60"),
                head(200, "cache-control", "private, max-age=60"),
                head(200, "cache-control", "no-cache, max-age=60"),
                head(200, "cache-control", "max-age=60", "set-cookie", "a=1"),
                head(200, "cache-control", "max-age=60", "vary", "accept, *"),
                head(206, "cache-control", "max-age=60", "content-range", "bytes 0-1/10"),
                head(302, "cache-control", "max-age=60"))) {
            assertFalse(CacheStorability.judge(get(), h, 0, 300).storable(), () -> CacheStorability.value(h, "cache-control") + " " + h.status());
        }
    }

    private static CacheRequest get() {
        return CacheRequestTest.request("GET", "/x");
    }

    static ResponseHead head(int status, String... headers) {
        ResponseHead h = new ResponseHead(status);
        for (int i = 0; i < headers.length; i += 2) h.add(headers[i], headers[i + 1]);
        return h;
    }
}
