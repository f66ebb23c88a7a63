package dev.peregrine.acme;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;

/**
 * Failed orders for a name, kept in the cache directory so that a restart (or a crash loop) does not
 * start over at once and run into the CA's rate limits: the delay doubles with each failure in a row,
 * from {@link #FIRST} up to {@link #LONGEST}.
 */
record Backoff(int failures, Instant next) {
    static final Duration FIRST = Duration.ofSeconds(30);
    static final Duration LONGEST = Duration.ofHours(12);
    static final Backoff NONE = new Backoff(0, Instant.EPOCH);

    static Backoff read(Path file) {
        try {
            String[] fields = Files.readString(file).trim().split("\\s+");
            return new Backoff(Integer.parseInt(fields[0]), Instant.ofEpochSecond(Long.parseLong(fields[1])));
        } catch (NoSuchFileException e) {
            return NONE;
        } catch (IOException | RuntimeException e) {
            // A damaged backoff file costs one early retry at worst.
            return NONE;
        }
    }

    Backoff failedAgain(Instant now) {
        int failures = this.failures + 1;
        Duration delay = FIRST.multipliedBy(1L << Math.min(failures - 1, 20));
        if (delay.compareTo(LONGEST) > 0) delay = LONGEST;
        return new Backoff(failures, now.plus(delay));
    }

    void write(Path file) throws IOException {
        AcmeCache.write(file, failures + " " + next.getEpochSecond() + "\n");
    }
}
