package dev.peregrine.edge;

import java.util.Arrays;
import java.util.Set;

/**
 * Proactive negotiation of a content coding from a request's Accept-Encoding (RFC 9110 §12.5.3).
 *
 * <p>The rules, as this server reads them:
 * <ul>
 *   <li>no Accept-Encoding at all means identity: the RFC would allow any coding, but clients that
 *       send none (curl without --compressed, scripts) expect the body as is;</li>
 *   <li>each coding's weight is its own q, else that of {@code *}, else it is not acceptable; q=0
 *       excludes; tokens compare case-insensitively and {@code x-gzip} is gzip (§12.5.3);</li>
 *   <li>among acceptable offered codings the highest q wins, ties go to the server's order
 *       ({@link ContentCoding}: br, zstd, gzip);</li>
 *   <li>identity wins only when the client lists it (or {@code *} stands for it) with a strictly higher
 *       q than the best coding;</li>
 *   <li>when the client refuses identity ({@code identity;q=0}, or {@code *;q=0} without identity) and
 *       no offered coding is acceptable, the answer is still identity: the RFC lets a server disregard
 *       the header rather than send 406, and an uncompressed body is more useful than an error;</li>
 *   <li>a malformed element (bad q, empty coding) is ignored, the rest of the header still counts.</li>
 * </ul>
 */
public final class AcceptEncoding {
    private static final int UNLISTED = -1;
    private static final ContentCoding[] CODINGS = ContentCoding.values();

    private AcceptEncoding() {
    }

    /**
     * The coding to send, or null for identity. {@code value} is the field value (several fields joined
     * with commas), or null when the request has none.
     */
    public static ContentCoding choose(String value, Set<ContentCoding> offered) {
        if (value == null || offered.isEmpty()) return null;
        // weights in thousandths, as q has at most three decimals
        int[] weights = new int[CODINGS.length];
        Arrays.fill(weights, UNLISTED);
        int identity = UNLISTED, star = UNLISTED;
        int length = value.length(), start = 0;
        while (start <= length) {
            int end = value.indexOf(',', start);
            if (end < 0) end = length;
            int semicolon = value.indexOf(';', start);
            int tokenEnd = semicolon >= 0 && semicolon < end ? semicolon : end;
            String token = value.substring(start, tokenEnd).trim();
            int weight = tokenEnd == end ? 1000 : weight(value, tokenEnd + 1, end);
            start = end + 1;
            if (token.isEmpty() || weight < 0) continue;
            if (token.equals("*")) star = weight;
            else if (token.equalsIgnoreCase("identity")) identity = weight;
            else if (token.equalsIgnoreCase("x-gzip")) weights[ContentCoding.GZIP.ordinal()] = weight;
            else {
                for (ContentCoding coding : CODINGS) {
                    if (token.equalsIgnoreCase(coding.token())) weights[coding.ordinal()] = weight;
                }
            }
        }
        ContentCoding best = null;
        int bestWeight = 0;
        for (ContentCoding coding : CODINGS) {
            if (!offered.contains(coding)) continue;
            int weight = weights[coding.ordinal()] == UNLISTED ? star : weights[coding.ordinal()];
            if (weight > bestWeight) {
                best = coding;
                bestWeight = weight;
            }
        }
        int identityWeight = identity == UNLISTED ? star : identity;
        return best != null && identityWeight > bestWeight ? null : best;
    }

    /**
     * The q of the parameters between {@code from} and {@code to} (";q=0.5", other parameters
     * ignored), in thousandths; 1000 without a q; -1 when the q is malformed.
     */
    private static int weight(String value, int from, int to) {
        int weight = 1000;
        while (from < to) {
            int end = value.indexOf(';', from);
            if (end < 0 || end > to) end = to;
            String parameter = value.substring(from, end).trim();
            from = end + 1;
            int equals = parameter.indexOf('=');
            if (equals < 0) continue;
            if (!parameter.substring(0, equals).trim().equalsIgnoreCase("q")) continue;
            weight = qvalue(parameter.substring(equals + 1).trim());
            if (weight < 0) return -1;
        }
        return weight;
    }

    /** RFC 9110 §12.4.2: {@code 0[.ddd]} or {@code 1[.000]}, in thousandths, or -1. */
    private static int qvalue(String q) {
        int n = q.length();
        if (n == 0 || n > 5 || (q.charAt(0) != '0' && q.charAt(0) != '1')) return -1;
        if (n > 1 && q.charAt(1) != '.') return -1;
        int thousandths = 0;
        for (int i = 2; i < 5; i++) {
            int digit = 0;
            if (i < n) {
                char c = q.charAt(i);
                if (c < '0' || c > '9') return -1;
                digit = c - '0';
            }
            thousandths = thousandths * 10 + digit;
        }
        if (q.charAt(0) == '1') return thousandths == 0 ? 1000 : -1;
        return thousandths;
    }
}
