package dev.peregrine.http;


import java.nio.charset.StandardCharsets;

/**
 * The request headers the connection adds before the application sees the request: X-Request-ID
 * ({@code --request-id}) and X-Request-Start ({@code --request-start-header}). They are written into the
 * request head itself, so both adapters, the access log and the response see them with no extra path.
 */
public final class AddedHeaders {
    private AddedHeaders() {}

    static final byte[] REQUEST_START = "x-request-start".getBytes(StandardCharsets.US_ASCII);
    /** "t=" and the microseconds since the epoch: 16 digits until the year 2286. */
    private static final int REQUEST_START_VALUE = 2 + 19;

    /** Room each head keeps for these headers, so that adding them copies nothing. */
    public static int spareBytes(HttpSettings settings) {
        return (settings.requestId() ? RequestId.HEADER.length + RequestId.GENERATED_LENGTH : 0)
                + (settings.requestStartHeader() ? REQUEST_START.length + REQUEST_START_VALUE : 0);
    }

    public static int spareHeaders(HttpSettings settings) {
        return (settings.requestId() ? 1 : 0) + (settings.requestStartHeader() ? 1 : 0);
    }

    /**
     * Keeps the client's X-Request-ID when there is exactly one and it is valid; otherwise drops what the
     * client sent and adds a new one. Returns the index of the header holding the request's ID.
     */
    public static int requestId(RequestHead head) {
        int found = -1, count = 0;
        for (int i = 0; i < head.headerCount(); i++) {
            if (head.nameIs(i, RequestId.HEADER)) {
                if (found < 0) found = i;
                count++;
            }
        }
        if (count == 1 && RequestId.valid(head.bytes(), head.valueStart(found), head.valueLength(found))) return found;
        for (int i = head.headerCount() - 1; i >= 0 && count > 0; i--) {
            if (head.nameIs(i, RequestId.HEADER)) {
                head.removeHeader(i);
                count--;
            }
        }
        int at = head.appendHeader(RequestId.HEADER, RequestId.GENERATED_LENGTH);
        RequestId.generate(head.bytes(), at);
        return head.headerCount() - 1;
    }

    /**
     * Adds {@code x-request-start: t=MICROSECONDS} (the form New Relic's agents document, which Datadog's
     * read too). A trusted proxy's own X-Request-Start is kept ({@code fromTrustedProxy}): it was taken
     * earlier, so it counts the time spent in the proxy as well. Anyone else's is replaced, since a client
     * could otherwise make its request look queued for hours.
     */
    public static void requestStart(RequestHead head, long epochMicros, boolean fromTrustedProxy) {
        for (int i = head.headerCount() - 1; i >= 0; i--) {
            if (head.nameIs(i, REQUEST_START)) {
                if (fromTrustedProxy) return;
                head.removeHeader(i);
            }
        }
        int digits = 1;
        for (long rest = epochMicros / 10; rest > 0; rest /= 10) digits++;
        int at = head.appendHeader(REQUEST_START, 2 + digits);
        byte[] bytes = head.bytes();
        bytes[at] = 't';
        bytes[at + 1] = '=';
        long rest = epochMicros;
        for (int i = at + 1 + digits; i > at + 1; i--) {
            bytes[i] = (byte) ('0' + rest % 10);
            rest /= 10;
        }
    }
}
