package dev.peregrine.http;

import dev.peregrine.config.TrustedProxies;
import dev.peregrine.http1.RequestHeadParser;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

class ForwardedHeadersTest {
    private static final TrustedProxies LOCAL = TrustedProxies.parse(TrustedProxies.DEFAULT);

    private static RequestHead head(String... headerLines) {
        StringBuilder raw = new StringBuilder("GET / HTTP/1.1\r\nhost: x\r\n");
        for (String line : headerLines) raw.append(line).append("\r\n");
        ByteBuf in = Unpooled.copiedBuffer(raw.append("\r\n").toString(), StandardCharsets.ISO_8859_1);
        try {
            return new RequestHeadParser(8192).parse(in);
        } finally {
            in.release();
        }
    }

    private static String client(ForwardedHeaders.Origin origin) {
        if (origin == null || origin.client() == null) return null;
        InetSocketAddress c = origin.client();
        return io.netty.util.NetUtil.toAddressString(c.getAddress()) + " " + c.getPort();
    }

    private static String scheme(ForwardedHeaders.Origin origin) {
        return origin == null ? null : origin.scheme();
    }

    @Test
    void noForwardingHeadersMeansNothingToChange() {
        assertNull(ForwardedHeaders.resolve(head("user-agent: x"), LOCAL));
    }

    @ParameterizedTest(name = "{0} with {1}")
    @CsvSource(delimiter = '|', nullValues = "none", value = {
            // the client is the rightmost address that is not a trusted proxy
            "127.0.0.1,::1        | 203.0.113.7                        | 203.0.113.7 0",
            "127.0.0.1,::1        | 203.0.113.7, 198.51.100.2          | 198.51.100.2 0",
            "127.0.0.1,10.0.0.0/8 | 203.0.113.7, 198.51.100.2, 10.1.1.1 | 198.51.100.2 0",
            "127.0.0.1,10.0.0.0/8 | 10.0.0.5, 10.0.0.6                 | 10.0.0.5 0",
            "*                    | 203.0.113.7, 198.51.100.2, 10.1.1.1 | 203.0.113.7 0",
            "127.0.0.1            | 203.0.113.7:4711                   | 203.0.113.7 4711",
            "127.0.0.1            | [2001:db8::7]:4711                 | 2001:db8::7 4711",
            "127.0.0.1            | 2001:db8:0:0::7                    | 2001:db8::7 0",
            "127.0.0.1            | [2001:db8::7]                      | 2001:db8::7 0",
            // the chosen entry is no address: the header is ignored, never resolved, never skipped over
            "127.0.0.1            | 203.0.113.7, unknown                | none",
            "127.0.0.1            | example.com                        | none",
            "127.0.0.1            | 203.0.113.7:99999                  | none",
            "127.0.0.1            | [203.0.113.7]                      | none",
            "127.0.0.1            | 203.0.113.7,                       | none",
            "127.0.0.1            | 1.2.3                              | none",
    })
    void xForwardedForChains(String trusted, String chain, String expected) {
        ForwardedHeaders.Origin origin = ForwardedHeaders.resolve(head("x-forwarded-for: " + chain), TrustedProxies.parse(trusted));
        assertEquals(expected, client(origin));
    }

    @Test
    void repeatedXForwardedForLinesFormOneChain() {
        ForwardedHeaders.Origin origin = ForwardedHeaders.resolve(
                head("x-forwarded-for: 203.0.113.7", "x-forwarded-for: 198.51.100.2, 127.0.0.1"), LOCAL);
        assertEquals("198.51.100.2 0", client(origin));
    }

    @ParameterizedTest(name = "{0} / {1}")
    @CsvSource(delimiter = '|', nullValues = "none", value = {
            "none                       | https        | https",
            "none                       | HTTPS        | https",
            "none                       | http         | http",
            "none                       | wss          | https",
            "none                       | ftp          | none",
            "none                       | ' '          | none",
            "203.0.113.7                | https        | https",
            // each proxy appended one entry to both: the client's hop is one from the right
            "203.0.113.7, 127.0.0.1     | https, http  | https",
            // a proxy that overwrites the proto leaves one entry, the first
            "203.0.113.7, 127.0.0.1     | https        | https",
            "203.0.113.7                | http, https  | https",
    })
    void xForwardedProto(String chain, String protos, String expected) {
        RequestHead head = chain == null ? head("x-forwarded-proto: " + protos)
                : head("x-forwarded-for: " + chain, "x-forwarded-proto: " + protos);
        assertEquals(expected, scheme(ForwardedHeaders.resolve(head, LOCAL)));
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', nullValues = "none", value = {
            "for=192.0.2.60;proto=https;by=203.0.113.43           | 192.0.2.60 0 https",
            "For=\"[2001:db8:cafe::17]:4711\"                       | 2001:db8:cafe::17 4711 none",
            "for=192.0.2.43, for=198.51.100.17;proto=http         | 198.51.100.17 0 http",
            "for=192.0.2.43;proto=https, for=127.0.0.1;proto=http | 192.0.2.43 0 https",
            "for=\"192.0.2.43:8080\"                              | 192.0.2.43 8080 none",
            "for=192.0.2.43:8080                                  | 192.0.2.43 8080 none",
            "for=\"192.0.2.43:_hidden\"                           | 192.0.2.43 0 none",
            "for=unknown;proto=https                              | none https",
            "for=_gazonk                                          | none none",
            "proto=https                                          | none https",
            "for=192.0.2.43;for=192.0.2.44                        | none none",
            "for=\"192.0.2.43                                     | none none",
            "for=192.0.2.43 junk                                  | none none",
            "=192.0.2.43                                          | none none",
            "for=                                                 | none none",
    })
    void forwardedHeader(String value, String expected) {
        ForwardedHeaders.Origin origin = ForwardedHeaders.resolve(head("forwarded: " + value), LOCAL);
        String got = (client(origin) == null ? "none" : client(origin)) + " " + (scheme(origin) == null ? "none" : scheme(origin));
        assertEquals(expected, got);
    }

    @Test
    void xForwardedHeadersWinOverForwarded() {
        ForwardedHeaders.Origin origin = ForwardedHeaders.resolve(
                head("forwarded: for=192.0.2.1;proto=https", "x-forwarded-for: 198.51.100.9"), LOCAL);
        assertEquals("198.51.100.9 0", client(origin));
        assertNull(scheme(origin), "Forwarded is not read when X-Forwarded-* is present");
    }

    @ParameterizedTest
    @ValueSource(strings = {"x-forwarded-for: 127.0.0.1", "x-forwarded-for: ::1, 127.0.0.1"})
    void aChainOfTrustedProxiesOnlyGivesItsLeftmostEntry(String line) {
        ForwardedHeaders.Origin origin = ForwardedHeaders.resolve(head(line), LOCAL);
        String expected = line.contains("::1") ? "::1 0" : "127.0.0.1 0";
        assertEquals(expected, client(origin));
    }
}
