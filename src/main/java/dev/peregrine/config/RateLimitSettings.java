package dev.peregrine.config;

/**
 * {@code --rate-limit RATE} and {@code --rate-limit-burst N}: each client may send {@code requests} per
 * {@code periodSeconds} in the long run, and {@code burst} at once. {@code tableEntries} is how many
 * clients the shared table remembers (a power of two).
 */
public record RateLimitSettings(long requests, long periodSeconds, int burst, int tableEntries) {
    /** 65,536 clients in 1 MiB of shared memory: far more than the clients one server sees within a refill period. */
    public static final int TABLE_ENTRIES = 1 << 16;
    public static final int MAX_BURST = 1_000_000;

    public RateLimitSettings {
        if (requests < 1 || periodSeconds < 1 || burst < 1 || Integer.bitCount(tableEntries) != 1) {
            throw new IllegalArgumentException("rate limit " + requests + "/" + periodSeconds + "s, burst " + burst + ", table " + tableEntries);
        }
    }

    /**
     * Parses {@code N/s}, {@code N/m} or {@code N/h}; {@code burst} null takes the default: one second's
     * worth of requests, rounded up, so that a client may spend a second's budget at once (a page
     * fetching its assets in parallel) and never more than that ahead of the rate.
     *
     * @throws IllegalArgumentException saying what is wrong with the value
     */
    public static RateLimitSettings parse(String rate, Integer burst) {
        String text = rate.strip();
        int slash = text.indexOf('/');
        if (slash < 1 || slash != text.length() - 2) throw new IllegalArgumentException("'" + rate + "' is not N/s, N/m or N/h");
        long period = switch (text.charAt(slash + 1)) {
            case 's' -> 1;
            case 'm' -> 60;
            case 'h' -> 3600;
            default -> throw new IllegalArgumentException("'" + rate + "' is not N/s, N/m or N/h");
        };
        long requests;
        String count = text.substring(0, slash);
        if (!count.chars().allMatch(c -> c >= '0' && c <= '9') || count.length() > 10) {
            throw new IllegalArgumentException("'" + rate + "' is not N/s, N/m or N/h");
        }
        requests = Long.parseLong(count);
        // At most one request a nanosecond: the clock the limit counts in.
        if (requests < 1 || requests / period > 1_000_000_000L) {
            throw new IllegalArgumentException("'" + rate + "' must allow 1 to 1000000000 requests a second");
        }
        int chosen = burst != null ? burst : (int) Math.min(MAX_BURST, (requests + period - 1) / period);
        if (chosen < 1 || chosen > MAX_BURST) throw new IllegalArgumentException("burst " + chosen + " is not 1 to " + MAX_BURST);
        return new RateLimitSettings(requests, period, chosen, TABLE_ENTRIES);
    }

    /** The time between two requests at the sustained rate, in nanoseconds (the remainder below 1 ns is dropped). */
    public long intervalNanos() {
        return periodSeconds * 1_000_000_000L / requests;
    }
}
