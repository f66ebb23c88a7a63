package dev.peregrine.http1;

import dev.peregrine.http.RequestHead;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.charset.StandardCharsets;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.params.provider.Arguments.arguments;

class RequestHeadParserTest {

    private static final int MAX_HEAD = 8192;

    // ---- helpers

    private static ByteBuf buf(String s) {
        return Unpooled.copiedBuffer(s, StandardCharsets.ISO_8859_1);
    }

    private static RequestHead parse(String raw) {
        return parse(raw, MAX_HEAD);
    }

    private static RequestHead parse(String raw, int maxHeadSize) {
        ByteBuf in = buf(raw);
        try {
            RequestHead head = new RequestHeadParser(maxHeadSize).parse(in);
            assertNotNull(head, "head should be complete");
            return head;
        } finally {
            in.release();
        }
    }

    private static HttpParseException parseFailure(String raw, int maxHeadSize) {
        ByteBuf in = buf(raw);
        try {
            return assertThrows(HttpParseException.class, () -> new RequestHeadParser(maxHeadSize).parse(in));
        } finally {
            in.release();
        }
    }

    private static void assertStatus(int status, String raw) {
        assertEquals(status, parseFailure(raw, MAX_HEAD).status(), () -> "for " + raw.replace("\r", "\\r").replace("\n", "\\n"));
    }

    private static String str(RequestHead head, int start, int length) {
        return new String(head.bytes(), start, length, StandardCharsets.ISO_8859_1);
    }

    private static String target(RequestHead head) {
        return str(head, head.targetStart(), head.targetLength());
    }

    private static String path(RequestHead head) {
        return str(head, head.pathStart(), head.pathLength());
    }

    private static String query(RequestHead head) {
        return str(head, head.queryStart(), head.queryLength());
    }

    private static String name(RequestHead head, int i) {
        return str(head, head.nameStart(i), head.nameLength(i));
    }

    private static String value(RequestHead head, int i) {
        return str(head, head.valueStart(i), head.valueLength(i));
    }

    /** A GET / HTTP/1.1 request with the given header lines. */
    private static String get(String... headerLines) {
        return request("GET / HTTP/1.1", headerLines);
    }

    private static String request(String requestLine, String... headerLines) {
        StringBuilder sb = new StringBuilder(requestLine).append("\r\n");
        for (String line : headerLines) {
            sb.append(line).append("\r\n");
        }
        return sb.append("\r\n").toString();
    }

    // ---- well-formed requests

    @Test
    void parsesNormalGetWithSeveralHeaders() {
        String raw = request("GET /items/42?sort=asc&page=2 HTTP/1.1",
                "Host: example.com", "User-Agent: curl/8.5.0", "Accept: */*", "X-Request-Id: abc-123");
        ByteBuf in = buf(raw + "rest");
        try {
            RequestHead head = new RequestHeadParser(MAX_HEAD).parse(in);
            assertNotNull(head);
            assertEquals(raw.length(), in.readerIndex(), "readerIndex just past the empty line");
            assertEquals("GET", head.method());
            assertEquals("/items/42?sort=asc&page=2", target(head));
            assertEquals("/items/42", path(head));
            assertEquals("sort=asc&page=2", query(head));
            assertTrue(head.http11());
            assertEquals(4, head.headerCount());
            assertEquals("host", name(head, 0));
            assertEquals("example.com", value(head, 0));
            assertEquals("user-agent", name(head, 1));
            assertEquals("curl/8.5.0", value(head, 1));
            assertEquals("accept", name(head, 2));
            assertEquals("*/*", value(head, 2));
            assertEquals("x-request-id", name(head, 3));
            assertEquals("abc-123", value(head, 3));
            assertEquals(-1, head.contentLength());
            assertFalse(head.chunked());
            assertTrue(head.keepAlive());
            assertFalse(head.expectContinue());
            assertFalse(head.upgradeWebSocket());
            assertEquals("example.com", head.headerString("host"));
            assertNull(head.headerString("cookie"));
            assertThrows(IndexOutOfBoundsException.class, () -> head.nameStart(4));
        } finally {
            in.release();
        }
    }

