package dev.peregrine.edge.files;

import java.util.ArrayList;
import java.util.List;

/**
 * The Range header of RFC 9110 §14.1.2 read against a representation of known length. Hand-written:
 * Netty has no parser for it, and the rules that matter here (what to ignore, what is unsatisfiable,
 * when many ranges are refused) are this server's.
 */
final class ByteRanges {
    /** More ranges than this are answered with the whole representation, as are overlapping ones. */
    static final int MAX_RANGES = 16;

    /** One satisfiable range, {@code first} to {@code last} inclusive. */
    record Range(long first, long last) {
        long length() {
            return last - first + 1;
        }
    }

    /** What the Range header asks. */
    sealed interface Outcome permits Whole, Partial, Unsatisfiable {}

    /** Send the whole representation: no Range, one that is not understood, or too many ranges. */
    record Whole() implements Outcome {}

    /** Send these ranges (one or more, in the order asked, not overlapping). */
    record Partial(List<Range> ranges) implements Outcome {}

    /** None of the ranges asked overlaps the representation: 416. */
    record Unsatisfiable() implements Outcome {}

    private static final Whole WHOLE = new Whole();

    private ByteRanges() {}

    static Outcome parse(String header, long length) {
        if (header == null) return WHOLE;
        int eq = header.indexOf('=');
        if (eq < 0 || !header.substring(0, eq).trim().equalsIgnoreCase("bytes")) return WHOLE;
        String[] specs = header.substring(eq + 1).split(",", -1);
        List<Range> ranges = new ArrayList<>();
        int asked = 0;
        for (String raw : specs) {
            String spec = raw.strip();
            if (spec.isEmpty()) continue; // a list may have empty elements (RFC 9110 §5.6.1)
            if (++asked > MAX_RANGES) return WHOLE;
            int dash = spec.indexOf('-');
            if (dash < 0) return WHOLE;
            String first = spec.substring(0, dash), last = spec.substring(dash + 1);
            if (first.isEmpty()) {
                long suffix = number(last);
                if (suffix < 0) return WHOLE;
                if (suffix > 0 && length > 0) ranges.add(new Range(Math.max(0, length - suffix), length - 1));
            } else {
                long from = number(first);
                long to = last.isEmpty() ? Long.MAX_VALUE : number(last);
                if (from < 0 || to < 0 || to < from) return WHOLE;
                if (from < length) ranges.add(new Range(from, Math.min(to, length - 1)));
            }
        }
        if (asked == 0) return WHOLE;
        if (ranges.isEmpty()) return new Unsatisfiable();
        if (overlapping(ranges)) return WHOLE;
        return new Partial(List.copyOf(ranges));
    }

    /** A run of digits as a number, or -1 (also when it would overflow). */
    private static long number(String digits) {
        if (digits.isEmpty() || digits.length() > 18) return -1;
        long value = 0;
        for (int i = 0; i < digits.length(); i++) {
            char c = digits.charAt(i);
            if (c < '0' || c > '9') return -1;
            value = value * 10 + (c - '0');
        }
        return value;
    }

    private static boolean overlapping(List<Range> ranges) {
        for (int i = 0; i < ranges.size(); i++) {
            for (int j = i + 1; j < ranges.size(); j++) {
                Range a = ranges.get(i), b = ranges.get(j);
                if (a.first() <= b.last() && b.first() <= a.last()) return true;
            }
        }
        return false;
    }
}
