package dev.peregrine.edge.compress;

/** Entity-tag comparison of RFC 9110 §8.8.3, for If-None-Match. */
final class EntityTags {
    private EntityTags() {}

    /**
     * Whether the If-None-Match value {@code list} ({@code *} or entity-tags separated by commas) matches
     * {@code tag} by the weak comparison: the opaque tags are equal, either may be weak. A malformed
     * list matches nothing past its malformed part. A response without a tag ({@code tag} null) is
     * never matched: only the application can tell what {@code *} means for it.
     */
    static boolean weakMatch(String list, String tag) {
        if (tag == null) return false;
        String opaque = opaque(tag);
        if (opaque == null) return false;
        int i = 0, n = list.length();
        while (i < n) {
            char c = list.charAt(i);
            if (c == ' ' || c == '\t' || c == ',') {
                i++;
                continue;
            }
            if (c == '*') return true;
            if (list.startsWith("W/", i)) i += 2;
            if (i >= n || list.charAt(i) != '"') return false;
            int close = list.indexOf('"', i + 1);
            if (close < 0) return false;
            if (list.substring(i, close + 1).equals(opaque)) return true;
            i = close + 1;
        }
        return false;
    }

    /** The quoted part of an entity-tag, without its weakness mark, or null when it is none. */
    private static String opaque(String tag) {
        String t = tag.startsWith("W/") ? tag.substring(2) : tag;
        return t.length() >= 2 && t.charAt(0) == '"' && t.charAt(t.length() - 1) == '"' ? t : null;
    }
}
