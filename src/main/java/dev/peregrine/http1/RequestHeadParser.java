package dev.peregrine.http1;

import dev.peregrine.http.HttpChars;
import dev.peregrine.http.RequestHead;
import io.netty.buffer.ByteBuf;
import io.netty.util.ByteProcessor;

import java.nio.charset.StandardCharsets;

/**
 * A strict HTTP/1.1 request-head parser (RFC 9112).
 *
 * <p>Hand-written rather than Netty's {@code HttpRequestDecoder} because that decoder silently accepts inputs
 * the server must refuse to prevent request smuggling (obs-fold, a repeated Host, ambiguous framing headers),
 * and because it builds an {@code HttpHeaders} map that we would immediately convert again: this parser
 * produces exactly the compact form the Python bridge consumes, one byte array plus offsets.
 *
 * <p>One instance serves one connection and is not thread-safe. Between calls that return null it remembers how
 * far it has scanned, assuming the next call sees the same readable bytes with more appended (as with a
 * cumulating decoder).
 */
public final class RequestHeadParser {

    static final byte CR = '\r';
    static final byte LF = '\n';
    static final byte SP = ' ';
    static final byte HTAB = '\t';

    private static final int MAX_METHOD_LENGTH = 32;
    private static final int MAX_HEADER_LINES = 100;
    /** RFC 9112 2.2 asks to skip "at least one" empty line before the request line; a few tolerate sloppy clients. */
    private static final int MAX_LEADING_EMPTY_LINES = 4;
    /** 18 digits cannot overflow a long. */
    private static final int MAX_CONTENT_LENGTH_DIGITS = 18;

