package dev.peregrine.acme;

import java.net.URL;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;

/**
 * What the CA says of a certificate's renewal (ACME Renewal Information, RFC 9773): the window in
 * which to renew, a random time in it chosen once, when to ask again, and the page that explains an
 * unusual window.
 */
record RenewalAdvice(Instant start, Instant end, Instant renewAt, Optional<Instant> retryAfter, Optional<URL> explanation) {
    /** RFC 9773 4.3's example limits on Retry-After: a CA cannot make us ask more often, nor leave us deaf for days. */
    static final Duration SOONEST = Duration.ofMinutes(1);
    static final Duration LATEST = Duration.ofDays(1);
    /** Without Retry-After: a window moved earlier (a mass revocation) is heard of within hours, at no cost to the CA. */
    static final Duration DEFAULT = Duration.ofHours(6);

    /** When to ask the CA again, from {@code now}. */
    Instant nextCheck(Instant now) {
        Duration wait = retryAfter.map(at -> Duration.between(now, at)).orElse(DEFAULT);
        if (wait.compareTo(SOONEST) < 0) wait = SOONEST;
        if (wait.compareTo(LATEST) > 0) wait = LATEST;
        return now.plus(wait);
    }

    /** The same window as {@code other}: the time chosen in it stays, rather than being drawn again at every check. */
    boolean sameWindow(RenewalAdvice other) {
        return other != null && start.equals(other.start) && end.equals(other.end);
    }
}
