package dev.peregrine.http;

/** Byte-level character classes of RFC 9110, shared by the request parser and the response checks. */
public final class HttpChars {
    private HttpChars() {}

    private static final boolean[] TOKEN = new boolean[256];
    static {
        for (char c = '0'; c <= '9'; c++) TOKEN[c] = true;
        for (char c = 'a'; c <= 'z'; c++) TOKEN[c] = true;
        for (char c = 'A'; c <= 'Z'; c++) TOKEN[c] = true;
        for (char c : "!#$%&'*+-.^_`|~".toCharArray()) TOKEN[c] = true;
    }

    public static boolean isTokenChar(byte b) {
        return TOKEN[b & 0xff];
    }

    /** Whether data[start, start+length) equals {@code lower} ignoring ASCII case ({@code lower} is lower-case). */
    public static boolean equalsLowerCase(byte[] data, int start, int length, String lower) {
        if (length != lower.length()) return false;
        for (int i = 0; i < length; i++) {
            int b = data[start + i];
            if (b >= 'A' && b <= 'Z') b += 32;
            if (b != lower.charAt(i)) return false;
        }
        return true;
    }

    /** Whether a comma-separated list in data contains {@code token} (lower-case), ignoring case and OWS. */
    public static boolean containsTokenIgnoreCase(byte[] data, int start, int length, String token) {
        int end = start + length, i = start;
        while (i < end) {
            int itemEnd = i;
            while (itemEnd < end && data[itemEnd] != ',') itemEnd++;
            int a = i, b = itemEnd;
            while (a < b && (data[a] == ' ' || data[a] == '\t')) a++;
            while (b > a && (data[b - 1] == ' ' || data[b - 1] == '\t')) b--;
            if (equalsLowerCase(data, a, b - a, token)) return true;
            i = itemEnd + 1;
        }
        return false;
    }
}
