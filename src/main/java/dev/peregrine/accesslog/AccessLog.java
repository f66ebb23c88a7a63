package dev.peregrine.accesslog;

import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.RequestLog;
import io.netty.util.NetUtil;
import org.jboss.logging.Logger;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;

/**
 * One line per finished request, as text or as one JSON object per line. The lines go to the
 * {@code peregrine.access} logger, whose handler (application.properties) writes them to standard output
 * with nothing added, so that a log shipper can read every stdout line as JSON; the server's own messages
 * go to standard error.
 *
 * <p>Text: {@code TIME CLIENT - "METHOD PATH HTTP/V" STATUS BYTES DURATIONms "USER-AGENT"}, then
 * {@code request_id=}, {@code trace_id=} and {@code parent_id=} when those options are on ({@code -} when
 * absent). JSON: the same fields under the names in {@link #json}. TIME is when the response finished,
 * in UTC with milliseconds. Request bytes are logged as they came; in text, a quote, a backslash and any
 * byte outside printable ASCII are escaped (backslash-quote, two backslashes, backslash-x and two hex
 * digits), and in JSON as JSON escapes, a byte of 0x7f or above becoming the code point of the same value
 * (backslash-u-00HH): every line is ASCII, and the original bytes can be recovered.
 *
 * <p>Written by hand rather than with a JSON library: a dozen fields of known types, built on the I/O
 * thread for every request, cost less as one StringBuilder than through a generator.
 */
public final class AccessLog implements RequestLog {
    private static final Logger LOG = Logger.getLogger("peregrine.access");
    private static final DateTimeFormatter SECOND = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss");
    private static final char[] HEX = "0123456789abcdef".toCharArray();
    /** The formatted current second, per I/O thread: formatting a date costs more than the rest of the line. */
    private static final ThreadLocal<Second> CURRENT_SECOND = ThreadLocal.withInitial(Second::new);

    private final boolean json;
    private final boolean requestId;
    private final boolean traceContext;

    public AccessLog(boolean json, boolean requestId, boolean traceContext) {
        this.json = json;
        this.requestId = requestId;
        this.traceContext = traceContext;
    }

    /** Also for a request that is no exchange: a WebSocket handshake, logged when it is answered (101, or refused). */
    @Override
    public void log(HttpRequestHead head, String httpVersion, InetSocketAddress client, int status, long bytes, long startNanos) {
        if (!LOG.isInfoEnabled()) return;
        long elapsedNanos = System.nanoTime() - startNanos;
        LOG.info(format(head, httpVersion, client, status, bytes, elapsedNanos, System.currentTimeMillis()));
    }

    String format(HttpExchange exchange, int status, long bytes, long elapsedNanos, long epochMillis) {
        return format(exchange.head(), exchange.httpVersion(), exchange.remoteAddress(), status, bytes, elapsedNanos, epochMillis);
    }

    /** The line for one request; {@code epochMillis} is when it finished. */
    String format(HttpRequestHead head, String httpVersion, InetSocketAddress client, int status, long bytes, long elapsedNanos,
                  long epochMillis) {
        byte[] data = head.bytes();
        int userAgent = -1, id = -1, trace = -1, traces = 0;
        for (int i = 0; i < head.headerCount(); i++) {
            int length = head.nameLength(i);
            if (length == 10 && is(data, head.nameStart(i), "user-agent")) {
                if (userAgent < 0) userAgent = i;
            } else if (requestId && length == 12 && is(data, head.nameStart(i), "x-request-id")) {
                if (id < 0) id = i;
            } else if (traceContext && length == 11 && is(data, head.nameStart(i), "traceparent")) {
                trace = i;
                traces++;
            }
        }
        // Two traceparent headers leave the trace ambiguous: the specification asks to treat that as none.
        if (traces != 1 || !TraceParent.valid(data, head.valueStart(trace), head.valueLength(trace))) trace = -1;
        StringBuilder line = new StringBuilder(256);
        return json
                ? json(line, httpVersion, head, data, client, status, bytes, elapsedNanos, epochMillis, userAgent, id, trace)
                : text(line, httpVersion, head, data, client, status, bytes, elapsedNanos, epochMillis, userAgent, id, trace);
    }

    private String text(StringBuilder line, String httpVersion, HttpRequestHead head, byte[] data, InetSocketAddress client,
                        int status, long bytes, long elapsedNanos, long epochMillis, int userAgent, int id, int trace) {
        time(line, epochMillis).append(' ');
        if (client == null) {
            line.append("unix");
        } else {
            String host = NetUtil.toAddressString(client.getAddress());
            if (host.indexOf(':') >= 0) line.append('[').append(host).append(']');
            else line.append(host);
            line.append(':').append(client.getPort());
        }
        line.append(" - \"").append(head.method()).append(' ');
        textBytes(line, data, head.pathStart(), head.pathLength());
        if (head.queryLength() > 0) textBytes(line.append('?'), data, head.queryStart(), head.queryLength());
        line.append(" HTTP/").append(httpVersion).append("\" ").append(status).append(' ').append(bytes).append(' ');
        millis(line, elapsedNanos).append("ms \"");
        if (userAgent >= 0) textBytes(line, data, head.valueStart(userAgent), head.valueLength(userAgent));
        else line.append('-');
        line.append('"');
        if (requestId) {
            line.append(" request_id=");
            if (id >= 0) textBytes(line, data, head.valueStart(id), head.valueLength(id));
            else line.append('-');
        }
        if (traceContext) {
            line.append(" trace_id=");
            if (trace >= 0) line.append(new String(data, head.valueStart(trace) + TraceParent.TRACE_ID_OFFSET, TraceParent.TRACE_ID_LENGTH, StandardCharsets.US_ASCII));
            else line.append('-');
            line.append(" parent_id=");
            if (trace >= 0) line.append(new String(data, head.valueStart(trace) + TraceParent.PARENT_ID_OFFSET, TraceParent.PARENT_ID_LENGTH, StandardCharsets.US_ASCII));
            else line.append('-');
        }
        return line.toString();
    }

