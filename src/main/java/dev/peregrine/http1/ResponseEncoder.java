package dev.peregrine.http1;

import dev.peregrine.http.HttpChars;
import dev.peregrine.http.HttpDate;
import dev.peregrine.http.Refusal;
import dev.peregrine.http.RequestHead;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.http.StatusReasons;
import dev.peregrine.http.TlsResponseHeaders;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;

import java.nio.charset.StandardCharsets;

/**
 * Writes HTTP/1.1 responses: the status line and headers the application chose, plus the framing
 * headers the server owns, and the body framed as Content-Length, chunked, or until close.
 */
final class ResponseEncoder {
    private ResponseEncoder() {}

    private static final byte[] CRLF = {'\r', '\n'};
    private static final byte[] COLON_SPACE = {':', ' '};
    private static final byte[] LAST_CHUNK = "0\r\n\r\n".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] CONTENT_LENGTH = "content-length: ".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] CHUNKED = "transfer-encoding: chunked\r\n".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] CLOSE = "connection: close\r\n".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] KEEP_ALIVE = "connection: keep-alive\r\n".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] SERVER = "server: peregrine\r\n".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] REQUEST_ID = "x-request-id: ".getBytes(StandardCharsets.US_ASCII);
    private static final ByteBuf CONTINUE = Unpooled.unreleasableBuffer(
            Unpooled.directBuffer(25).writeBytes("HTTP/1.1 100 Continue\r\n\r\n".getBytes(StandardCharsets.US_ASCII))).asReadOnly();

    /** "HTTP/1.1 200 OK\r\n" for every status, built once. */
    private static final byte[][] STATUS_LINES = new byte[1000][];
    static {
        for (int status = 100; status < 1000; status++) {
            STATUS_LINES[status] = ("HTTP/1.1 " + status + " " + StatusReasons.reason(status) + "\r\n").getBytes(StandardCharsets.US_ASCII);
        }
    }

    /** "HTTP/1.1 200 ": what a status line has before its reason phrase. */
    private static final int STATUS_PREFIX_LENGTH = "HTTP/1.1 200 ".length();

    private static final ThreadLocal<byte[][]> DATE_LINE = ThreadLocal.withInitial(() -> new byte[2][]);

    /** The Date header line, rebuilt when {@link HttpDate} changes. */
    private static byte[] dateLine() {
        byte[] date = HttpDate.now();
        byte[][] line = DATE_LINE.get();
        if (line[0] != date) {
            line[0] = date;
            line[1] = ("date: " + new String(date, StandardCharsets.US_ASCII) + "\r\n").getBytes(StandardCharsets.US_ASCII);
        }
        return line[1];
    }

    static ByteBuf continueResponse() {
        return CONTINUE.duplicate();
    }

    /** How a response body is delimited on the wire. */
    enum Framing {
        /** No body may be sent (HEAD, 1xx, 204, 304): anything the application gives is dropped. */
        NONE {
            @Override ByteBuf frame(ByteBufAllocator alloc, ByteBuf body, Http1Exchange exchange) {
                body.release();
                return null;
            }
        },
        /** Content-Length, declared by the application or computed: never more bytes than it says. */
        LENGTH {
            @Override ByteBuf frame(ByteBufAllocator alloc, ByteBuf body, Http1Exchange exchange) {
                long left = exchange.lengthLeft;
                if (body.readableBytes() > left) body.writerIndex(body.readerIndex() + (int) left);
                exchange.lengthLeft = left - body.readableBytes();
                if (!body.isReadable()) {
                    body.release();
                    return null;
                }
                return body;
            }

            @Override boolean incomplete(Http1Exchange exchange) {
                return exchange.lengthLeft > 0;
            }
        },
        CHUNKED {
            @Override ByteBuf frame(ByteBufAllocator alloc, ByteBuf body, Http1Exchange exchange) {
                int n = body.readableBytes();
                if (n == 0) {
                    body.release();
                    return null;
                }
                ByteBuf size = alloc.directBuffer(12);
                size.writeCharSequence(Integer.toHexString(n), StandardCharsets.US_ASCII);
                size.writeBytes(CRLF);
                ByteBuf end = Unpooled.wrappedBuffer(CRLF);
                return alloc.compositeDirectBuffer(3).addComponents(true, size, body, end);
            }

            @Override ByteBuf end(ByteBufAllocator alloc, Http1Exchange exchange) {
                return Unpooled.wrappedBuffer(LAST_CHUNK);
            }
        },
        /** An HTTP/1.0 client and no length known: the end of the body is the end of the connection. */
        UNTIL_CLOSE {
            @Override ByteBuf frame(ByteBufAllocator alloc, ByteBuf body, Http1Exchange exchange) {
                return body;
            }
        };

        abstract ByteBuf frame(ByteBufAllocator alloc, ByteBuf body, Http1Exchange exchange);

        ByteBuf end(ByteBufAllocator alloc, Http1Exchange exchange) {
            return null;
        }

        boolean incomplete(Http1Exchange exchange) {
            return false;
        }
    }

    /**
     * Chooses the framing. {@code completeSize} is the whole body's size when the first send is also
     * the last, else -1.
     */
    static Framing framing(RequestHead request, ResponseHead response, long completeSize) {
        int status = response.status();
        if (request.method() == "HEAD" || status < 200 || status == 204 || status == 304) return Framing.NONE;
        if (response.contentLength() >= 0 || completeSize >= 0) return Framing.LENGTH;
        return request.http11() ? Framing.CHUNKED : Framing.UNTIL_CLOSE;
    }

    /** {@code requestIdHeader}: the request header whose value goes out as X-Request-ID, or -1. */
    static ByteBuf head(ByteBufAllocator alloc, RequestHead request, ResponseHead response, Framing framing,
                        boolean keepAlive, long completeSize, int requestIdHeader, TlsResponseHeaders tlsHeaders) {
        byte[] data = response.data();
        ByteBuf out = alloc.directBuffer(256 + data.length);
        byte[] reason = response.reason();
        if (reason == null) {
            out.writeBytes(STATUS_LINES[response.status()]);
        } else {
            out.writeBytes(STATUS_LINES[response.status()], 0, STATUS_PREFIX_LENGTH);
            out.writeBytes(reason);
            out.writeBytes(CRLF);
        }
        for (int i = 0; i < response.count(); i++) {
            out.writeBytes(data, response.nameStart(i), response.nameLength(i));
            out.writeBytes(COLON_SPACE);
            out.writeBytes(data, response.valueStart(i), response.valueLength(i));
            out.writeBytes(CRLF);
        }
        if (requestIdHeader >= 0 && !response.has("x-request-id")) {
            out.writeBytes(REQUEST_ID);
            out.writeBytes(request.bytes(), request.valueStart(requestIdHeader), request.valueLength(requestIdHeader));
            out.writeBytes(CRLF);
        }
        if (!response.hasServer()) out.writeBytes(SERVER);
        if (!response.hasDate()) out.writeBytes(dateLine());
        if (tlsHeaders != null) tlsHeaders.writeLines(out, response);
        if (framing == Framing.LENGTH && response.contentLength() < 0) {
            out.writeBytes(CONTENT_LENGTH);
            out.writeCharSequence(Long.toString(completeSize), StandardCharsets.US_ASCII);
            out.writeBytes(CRLF);
        } else if (framing == Framing.CHUNKED) {
            out.writeBytes(CHUNKED);
        }
        if (!keepAlive) {
            out.writeBytes(CLOSE);
        } else if (!request.http11()) {
            out.writeBytes(KEEP_ALIVE);
        }
        out.writeBytes(CRLF);
        return out;
    }

    /** The body length LENGTH framing lets through: the declared Content-Length, else the complete body's size. */
    static long declaredLength(ResponseHead response, long completeSize) {
        return response.contentLength() >= 0 ? response.contentLength() : completeSize;
    }

    /** A short plain-text response the server gives by itself (400, 408, 413, 431, 500, 501, ...), closing the connection. */
    static ByteBuf refusal(ByteBufAllocator alloc, Refusal refusal) {
        byte[] bytes = refusal.body();
        ByteBuf out = alloc.directBuffer(160 + bytes.length);
        out.writeBytes(STATUS_LINES[refusal.status()]);
        out.writeBytes(SERVER);
        out.writeBytes(dateLine());
        // The refusal's own head: its content type and length, and what its maker added (a 429's Retry-After).
        ResponseHead head = refusal.head();
        byte[] data = head.data();
        for (int i = 0; i < head.count(); i++) {
            out.writeBytes(data, head.nameStart(i), head.nameLength(i)).writeByte(':').writeByte(' ');
            out.writeBytes(data, head.valueStart(i), head.valueLength(i)).writeBytes(CRLF);
        }
        out.writeBytes(CLOSE);
        out.writeBytes(CRLF);
        out.writeBytes(bytes);
        return out;
    }
}
