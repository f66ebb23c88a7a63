package dev.peregrine.acme;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.time.Instant;
import java.util.Optional;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class RenewalAdviceTest {
    private static final Instant NOW = Instant.parse("2026-12-02T08:00:00Z");

    private static RenewalAdvice retryAfter(Instant at) {
        return new RenewalAdvice(NOW.plus(Duration.ofDays(30)), NOW.plus(Duration.ofDays(31)), NOW.plus(Duration.ofDays(30)),
                Optional.ofNullable(at), Optional.empty());
    }

    @Test
    void theCaRetryAfterSaysWhenToAskAgain() {
        assertEquals(NOW.plus(Duration.ofHours(2)), retryAfter(NOW.plus(Duration.ofHours(2))).nextCheck(NOW));
    }

    @Test
    void aRetryAfterUnderAMinuteCountsAsAMinute() {
        assertEquals(NOW.plus(Duration.ofMinutes(1)), retryAfter(NOW.plusSeconds(1)).nextCheck(NOW));
        assertEquals(NOW.plus(Duration.ofMinutes(1)), retryAfter(NOW.minusSeconds(30)).nextCheck(NOW));
    }

    @Test
    void aRetryAfterOverADayCountsAsADay() {
        assertEquals(NOW.plus(Duration.ofDays(1)), retryAfter(NOW.plus(Duration.ofDays(20))).nextCheck(NOW));
    }

    @Test
    void withoutRetryAfterTheServerAsksAgainInSixHours() {
        assertEquals(NOW.plus(Duration.ofHours(6)), retryAfter(null).nextCheck(NOW));
    }

    @Test
    void onlyTheSameStartAndEndAreTheSameWindow() {
        RenewalAdvice advice = retryAfter(null);
        RenewalAdvice drawnAgain = new RenewalAdvice(advice.start(), advice.end(), advice.start().plusSeconds(5),
                Optional.of(NOW), Optional.empty());
        assertTrue(advice.sameWindow(drawnAgain));
        assertFalse(advice.sameWindow(new RenewalAdvice(NOW, advice.end(), NOW, Optional.empty(), Optional.empty())));
        assertFalse(advice.sameWindow(null));
    }
}
