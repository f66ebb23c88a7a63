package dev.peregrine.edge.cache;

import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

/**
 * A Cache-Control (or Pragma) value as directive names (lower-case) and their values (unquoted; null
 * without one). Hand-written: Netty has no parser for Cache-Control, and the grammar is a list of
 * {@code token [ "=" ( token / quoted-string ) ]} (RFC 9111 §5.2).
 */
final class CacheDirectives {
    private final Map<String, String> values = new HashMap<>();

    private CacheDirectives() {}

    static CacheDirectives parse(String text) {
        CacheDirectives d = new CacheDirectives();
        int i = 0, n = text.length();
        while (i < n) {
            while (i < n && (text.charAt(i) == ',' || text.charAt(i) == ' ' || text.charAt(i) == '\t')) i++;
            int nameStart = i;
            while (i < n && text.charAt(i) != '=' && text.charAt(i) != ',') i++;
            String name = text.substring(nameStart, i).strip().toLowerCase(Locale.ROOT);
            String value = null;
            if (i < n && text.charAt(i) == '=') {
                i++;
                while (i < n && (text.charAt(i) == ' ' || text.charAt(i) == '\t')) i++;
                if (i < n && text.charAt(i) == '"') {
                    StringBuilder quoted = new StringBuilder();
                    i++;
                    while (i < n && text.charAt(i) != '"') {
                        if (text.charAt(i) == '\\' && i + 1 < n) i++;
                        quoted.append(text.charAt(i++));
                    }
                    i++;
                    value = quoted.toString();
                }
                int valueStart = i;
                while (i < n && text.charAt(i) != ',') i++;
                if (value == null) value = text.substring(valueStart, i).strip();
            }
            if (!name.isEmpty()) d.values.putIfAbsent(name, value);
        }
        return d;
    }

    boolean has(String name) {
        return values.containsKey(name);
    }

    /**
     * A delta-seconds directive (max-age, s-maxage): -1 when absent, 0 when invalid (RFC 9111 §1.2.2: an
     * invalid value means stale), capped where it would overflow.
     */
    long seconds(String name) {
        if (!values.containsKey(name)) return -1;
        String value = values.get(name);
        if (value == null || value.isEmpty() || !value.chars().allMatch(c -> c >= '0' && c <= '9')) return 0;
        return value.length() > 10 ? Integer.MAX_VALUE : Math.min(Integer.MAX_VALUE, Long.parseLong(value));
    }
}
