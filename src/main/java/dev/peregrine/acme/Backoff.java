package dev.peregrine.acme;

import java.time.Duration;
import java.time.Instant;

/**
 * Failed orders for a name, kept in the {@link AcmeStorage} so that a restart (or a crash loop) does not
 * start over at once and run into the CA's rate limits: the delay doubles with each failure in a row,
 * from {@link #FIRST} up to {@link #LONGEST}.
 */
record Backoff(int failures, Instant next) {
    static final Duration FIRST = Duration.ofSeconds(30);
    static final Duration LONGEST = Duration.ofHours(12);
    static final Backoff NONE = new Backoff(0, Instant.EPOCH);

    /** What {@link #format} wrote; a damaged text costs one early retry at worst. */
    static Backoff parse(String text) {
        try {
            String[] fields = text.trim().split("\\s+");
            return new Backoff(Integer.parseInt(fields[0]), Instant.ofEpochSecond(Long.parseLong(fields[1])));
        } catch (RuntimeException e) {
            return NONE;
        }
    }

    /** The later of the two: what this process knows and what the storage says. */
    Backoff orLater(Backoff other) {
        return other.next.isAfter(next) ? other : this;
    }

    Backoff failedAgain(Instant now) {
        int failures = this.failures + 1;
        Duration delay = FIRST.multipliedBy(1L << Math.min(failures - 1, 20));
        if (delay.compareTo(LONGEST) > 0) delay = LONGEST;
        return new Backoff(failures, now.plus(delay));
    }

    String format() {
        return failures + " " + next.getEpochSecond() + "\n";
    }
}