    private static final String[] STANDARD_METHODS =
            {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"};
    private static final byte[][] STANDARD_METHOD_BYTES = new byte[STANDARD_METHODS.length][];
    private static final String OPTIONS = "OPTIONS";

    private static final byte[] HOST = ascii("host");
    private static final byte[] CONTENT_LENGTH = ascii("content-length");
    private static final byte[] TRANSFER_ENCODING = ascii("transfer-encoding");
    private static final byte[] CONNECTION = ascii("connection");
    private static final byte[] UPGRADE = ascii("upgrade");
    private static final byte[] EXPECT = ascii("expect");
    private static final byte[] PROXY = ascii("proxy");
    private static final byte[] CHUNKED = ascii("chunked");
    private static final byte[] CONTINUE = ascii("100-continue");
    private static final byte[] CLOSE = ascii("close");
    private static final byte[] KEEP_ALIVE = ascii("keep-alive");
    private static final byte[] WEBSOCKET = ascii("websocket");
    private static final byte[] HTTP_SCHEME = ascii("http://");
    private static final byte[] HTTPS_SCHEME = ascii("https://");

    static {
        for (int i = 0; i < STANDARD_METHODS.length; i++) {
            STANDARD_METHOD_BYTES[i] = ascii(STANDARD_METHODS[i]);
        }
    }

    private final int maxHeadSize;
    private final int spareBytes;
    private final int spareHeaders;
    private final HeadScanner scanner = new HeadScanner();

    // Per-request header semantics, reset by parseHead; fields rather than an object to stay allocation-light.
    private int hostCount;
    private long contentLength;
    private int transferEncodingCount;
    private boolean chunked;
    private boolean unsupportedCoding;
    private boolean expectContinue;
    private boolean unsupportedExpectation;
    private boolean connectionClose;
    private boolean connectionKeepAlive;
    private boolean connectionUpgrade;
    private boolean upgradeToWebSocket;

    public RequestHeadParser(int maxHeadSize) {
        this(maxHeadSize, 0, 0);
    }

    /**
     * {@code spareBytes} and {@code spareHeaders}: room left in every head for the headers the connection adds
     * ({@link RequestHead#appendHeader}), so that adding them copies nothing.
     */
    public RequestHeadParser(int maxHeadSize, int spareBytes, int spareHeaders) {
        if (maxHeadSize <= 0) {
            throw new IllegalArgumentException("maxHeadSize must be positive: " + maxHeadSize);
        }
        this.maxHeadSize = maxHeadSize;
        this.spareBytes = spareBytes;
        this.spareHeaders = spareHeaders;
    }

    /**
     * Looks at buf from its readerIndex. If the complete head (ending in CRLFCRLF) is not there yet returns null and
     * leaves readerIndex unchanged, but throws HttpParseException(431) if what is there already exceeds maxHeadSize.
     * On success copies the head into a new byte[], advances readerIndex past the terminating empty line and returns
     * the RequestHead. Throws HttpParseException for invalid input.
     */
    public RequestHead parse(ByteBuf buf) {
        int base = buf.readerIndex();
        try {
            if (!scanner.scan(buf)) {
                return null;
            }
            int headStart = scanner.headStart;
            int headEnd = scanner.headEnd;
            int lineCount = scanner.lineCount;
            scanner.reset();
            // Keep the CRLF of the last header line, so every line in the copy ends the same way.
            int length = headEnd - 2 - headStart;
            byte[] head = new byte[length + spareBytes];
            buf.getBytes(base + headStart, head, 0, length);
            RequestHead result = parseHead(head, length, lineCount);
            buf.readerIndex(base + headEnd);
            return result;
        } catch (HttpParseException e) {
            scanner.reset();
            throw e;
        }
    }

    private RequestHead parseHead(byte[] h, int length, int lineCount) {
        int lineEnd = indexOf(h, CR, 0, length);

        int methodEnd = 0;
        while (methodEnd < lineEnd && isTchar(h[methodEnd])) {
            methodEnd++;
        }
        if (methodEnd == 0 || methodEnd == lineEnd || h[methodEnd] != SP) {
            throw bad("malformed method");
        }
        if (methodEnd > MAX_METHOD_LENGTH) {
            throw bad("method too long");
        }
        String method = method(h, methodEnd);

        int targetStart = methodEnd + 1;
        int targetEnd = indexOf(h, SP, targetStart, lineEnd);
        if (targetEnd < 0) {
            throw bad("missing HTTP version");
        }
        if (targetEnd == targetStart) {
            throw bad("empty request-target");
        }
        validateTargetBytes(h, targetStart, targetEnd);
        int versionStart = targetEnd + 1;
        boolean http11 = parseVersion(h, versionStart, lineEnd);

        int question = indexOf(h, (byte) '?', targetStart, targetEnd);
        int pathEnd = question < 0 ? targetEnd : question;
        int queryStart = question < 0 ? targetEnd : question + 1;
        int pathStart;
        byte first = h[targetStart];
        if (first == '/') {
            pathStart = targetStart;
        } else if (first == '*') {
            if (targetEnd - targetStart != 1 || !OPTIONS.equals(method)) {
                throw bad("asterisk-form request-target is only for OPTIONS");
            }
            pathStart = targetStart;
        } else {
            int authorityStart = targetStart + schemeLength(h, targetStart, targetEnd);
            int authorityEnd = authorityStart;
            while (authorityEnd < targetEnd && h[authorityEnd] != '/' && h[authorityEnd] != '?') {
                authorityEnd++;
            }
            if (authorityEnd == authorityStart) {
                throw bad("absolute-form request-target without authority");
            }
            if (authorityEnd < pathEnd) {
                pathStart = authorityEnd;
            } else {
                // No path in the URI means "/": point at the '/' of the validated "HTTP/1.x" so that the
                // path is still a range of bytes() without copying.
                pathStart = versionStart + 4;
                pathEnd = pathStart + 1;
            }
        }

        int[] offsets = new int[(lineCount - 1 + spareHeaders) * 4];
        int headerCount = parseHeaders(h, lineEnd + 2, length, offsets);

        if (http11 && hostCount == 0) {
            throw bad("missing Host");
        }
        if (transferEncodingCount > 0) {
            if (contentLength >= 0) {
                throw bad("Content-Length with Transfer-Encoding");
            }
            if (!http11) {
                throw bad("Transfer-Encoding in HTTP/1.0");
            }
            if (unsupportedCoding) {
                throw new HttpParseException(501, "unsupported transfer coding");
            }
        }
        if (unsupportedExpectation) {
            throw new HttpParseException(417, "unsupported expectation");
        }
        boolean keepAlive = !connectionClose && (http11 || connectionKeepAlive);
        // RFC 9110 10.1.1 and 7.8: an HTTP/1.0 request's 100-continue and Upgrade are to be ignored.
        return new RequestHead(h, length, method,
                targetStart, targetEnd - targetStart, pathStart, pathEnd - pathStart, queryStart, targetEnd - queryStart,
                http11, offsets, headerCount,
                contentLength, chunked, keepAlive, http11 && expectContinue,
                http11 && connectionUpgrade && upgradeToWebSocket);
    }

    private static String method(byte[] h, int length) {
        for (int i = 0; i < STANDARD_METHOD_BYTES.length; i++) {
            byte[] candidate = STANDARD_METHOD_BYTES[i];
            if (candidate.length == length && regionEquals(h, 0, candidate)) {
                return STANDARD_METHODS[i];
            }
        }
        return new String(h, 0, length, StandardCharsets.ISO_8859_1);
    }

    private static void validateTargetBytes(byte[] h, int start, int end) {
        for (int k = start; k < end; k++) {
            int c = h[k] & 0xFF;
            if (c < 0x21 || c > 0x7E) {
                throw bad("invalid character in request-target");
            }
            if (c == '#') {
                throw bad("fragment in request-target");
            }
            if (c == '%') {
                if (k + 2 >= end || !isHexDigit(h[k + 1]) || !isHexDigit(h[k + 2])) {
                    throw bad("invalid percent-encoding in request-target");
                }
                k += 2;
            }
        }
    }

    /** Length of a leading "http://" or "https://" (any case); any other form of target is refused. */
    private static int schemeLength(byte[] h, int start, int end) {
        if (end - start >= HTTP_SCHEME.length && regionEqualsIgnoreCase(h, start, HTTP_SCHEME)) {
            return HTTP_SCHEME.length;
        }
        if (end - start >= HTTPS_SCHEME.length && regionEqualsIgnoreCase(h, start, HTTPS_SCHEME)) {
            return HTTPS_SCHEME.length;
        }
        throw bad("invalid request-target");
    }

    /** True for HTTP/1.1, false for HTTP/1.0; 505 for another well-formed version, 400 for anything else. */
    private static boolean parseVersion(byte[] h, int start, int end) {
        if (end - start != 8 || h[start] != 'H' || h[start + 1] != 'T' || h[start + 2] != 'T' || h[start + 3] != 'P'
                || h[start + 4] != '/' || !isDigit(h[start + 5]) || h[start + 6] != '.' || !isDigit(h[start + 7])) {
            throw bad("malformed HTTP version");
        }
        if (h[start + 5] == '1') {
            if (h[start + 7] == '1') {
                return true;
            }
            if (h[start + 7] == '0') {
                return false;
            }
        }
        throw new HttpParseException(505, "HTTP version not supported");
    }

    private int parseHeaders(byte[] h, int from, int end, int[] offsets) {
        hostCount = 0;
        contentLength = -1;
        transferEncodingCount = 0;
        chunked = false;
        unsupportedCoding = false;
        expectContinue = false;
        unsupportedExpectation = false;
        connectionClose = false;
        connectionKeepAlive = false;
        connectionUpgrade = false;
        upgradeToWebSocket = false;

        int count = 0;
        int lineStart = from;
        while (lineStart < end) {
            int lineEnd = indexOf(h, CR, lineStart, end);
            if (h[lineStart] == SP || h[lineStart] == HTAB) {
                throw bad("obs-fold in header");
            }
            boolean drop = false;
            int colon = lineStart;
            for (; ; colon++) {
                byte b = h[colon];
                if (b == ':') {
                    break;
                }
                if (b == CR) {
                    throw bad("header line without colon");
                }
                if (b == SP || b == HTAB) {
                    throw bad("whitespace in header name");
                }
                if (!isTchar(b)) {
                    throw bad("invalid character in header name");
                }
                if (b >= 'A' && b <= 'Z') {
                    h[colon] = (byte) (b | 0x20);
                } else if (b == '_') {
                    // Underscores would collide with '-' once the name becomes a CGI/WSGI variable (HTTP_X_Y).
                    drop = true;
                }
            }
            if (colon == lineStart) {
                throw bad("empty header name");
            }
            int valueStart = colon + 1;
            int valueEnd = lineEnd;
            while (valueStart < valueEnd && isOws(h[valueStart])) {
                valueStart++;
            }
            while (valueEnd > valueStart && isOws(h[valueEnd - 1])) {
                valueEnd--;
            }
            for (int k = valueStart; k < valueEnd; k++) {
                int c = h[k] & 0xFF;
                if ((c < 0x20 && c != HTAB) || c == 0x7F) {
                    throw bad("invalid character in header value");
                }
            }
            int nameLength = colon - lineStart;
            // "Proxy" would become HTTP_PROXY in the app's environment (httpoxy).
            if (!drop && !(nameLength == PROXY.length && regionEquals(h, lineStart, PROXY))) {
                interpret(h, lineStart, nameLength, valueStart, valueEnd);
                int slot = count++ * 4;
                offsets[slot] = lineStart;
                offsets[slot + 1] = nameLength;
                offsets[slot + 2] = valueStart;
                offsets[slot + 3] = valueEnd - valueStart;
            }
            lineStart = lineEnd + 2;
        }
        return count;
    }

    private void interpret(byte[] h, int nameStart, int nameLength, int valueStart, int valueEnd) {
        switch (nameLength) {
            case 4 -> {
                if (regionEquals(h, nameStart, HOST) && ++hostCount > 1) {
                    throw bad("repeated Host");
                }
            }
            case 14 -> {
                if (regionEquals(h, nameStart, CONTENT_LENGTH)) {
                    contentLength(h, valueStart, valueEnd);
                }
            }
            case 17 -> {
                if (regionEquals(h, nameStart, TRANSFER_ENCODING)) {
                    transferEncoding(h, valueStart, valueEnd);
                }
            }
            case 10 -> {
                if (regionEquals(h, nameStart, CONNECTION)) {
                    connection(h, valueStart, valueEnd);
                }
            }
            case 7 -> {
                if (regionEquals(h, nameStart, UPGRADE) && hasToken(h, valueStart, valueEnd, WEBSOCKET)) {
                    upgradeToWebSocket = true;
                }
            }
            case 6 -> {
                if (regionEquals(h, nameStart, EXPECT)) {
                    if (valueEnd - valueStart == CONTINUE.length && regionEqualsIgnoreCase(h, valueStart, CONTINUE)) {
                        expectContinue = true;
                    } else {
                        unsupportedExpectation = true;
                    }
                }
            }
            default -> {
            }
        }
    }

    private void contentLength(byte[] h, int start, int end) {
        int digits = end - start;
        if (digits == 0 || digits > MAX_CONTENT_LENGTH_DIGITS) {
            throw bad("invalid Content-Length");
        }
        long value = 0;
        for (int k = start; k < end; k++) {
            byte b = h[k];
            if (!isDigit(b)) {
                throw bad("invalid Content-Length");
            }
            value = value * 10 + (b - '0');
        }
        if (contentLength >= 0 && contentLength != value) {
            throw bad("conflicting Content-Length");
        }
        contentLength = value;
    }

    private void transferEncoding(byte[] h, int start, int end) {
        if (++transferEncodingCount > 1) {
            throw bad("repeated Transfer-Encoding");
        }
        if (start == end) {
            throw bad("empty Transfer-Encoding");
        }
        if (end - start == CHUNKED.length && regionEqualsIgnoreCase(h, start, CHUNKED)) {
            chunked = true;
            return;
        }
        for (int k = start; k < end; k++) {
            if (!isTchar(h[k])) {
                // Lists and parameters: only a lone "chunked" frames a body unambiguously.
                throw bad("invalid Transfer-Encoding");
            }
        }
        unsupportedCoding = true;
    }

    private void connection(byte[] h, int start, int end) {
        if (hasToken(h, start, end, CLOSE)) {
            connectionClose = true;
        }
        if (hasToken(h, start, end, KEEP_ALIVE)) {
            connectionKeepAlive = true;
        }
        if (hasToken(h, start, end, UPGRADE)) {
            connectionUpgrade = true;
        }
    }

    /** Whether the comma-separated list in h[start, end) has an element equal to token, ignoring case and OWS. */
    private static boolean hasToken(byte[] h, int start, int end, byte[] token) {
        int element = start;
        while (element <= end) {
            int comma = indexOf(h, (byte) ',', element, end);
            int elementEnd = comma < 0 ? end : comma;
            int s = element;
            int e = elementEnd;
            while (s < e && isOws(h[s])) {
                s++;
            }
            while (e > s && isOws(h[e - 1])) {
                e--;
            }
            if (e - s == token.length && regionEqualsIgnoreCase(h, s, token)) {
                return true;
            }
            element = elementEnd + 1;
        }
        return false;
    }

    private static int indexOf(byte[] h, byte b, int from, int to) {
        for (int k = from; k < to; k++) {
            if (h[k] == b) {
                return k;
            }
        }
        return -1;
    }

    private static boolean regionEquals(byte[] h, int start, byte[] expected) {
        for (int k = 0; k < expected.length; k++) {
            if (h[start + k] != expected[k]) {
                return false;
            }
        }
        return true;
    }

    /** Compares with an expected value that is lower-case ASCII. */
    private static boolean regionEqualsIgnoreCase(byte[] h, int start, byte[] lowerCase) {
        for (int k = 0; k < lowerCase.length; k++) {
            byte b = h[start + k];
            if (b >= 'A' && b <= 'Z') {
                b = (byte) (b | 0x20);
            }
            if (b != lowerCase[k]) {
                return false;
            }
        }
        return true;
    }

    static boolean isTchar(byte b) {
        return HttpChars.isTokenChar(b);
    }

    static boolean isOws(byte b) {
        return b == SP || b == HTAB;
    }

    private static boolean isDigit(byte b) {
        return b >= '0' && b <= '9';
    }

    private static boolean isHexDigit(byte b) {
        return isDigit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F');
    }

    private static HttpParseException bad(String reason) {
        return new HttpParseException(400, reason);
    }

    private static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.US_ASCII);
    }

    /**
     * Finds the end of the head without copying, refusing bare CR and LF as soon as they arrive (a client that
     * ends lines with LF alone would otherwise only be noticed at the size limit). Offsets are relative to the
     * buffer's readerIndex.
     */
    private final class HeadScanner implements ByteProcessor {

        /** Bytes already looked at; lets a later call resume where an incomplete scan stopped. */
        private int position;
        private boolean afterCr;
        private int leadingEmptyLines;
        /** Offset of the request line, -1 while still skipping leading empty lines. */
        private int headStart = -1;
        private int lineStart;
        /** Non-empty lines so far, the request line included. */
        private int lineCount;
        /** Offset just past the terminating empty line, -1 until found. */
        private int headEnd = -1;

        boolean scan(ByteBuf buf) {
            int readable = buf.readableBytes();
            if (readable < position) {
                reset(); // not the stream we scanned before
            }
            if (readable > position) {
                buf.forEachByte(buf.readerIndex() + position, readable - position, this);
            }
            return headEnd >= 0;
        }

        void reset() {
            position = 0;
            afterCr = false;
            leadingEmptyLines = 0;
            headStart = -1;
            lineStart = 0;
            lineCount = 0;
            headEnd = -1;
        }

        @Override
        public boolean process(byte b) {
            int i = position++;
            if (headStart >= 0 && i - headStart >= maxHeadSize) {
                throw new HttpParseException(431, "request head too large");
            }
            if (afterCr) {
                if (b != LF) {
                    throw bad("bare CR");
                }
                afterCr = false;
                if (headStart < 0) {
                    if (++leadingEmptyLines > MAX_LEADING_EMPTY_LINES) {
                        throw bad("too many empty lines before the request line");
                    }
                } else if (i - 1 == lineStart) {
                    headEnd = i + 1;
                    return false;
                } else {
                    if (++lineCount > MAX_HEADER_LINES + 1) {
                        throw new HttpParseException(431, "too many header fields");
                    }
                    lineStart = i + 1;
                }
                return true;
            }
            if (b == CR) {
                afterCr = true;
            } else if (b == LF) {
                throw bad("bare LF");
            } else if (headStart < 0) {
                headStart = i;
                lineStart = i;
            }
            return true;
        }
    }
}
