package dev.peregrine.http;

import dev.peregrine.config.TrustedProxies;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Who the client is and which scheme it used, as a trusted proxy reports them. Called only for
 * connections from a trusted peer ({@link TrustedProxies#trustsPeerOf}).
 *
 * <p>The request either carries {@code X-Forwarded-For} / {@code X-Forwarded-Proto}, and only those
 * are read, or else RFC 7239 {@code Forwarded}. Each proxy appends one hop to the chain, so the hops
 * are read from the right: the client is the rightmost hop that is not itself a trusted proxy (the
 * leftmost one when every hop is trusted, or when every peer is, as uvicorn does). Anything left of
 * that hop was written by a party nobody vouches for. The scheme is the one the same hop reported:
 * {@code proto=} of the chosen {@code Forwarded} element, or the {@code X-Forwarded-Proto} entry at
 * the same distance from the right as the chosen {@code X-Forwarded-For} entry (its first entry when
 * it is shorter, which covers proxies that overwrite it rather than append).
 *
 * <p>A value that is not an IP literal (a name, {@code unknown}, an obfuscated node, garbage) is
 * never resolved: the address is left as the connection's own, and so is the scheme when its value
 * is not http, https, ws or wss. A {@code Forwarded} header that breaks the RFC 7239 syntax is
 * ignored as a whole.
 */
public final class ForwardedHeaders {
    private ForwardedHeaders() {}

    /** What the headers establish; a null field leaves the connection's own value. */
    public record Origin(InetSocketAddress client, String scheme) {}

    private record Hop(InetSocketAddress address, String proto) {}

    /** Null when the request carries no forwarding header (the usual case for a direct client). */
    public static Origin resolve(HttpRequestHead head, TrustedProxies trusted) {
        byte[] bytes = head.bytes();
        StringBuilder forwardedFor = null, forwardedProto = null, forwarded = null;
        for (int i = 0; i < head.headerCount(); i++) {
            int nameStart = head.nameStart(i), nameLength = head.nameLength(i);
            if (nameLength == 15 && HttpChars.equalsLowerCase(bytes, nameStart, nameLength, "x-forwarded-for")) {
                forwardedFor = append(forwardedFor, bytes, head, i);
            } else if (nameLength == 17 && HttpChars.equalsLowerCase(bytes, nameStart, nameLength, "x-forwarded-proto")) {
                forwardedProto = append(forwardedProto, bytes, head, i);
            } else if (nameLength == 9 && HttpChars.equalsLowerCase(bytes, nameStart, nameLength, "forwarded")) {
                forwarded = append(forwarded, bytes, head, i);
            }
        }
        if (forwardedFor != null || forwardedProto != null) {
            return fromXForwarded(forwardedFor, forwardedProto, trusted);
        }
        if (forwarded != null) {
            List<Hop> hops = parseForwarded(forwarded.toString());
            if (hops == null || hops.isEmpty()) return null;
            Hop hop = hops.get(chosen(hops, trusted));
            return new Origin(hop.address(), scheme(hop.proto()));
        }
        return null;
    }

    private static Origin fromXForwarded(StringBuilder forwardedFor, StringBuilder forwardedProto, TrustedProxies trusted) {
        InetSocketAddress client = null;
        int distanceFromRight = 0;
        if (forwardedFor != null) {
            String[] entries = forwardedFor.toString().split(",", -1);
            List<Hop> hops = new ArrayList<>(entries.length);
            for (String entry : entries) hops.add(new Hop(node(strip(entry)), null));
            int chosen = chosen(hops, trusted);
            client = hops.get(chosen).address();
            distanceFromRight = hops.size() - 1 - chosen;
        }
        String scheme = null;
        if (forwardedProto != null) {
            String[] protos = forwardedProto.toString().split(",", -1);
            int index = Math.max(0, protos.length - 1 - distanceFromRight);
            scheme = scheme(strip(protos[index]));
        }
        return client == null && scheme == null ? null : new Origin(client, scheme);
    }

    /** Index of the hop that is the client: the rightmost untrusted one. */
    private static int chosen(List<Hop> hops, TrustedProxies trusted) {
        if (trusted.trustsEveryone()) return 0;
        for (int i = hops.size() - 1; i >= 0; i--) {
            InetSocketAddress address = hops.get(i).address();
            if (address == null || !trusted.trusts(address.getAddress())) return i;
        }
        return 0;
    }

    private static StringBuilder append(StringBuilder joined, byte[] bytes, HttpRequestHead head, int i) {
        if (joined == null) joined = new StringBuilder();
        else joined.append(',');
        return joined.append(new String(bytes, head.valueStart(i), head.valueLength(i), StandardCharsets.ISO_8859_1));
    }

    private static String strip(String s) {
        int a = 0, b = s.length();
        while (a < b && (s.charAt(a) == ' ' || s.charAt(a) == '\t')) a++;
        while (b > a && (s.charAt(b - 1) == ' ' || s.charAt(b - 1) == '\t')) b--;
        return s.substring(a, b);
    }

    /** The scheme the application should see, or null for anything but http, https, ws and wss. */
    static String scheme(String proto) {
        if (proto == null) return null;
        if (proto.equalsIgnoreCase("https") || proto.equalsIgnoreCase("wss")) return "https";
        if (proto.equalsIgnoreCase("http") || proto.equalsIgnoreCase("ws")) return "http";
        return null;
    }

    /**
     * An address with an optional port: {@code 192.0.2.1}, {@code 192.0.2.1:8080}, {@code 2001:db8::1},
     * {@code [2001:db8::1]}, {@code [2001:db8::1]:8080}. Null for anything else; the port is 0 when absent
     * or obfuscated ({@code _abc}, RFC 7239).
     */
    static InetSocketAddress node(String text) {
        String host;
        int port = 0;
        if (text.startsWith("[")) {
            int end = text.indexOf(']');
            if (end < 0) return null;
            host = text.substring(1, end);
            String rest = text.substring(end + 1);
            if (!rest.isEmpty()) {
                if (rest.charAt(0) != ':') return null;
                port = port(rest.substring(1));
            }
            if (host.indexOf(':') < 0) return null; // brackets are for IPv6 only
        } else if (text.indexOf(':') >= 0 && text.indexOf(':') == text.lastIndexOf(':')) {
            int colon = text.indexOf(':');
            host = text.substring(0, colon);
            port = port(text.substring(colon + 1));
        } else {
            host = text;
        }
        if (port < 0) return null;
        byte[] address = TrustedProxies.IpLiterals.parse(host);
        if (address == null) return null;
        try {
            // getByAddress never consults a resolver: it only wraps the bytes.
            return new InetSocketAddress(InetAddress.getByAddress(address), port);
        } catch (UnknownHostException impossible) {
            return null;
        }
    }

    private static int port(String text) {
        if (text.startsWith("_") && text.length() > 1) return 0;
        if (text.isEmpty() || text.length() > 5) return -1;
        for (int i = 0; i < text.length(); i++) {
            if (text.charAt(i) < '0' || text.charAt(i) > '9') return -1;
        }
        int port = Integer.parseInt(text);
        return port <= 65535 ? port : -1;
    }

    /**
     * The hops of RFC 7239 {@code Forwarded} (elements separated by commas, parameters by semicolons,
     * values tokens or quoted strings), or null when the header breaks that syntax. Unquoted values may
     * also hold ':', '[' and ']', which the RFC asks senders to quote but some do not.
     */
    static List<Hop> parseForwarded(String value) {
        List<Hop> hops = new ArrayList<>();
        int i = 0, n = value.length();
        String forValue = null, protoValue = null;
        boolean seenFor = false, seenProto = false, elementStarted = false;
        while (true) {
            i = skipSpace(value, i);
            if (i < n && value.charAt(i) != ',' && value.charAt(i) != ';') {
                int keyStart = i;
                while (i < n && HttpChars.isTokenChar((byte) value.charAt(i))) i++;
                if (i == keyStart || i >= n || value.charAt(i) != '=') return null;
                String key = value.substring(keyStart, i);
                i++;
                String parameter;
                if (i < n && value.charAt(i) == '"') {
                    StringBuilder quoted = new StringBuilder();
                    i++;
                    while (true) {
                        if (i >= n) return null;
                        char c = value.charAt(i++);
                        if (c == '"') break;
                        if (c == '\\') {
                            if (i >= n) return null;
                            c = value.charAt(i++);
                        }
                        quoted.append(c);
                    }
                    parameter = quoted.toString();
                } else {
                    int valueStart = i;
                    while (i < n && isUnquotedValueChar(value.charAt(i))) i++;
                    if (i == valueStart) return null;
                    parameter = value.substring(valueStart, i);
                }
                elementStarted = true;
                if (key.equalsIgnoreCase("for")) {
                    if (seenFor) return null; // a parameter may occur once per element
                    seenFor = true;
                    forValue = parameter;
                } else if (key.equalsIgnoreCase("proto")) {
                    if (seenProto) return null;
                    seenProto = true;
                    protoValue = parameter;
                }
                i = skipSpace(value, i);
            }
            if (i >= n || value.charAt(i) == ',') {
                if (elementStarted) hops.add(new Hop(forValue == null ? null : node(forValue), protoValue));
                forValue = protoValue = null;
                seenFor = seenProto = elementStarted = false;
                if (i >= n) return hops;
                i++;
            } else if (value.charAt(i) == ';') {
                i++;
            } else {
                return null;
            }
        }
    }

    private static boolean isUnquotedValueChar(char c) {
        return c < 0x80 && (HttpChars.isTokenChar((byte) c) || c == ':' || c == '[' || c == ']');
    }

    private static int skipSpace(String s, int i) {
        while (i < s.length() && (s.charAt(i) == ' ' || s.charAt(i) == '\t')) i++;
        return i;
    }
}