    @Test
    void lowerCasesHeaderNamesInPlace() {
        RequestHead head = parse(get("HOST: h", "Content-TYPE: Text/Plain", "X-MiXeD-123: V"));
        assertEquals("host", name(head, 0));
        assertEquals("content-type", name(head, 1));
        assertEquals("Text/Plain", value(head, 1), "values keep their case");
        assertEquals("x-mixed-123", name(head, 2));
        assertEquals("V", value(head, 2));
        assertTrue(new String(head.bytes(), StandardCharsets.ISO_8859_1).contains("content-type: Text/Plain"));
    }

    @Test
    void trimsOptionalWhitespaceAroundValues() {
        RequestHead head = parse(get("Host:h", "A: \t spaced  out \t ", "B:\t", "C:    "));
        assertEquals("h", value(head, 0));
        assertEquals("spaced  out", value(head, 1), "inner whitespace is kept");
        assertEquals("", value(head, 2));
        assertEquals(0, head.valueLength(3));
    }

    @Test
    void acceptsObsTextInValues() {
        RequestHead head = parse(get("Host: h", "X-Name: caf\u00e9 \u00ff"));
        assertEquals("caf\u00e9 \u00ff", head.headerString("x-name"));
    }

    @Test
    void acceptsEmptyQueryAndPercentEncoding() {
        RequestHead head = parse(request("GET /a%20b%2F? HTTP/1.1", "Host: h"));
        assertEquals("/a%20b%2F", path(head));
        assertEquals(0, head.queryLength());
        head = parse(request("GET /p HTTP/1.1", "Host: h"));
        assertEquals("/p", path(head));
        assertEquals(0, head.queryLength());
        head = parse(request("GET /p?a=%41%4a%4A&b=?c HTTP/1.1", "Host: h"));
        assertEquals("a=%41%4a%4A&b=?c", query(head));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
            "http://example.com:8080/a/b?x=1&y=2 | /a/b | x=1&y=2",
            "https://example.com/            | /    | ''",
            "HTTPS://Example.COM/Index.html  | /Index.html | ''",
            "Http://h                        | /    | ''",
            "http://h?q=1                    | /    | q=1",
            "http://user@h:1/p?q/r           | /p   | q/r",
    })
    void extractsPathAndQueryFromAbsoluteForm(String target, String path, String query) {
        RequestHead head = parse(request("GET " + target + " HTTP/1.1", "Host: h"));
        assertEquals(target, target(head));
        assertEquals(path, path(head));
        assertEquals(query, query(head));
    }

    @Test
    void acceptsAsteriskFormWithOptions() {
        RequestHead head = parse(request("OPTIONS * HTTP/1.1", "Host: h"));
        assertSame("OPTIONS", head.method());
        assertEquals("*", target(head));
        assertEquals("*", path(head));
        assertEquals(0, head.queryLength());
    }

    @Test
    void returnsSharedStringsForStandardMethodsAndNewOnesForOthers() {
        for (String method : new String[]{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"}) {
            RequestHead head = parse(request(method + " / HTTP/1.1", "Host: h"));
            assertSame(method, head.method(), method);
        }
        RequestHead head = parse(request("PURGE / HTTP/1.1", "Host: h"));
        assertEquals("PURGE", head.method());
        assertEquals("get", parse(request("get / HTTP/1.1", "Host: h")).method(), "methods are case-sensitive");
        String longest = "M".repeat(32);
        assertEquals(longest, parse(request(longest + " / HTTP/1.1", "Host: h")).method());
        assertEquals("M-!#$%&'*+.^_`|~9", parse(request("M-!#$%&'*+.^_`|~9 / HTTP/1.1", "Host: h")).method());
    }

    @Test
    void acceptsHttp10WithoutHost() {
        RequestHead head = parse(request("GET /old HTTP/1.0"));
        assertFalse(head.http11());
        assertEquals(0, head.headerCount());
        assertFalse(head.keepAlive());
    }

    @Test
    void returnsNullForIncompleteHeadWithoutAdvancing() {
        RequestHeadParser parser = new RequestHeadParser(MAX_HEAD);
        for (String partial : new String[]{"", "GET / HT", "GET / HTTP/1.1\r", "GET / HTTP/1.1\r\nHost: h\r\n",
                "GET / HTTP/1.1\r\nHost: h\r\n\r", "\r\n"}) {
            ByteBuf in = buf(partial);
            try {
                assertNull(new RequestHeadParser(MAX_HEAD).parse(in), partial);
                assertEquals(0, in.readerIndex());
                assertEquals(partial.length(), in.readableBytes());
            } finally {
                in.release();
            }
        }
        ByteBuf offset = buf("xxGET / HTTP/1.1\r\n");
        try {
            offset.readerIndex(2);
            assertNull(parser.parse(offset));
            assertEquals(2, offset.readerIndex());
        } finally {
            offset.release();
        }
    }

    @Test
    void parsesHeadSplitAcrossTwoWrites() {
        RequestHeadParser parser = new RequestHeadParser(MAX_HEAD);
        ByteBuf in = Unpooled.buffer();
        try {
            in.writeCharSequence("POST /upload HTTP/1.1\r\nHost: h\r\nContent-Le", StandardCharsets.ISO_8859_1);
            assertNull(parser.parse(in));
            assertEquals(0, in.readerIndex());
            in.writeCharSequence("ngth: 5\r\n\r\nhello", StandardCharsets.ISO_8859_1);
            RequestHead head = parser.parse(in);
            assertNotNull(head);
            assertEquals("POST", head.method());
            assertEquals(5, head.contentLength());
            assertEquals("hello", in.toString(StandardCharsets.ISO_8859_1));
        } finally {
            in.release();
        }
    }

    @Test
    void parsesHeadArrivingOneByteAtATime() {
        String raw = request("GET /x?y HTTP/1.1", "Host: h", "Connection: close");
        RequestHeadParser parser = new RequestHeadParser(MAX_HEAD);
        ByteBuf in = Unpooled.buffer();
        try {
            RequestHead head = null;
            for (int i = 0; i < raw.length(); i++) {
                assertNull(head, "complete too early");
                in.writeByte(raw.charAt(i));
                head = parser.parse(in);
            }
            assertNotNull(head);
            assertEquals("/x", path(head));
            assertFalse(head.keepAlive());
            assertEquals(0, in.readableBytes());
        } finally {
            in.release();
        }
    }

    @Test
    void parsesPipelinedRequestsOneAfterTheOther() {
        String first = request("GET /first HTTP/1.1", "Host: a");
        String second = request("POST /second HTTP/1.1", "Host: b", "Content-Length: 3");
        RequestHeadParser parser = new RequestHeadParser(MAX_HEAD);
        ByteBuf in = buf(first + second + "abc");
        try {
            RequestHead one = parser.parse(in);
            assertEquals("/first", path(one));
            assertEquals("a", one.headerString("host"));
            assertEquals(first.length(), in.readerIndex());
            RequestHead two = parser.parse(in);
            assertEquals("/second", path(two));
            assertEquals("b", two.headerString("host"));
            assertEquals(3, two.contentLength());
            assertEquals("abc", in.toString(StandardCharsets.ISO_8859_1));
            assertEquals("/first", path(one), "the first head is a private copy");
        } finally {
            in.release();
        }
    }

    @Test
    void skipsAFewEmptyLinesBeforeTheRequestLine() {
        ByteBuf in = buf("\r\n\r\n" + request("GET / HTTP/1.1", "Host: h"));
        try {
            RequestHead head = new RequestHeadParser(MAX_HEAD).parse(in);
            assertEquals("GET", head.method());
            assertEquals(0, in.readableBytes());
        } finally {
            in.release();
        }
        assertStatus(400, "\r\n".repeat(5) + request("GET / HTTP/1.1", "Host: h"));
    }

    @Test
    void dropsHeadersWithUnderscoreAndProxy() {
        RequestHead head = parse(get("Host: h", "X_Forwarded_For: evil", "Proxy: http://evil:1",
                "PROXY: http://evil:2", "Content_Length: 5", "Transfer_Encoding: chunked", "Host_: other", "X-Ok: 1"));
        assertEquals(2, head.headerCount());
        assertEquals("host", name(head, 0));
        assertEquals("x-ok", name(head, 1));
        assertNull(head.headerString("proxy"));
        assertEquals(-1, head.contentLength(), "a dropped Content_Length has no effect");
        assertFalse(head.chunked());
        assertEquals(2, parse(get("Proxy-Authorization: x", "Host: h")).headerCount(), "only exactly 'proxy' is dropped");
    }

    @Test
    void readsContentLength() {
        assertEquals(0, parse(get("Host: h", "Content-Length: 0")).contentLength());
        assertEquals(999_999_999_999_999_999L,
                parse(get("Host: h", "Content-Length: 999999999999999999")).contentLength());
        assertEquals(42, parse(get("Host: h", "Content-Length: 42", "content-length: 42")).contentLength(),
                "identical repeats are accepted");
        assertEquals(7, parse(get("Host: h", "Content-Length: 007")).contentLength());
    }

    @Test
    void recognisesChunked() {
        RequestHead head = parse(request("POST / HTTP/1.1", "Host: h", "Transfer-Encoding:  ChUnKeD "));
        assertTrue(head.chunked());
        assertEquals(-1, head.contentLength());
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
            "HTTP/1.1 |                                 | true",
            "HTTP/1.1 | Connection: close               | false",
            "HTTP/1.1 | Connection: Keep-Alive, CLOSE    | false",
            "HTTP/1.1 | Connection: keep-alive          | true",
            "HTTP/1.1 | Connection: closed              | true",
            "HTTP/1.1 | Connection: x ,close,y          | false",
            "HTTP/1.0 |                                 | false",
            "HTTP/1.0 | Connection: keep-alive          | true",
            "HTTP/1.0 | Connection: Upgrade , KEEP-ALIVE | true",
            "HTTP/1.0 | Connection: keep-alive, close   | false",
            "HTTP/1.0 | Connection: keep-alive-ish      | false",
    })
    void decidesKeepAlive(String version, String connectionHeader, boolean keepAlive) {
        String raw = connectionHeader == null
                ? request("GET / " + version, "Host: h")
                : request("GET / " + version, "Host: h", connectionHeader);
        assertEquals(keepAlive, parse(raw).keepAlive());
    }

    @Test
    void combinesSeveralConnectionHeaders() {
        assertFalse(parse(get("Host: h", "Connection: keep-alive", "Connection: close")).keepAlive());
    }

    @Test
    void recognisesExpectContinue() {
        assertTrue(parse(request("POST / HTTP/1.1", "Host: h", "Expect: 100-Continue", "Content-Length: 1"))
                .expectContinue());
        assertFalse(parse(request("POST / HTTP/1.1", "Host: h")).expectContinue());
        assertFalse(parse(request("POST / HTTP/1.0", "Expect: 100-continue")).expectContinue(),
                "RFC 9110 10.1.1: ignored in HTTP/1.0");
    }

    @Test
    void recognisesWebSocketUpgrade() {
        assertTrue(parse(get("Host: h", "Connection: keep-alive, Upgrade", "Upgrade: WebSocket")).upgradeWebSocket());
        assertTrue(parse(get("Host: h", "Upgrade: foo, websocket", "Connection: upgrade")).upgradeWebSocket());
        assertFalse(parse(get("Host: h", "Upgrade: websocket")).upgradeWebSocket(), "needs Connection: upgrade");
        assertFalse(parse(get("Host: h", "Connection: upgrade")).upgradeWebSocket(), "needs Upgrade: websocket");
        assertFalse(parse(get("Host: h", "Connection: upgrade", "Upgrade: h2c")).upgradeWebSocket());
        assertFalse(parse(request("GET / HTTP/1.0", "Connection: upgrade", "Upgrade: websocket")).upgradeWebSocket(),
                "RFC 9110 7.8: Upgrade is ignored in HTTP/1.0");
    }

    @Test
    void enforcesHeadSizeLimit() {
        String raw = request("GET / HTTP/1.1", "Host: h", "X-Pad: " + "p".repeat(100));
        assertEquals("GET", parse(raw, raw.length()).method(), "exactly at the limit");
        assertEquals(431, parseFailure(raw, raw.length() - 1).status());
        assertEquals("GET", parse("\r\n\r\n" + raw, raw.length()).method(), "leading empty lines do not count");
    }

    @Test
    void refusesIncompleteHeadAlreadyOverTheLimit() {
        RequestHeadParser parser = new RequestHeadParser(64);
        ByteBuf in = buf("GET / HTTP/1.1\r\nHost: h\r\nX-Pad: " + "p".repeat(20));
        try {
            assertNull(parser.parse(in), "under the limit: wait for more");
            in.writeCharSequence("p".repeat(20), StandardCharsets.ISO_8859_1);
            HttpParseException e = assertThrows(HttpParseException.class, () -> parser.parse(in));
            assertEquals(431, e.status());
        } finally {
            in.release();
        }
    }

    @Test
    void limitsTheNumberOfHeaderLines() {
        String[] hundred = new String[100];
        hundred[0] = "Host: h";
        for (int i = 1; i < hundred.length; i++) {
            hundred[i] = "X-H" + i + ": v";
        }
        assertEquals(100, parse(get(hundred)).headerCount());
        String[] tooMany = java.util.Arrays.copyOf(hundred, 101);
        tooMany[100] = "X-Last: v";
        assertEquals(431, parseFailure(get(tooMany), 1 << 20).status());
    }

    @Test
    void exceptionCarriesStatusAndReasonWithoutStackTrace() {
        HttpParseException e = parseFailure(request("POST / HTTP/1.1", "Host: h", "Content-Length: 1",
                "Transfer-Encoding: chunked"), MAX_HEAD);
        assertEquals(400, e.status());
        assertEquals("Content-Length with Transfer-Encoding", e.getMessage());
        assertEquals(0, e.getStackTrace().length);
    }

    @Test
    void refusesBareLfBeforeTheHeadIsComplete() {
        ByteBuf in = buf("GET / HTTP/1.1\nHost: h\n");
        try {
            assertEquals(400, assertThrows(HttpParseException.class,
                    () -> new RequestHeadParser(MAX_HEAD).parse(in)).status());
        } finally {
            in.release();
        }
    }

    // ---- malformed requests

    static Stream<Arguments> malformedRequests() {
        return Stream.of(
                // line endings
                arguments(400, "GET / HTTP/1.1\nHost: h\r\n\r\n"),
                arguments(400, "GET / HTTP/1.1\r\nHost: h\n\r\n"),
                arguments(400, "GET / HTTP/1.1\r\nHost: h\r\n\n"),
                arguments(400, "GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n"),
                arguments(400, "GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n"),
                arguments(400, "GET / HTTP/1.1\r\nHost: h\r\nX: a\nb\r\n\r\n"),
                arguments(400, "GET /\r HTTP/1.1\r\nHost: h\r\n\r\n"),
                arguments(400, "\n" + get("Host: h")),
                // request line
                arguments(400, request("GET  / HTTP/1.1", "Host: h")),
                arguments(400, request("GET /  HTTP/1.1", "Host: h")),
                arguments(400, request("GET / HTTP/1.1 ", "Host: h")),
                arguments(400, request(" GET / HTTP/1.1", "Host: h")),
                arguments(400, request("GET\t/ HTTP/1.1", "Host: h")),
                arguments(400, request("GET /\tHTTP/1.1", "Host: h")),
                arguments(400, request("G(T / HTTP/1.1", "Host: h")),
                arguments(400, request("GET", "Host: h")),
                arguments(400, request("GET /", "Host: h")),
                arguments(400, request("GET HTTP/1.1", "Host: h")),
                arguments(400, request("/ HTTP/1.1", "Host: h")),
                arguments(400, request("M".repeat(33) + " / HTTP/1.1", "Host: h")),
                arguments(400, request("G\u00c9T / HTTP/1.1", "Host: h")),
                // request-target
                arguments(400, request("GET /a\u0000b HTTP/1.1", "Host: h")),
                arguments(400, request("GET /a\u0001b HTTP/1.1", "Host: h")),
                arguments(400, request("GET /a\u007fb HTTP/1.1", "Host: h")),
                arguments(400, request("GET /caf\u00e9 HTTP/1.1", "Host: h")),
                arguments(400, request("GET /a#frag HTTP/1.1", "Host: h")),
                arguments(400, request("GET /a?b#frag HTTP/1.1", "Host: h")),
                arguments(400, request("GET a/b HTTP/1.1", "Host: h")),
                arguments(400, request("GET example.com:443 HTTP/1.1", "Host: h")),
                arguments(400, request("CONNECT example.com:443 HTTP/1.1", "Host: h")),
                arguments(400, request("GET ftp://h/a HTTP/1.1", "Host: h")),
                arguments(400, request("GET http:/h/a HTTP/1.1", "Host: h")),
                arguments(400, request("GET http:// HTTP/1.1", "Host: h")),
                arguments(400, request("GET http:///a HTTP/1.1", "Host: h")),
                arguments(400, request("GET https://?q HTTP/1.1", "Host: h")),
                arguments(400, request("GET * HTTP/1.1", "Host: h")),
                arguments(400, request("OPTIONS *x HTTP/1.1", "Host: h")),
                arguments(400, request("OPTIONS */ HTTP/1.1", "Host: h")),
                arguments(400, request("GET /%zz HTTP/1.1", "Host: h")),
                arguments(400, request("GET /a%4 HTTP/1.1", "Host: h")),
                arguments(400, request("GET /a% HTTP/1.1", "Host: h")),
                arguments(400, request("GET /a%%41 HTTP/1.1", "Host: h")),
                arguments(400, request("GET /a?x=%g1 HTTP/1.1", "Host: h")),
                // version
                arguments(400, request("GET / http/1.1", "Host: h")),
                arguments(400, request("GET / HTTP/1.10", "Host: h")),
                arguments(400, request("GET / HTTP/11", "Host: h")),
                arguments(400, request("GET / HTTP/1", "Host: h")),
                arguments(400, request("GET / HTTPS/1.1", "Host: h")),
                arguments(400, request("GET / HTTP/1.x", "Host: h")),
                arguments(505, request("GET / HTTP/2.0", "Host: h")),
                arguments(505, request("GET / HTTP/1.2", "Host: h")),
                arguments(505, request("GET / HTTP/0.9", "Host: h")),
                arguments(505, request("GET / HTTP/3.0", "Host: h")),
                // header lines
                arguments(400, get("Host: h", "X-Folded: a", " continued")),
                arguments(400, get("Host: h", "X-Folded: a", "\tcontinued")),
                arguments(400, get(" Host: h")),
                arguments(400, get("Host : h")),
                arguments(400, get("Host\t: h")),
                arguments(400, get("Host: h", "X Y: z")),
                arguments(400, get("Host: h", ": nameless")),
                arguments(400, get("Host: h", "NoColon")),
                arguments(400, get("Host: h", "No colon at all")),
                arguments(400, get("Host: h", "X(Y): z")),
                arguments(400, get("Host: h", "X\u00e9: z")),
                arguments(400, get("Host: h", "X_Under\u0001score: z")),
                arguments(400, get("Host: h", "X: a\u0000b")),
                arguments(400, get("Host: h", "X: a\u001fb")),
                arguments(400, get("Host: h", "X: a\u007fb")),
                arguments(400, get("Host: h", "X_Dropped: a\u0000b")),
                // Host
                arguments(400, request("GET / HTTP/1.1")),
                arguments(400, request("GET / HTTP/1.1", "X-Host: h")),
                arguments(400, request("GET / HTTP/1.1", "Host: a", "Host: a")),
                arguments(400, request("GET / HTTP/1.1", "Host: a", "hOsT: b")),
                arguments(400, request("GET / HTTP/1.0", "Host: a", "Host: b")),
                // Content-Length
                arguments(400, get("Host: h", "Content-Length: +1")),
                arguments(400, get("Host: h", "Content-Length: -1")),
                arguments(400, get("Host: h", "Content-Length: 1 2")),
                arguments(400, get("Host: h", "Content-Length: 1,1")),
                arguments(400, get("Host: h", "Content-Length: 1, 1")),
                arguments(400, get("Host: h", "Content-Length: ")),
                arguments(400, get("Host: h", "Content-Length: 0x10")),
                arguments(400, get("Host: h", "Content-Length: 1.0")),
                arguments(400, get("Host: h", "Content-Length: 1e3")),
                arguments(400, get("Host: h", "Content-Length: 1234567890123456789")),
                arguments(400, get("Host: h", "Content-Length: 99999999999999999999999")),
                arguments(400, get("Host: h", "Content-Length: 1", "Content-Length: 2")),
                // Transfer-Encoding
                arguments(400, get("Host: h", "Content-Length: 5", "Transfer-Encoding: chunked")),
                arguments(400, get("Host: h", "Transfer-Encoding: chunked", "Content-Length: 0")),
                arguments(400, get("Host: h", "Transfer-Encoding: gzip", "Content-Length: 5")),
                arguments(400, request("POST / HTTP/1.0", "Transfer-Encoding: chunked")),
                arguments(400, request("POST / HTTP/1.0", "Transfer-Encoding: gzip")),
                arguments(400, get("Host: h", "Transfer-Encoding: chunked", "Transfer-Encoding: chunked")),
                arguments(400, get("Host: h", "Transfer-Encoding: gzip", "Transfer-Encoding: chunked")),
                arguments(400, get("Host: h", "Transfer-Encoding: gzip, chunked")),
                arguments(400, get("Host: h", "Transfer-Encoding: chunked, chunked")),
                arguments(400, get("Host: h", "Transfer-Encoding: chunked,")),
                arguments(400, get("Host: h", "Transfer-Encoding: ,chunked")),
                arguments(400, get("Host: h", "Transfer-Encoding: ")),
                arguments(400, get("Host: h", "Transfer-Encoding: chunked;q=1")),
                arguments(400, get("Host: h", "Transfer-Encoding: chun ked")),
                arguments(400, get("Host: h", "Transfer-Encoding: \"chunked\"")),
                arguments(400, get("Host: h", "Transfer-Encoding: chunked\u000b")),
                arguments(501, get("Host: h", "Transfer-Encoding: gzip")),
                arguments(501, get("Host: h", "Transfer-Encoding: deflate")),
                arguments(501, get("Host: h", "Transfer-Encoding: compress")),
                arguments(501, get("Host: h", "Transfer-Encoding: identity")),
                arguments(501, get("Host: h", "Transfer-Encoding: foo")),
                arguments(501, get("Host: h", "Transfer-Encoding: chunkedx")),
                // Expect
                arguments(417, get("Host: h", "Expect: 100-continue-please")),
                arguments(417, get("Host: h", "Expect: 200-ok")),
                arguments(417, get("Host: h", "Expect: 100-continue, foo")),
                arguments(417, get("Host: h", "Expect: ")),
                arguments(417, get("Host: h", "Expect: 100-continue", "Expect: foo")));
    }

    @ParameterizedTest(name = "[{index}] {0}")
    @MethodSource("malformedRequests")
    void refusesMalformedRequest(int status, String raw) {
        assertStatus(status, raw);
    }
}