    /**
     * {@code {"time", "client", "client_port", "method", "path", "protocol", "status", "bytes", "duration_ms",
     * "user_agent"}}, then {@code "request_id"} with --request-id and {@code "trace_id"}, {@code "parent_id"}
     * with --trace-context. A value that is absent is null (client and client_port on a unix socket).
     */
    private String json(StringBuilder line, String httpVersion, HttpRequestHead head, byte[] data, InetSocketAddress client,
                        int status, long bytes, long elapsedNanos, long epochMillis, int userAgent, int id, int trace) {
        time(line.append("{\"time\":\""), epochMillis).append("\",\"client\":");
        if (client == null) line.append("null,\"client_port\":null");
        else line.append('"').append(NetUtil.toAddressString(client.getAddress())).append("\",\"client_port\":").append(client.getPort());
        line.append(",\"method\":\"");
        jsonBytes(line, head.method().getBytes(StandardCharsets.ISO_8859_1), 0, head.method().length());
        line.append("\",\"path\":\"");
        jsonBytes(line, data, head.pathStart(), head.pathLength());
        if (head.queryLength() > 0) jsonBytes(line.append('?'), data, head.queryStart(), head.queryLength());
        line.append("\",\"protocol\":\"HTTP/").append(httpVersion).append("\",\"status\":").append(status)
                .append(",\"bytes\":").append(bytes).append(",\"duration_ms\":");
        millis(line, elapsedNanos).append(",\"user_agent\":");
        jsonValue(line, data, userAgent < 0 ? -1 : head.valueStart(userAgent), userAgent < 0 ? 0 : head.valueLength(userAgent));
        if (requestId) {
            line.append(",\"request_id\":");
            jsonValue(line, data, id < 0 ? -1 : head.valueStart(id), id < 0 ? 0 : head.valueLength(id));
        }
        if (traceContext) {
            line.append(",\"trace_id\":");
            jsonValue(line, data, trace < 0 ? -1 : head.valueStart(trace) + TraceParent.TRACE_ID_OFFSET, TraceParent.TRACE_ID_LENGTH);
            line.append(",\"parent_id\":");
            jsonValue(line, data, trace < 0 ? -1 : head.valueStart(trace) + TraceParent.PARENT_ID_OFFSET, TraceParent.PARENT_ID_LENGTH);
        }
        return line.append('}').toString();
    }

    private static boolean is(byte[] data, int start, String lowerCaseName) {
        for (int k = 0; k < lowerCaseName.length(); k++) {
            if (data[start + k] != lowerCaseName.charAt(k)) return false;
        }
        return true;
    }

    /** {@code 2025-06-01T12:00:00.123Z} */
    private static StringBuilder time(StringBuilder line, long epochMillis) {
        long second = Math.floorDiv(epochMillis, 1000);
        int millis = (int) Math.floorMod(epochMillis, 1000);
        Second cached = CURRENT_SECOND.get();
        if (cached.second != second || cached.text == null) {
            cached.second = second;
            cached.text = SECOND.format(LocalDateTime.ofEpochSecond(second, 0, ZoneOffset.UTC));
        }
        line.append(cached.text).append('.');
        if (millis < 100) line.append('0');
        if (millis < 10) line.append('0');
        return line.append(millis).append('Z');
    }

    /** Milliseconds with three decimals, without String.format's cost. */
    private static StringBuilder millis(StringBuilder line, long nanos) {
        long micros = Math.max(0, (nanos + 500) / 1000);
        long fraction = micros % 1000;
        line.append(micros / 1000).append('.');
        if (fraction < 100) line.append('0');
        if (fraction < 10) line.append('0');
        return line.append(fraction);
    }

    private static void textBytes(StringBuilder line, byte[] data, int start, int length) {
        for (int i = start; i < start + length; i++) {
            int b = data[i] & 0xff;
            if (b == '"' || b == '\\') line.append('\\').append((char) b);
            else if (b >= 0x20 && b < 0x7f) line.append((char) b);
            else line.append("\\x").append(HEX[b >> 4]).append(HEX[b & 0xf]);
        }
    }

    /** A JSON string of the bytes, or null when {@code start} is negative. */
    private static void jsonValue(StringBuilder line, byte[] data, int start, int length) {
        if (start < 0) {
            line.append("null");
            return;
        }
        jsonBytes(line.append('"'), data, start, length);
        line.append('"');
    }

    private static void jsonBytes(StringBuilder line, byte[] data, int start, int length) {
        for (int i = start; i < start + length; i++) {
            int b = data[i] & 0xff;
            if (b == '"' || b == '\\') line.append('\\').append((char) b);
            else if (b >= 0x20 && b < 0x7f) line.append((char) b);
            else line.append("\\u00").append(HEX[b >> 4]).append(HEX[b & 0xf]);
        }
    }

    private static final class Second {
        long second;
        String text;
    }
}
