package dev.peregrine.edge.ratelimit;

import dev.peregrine.metrics.RequestMetrics;
import dev.peregrine.shared.SharedLayout;
import dev.peregrine.shared.SharedRegion;

/**
 * The rate limit's state: a fixed table of clients in shared memory, each with its GCRA theoretical
 * arrival time (TAT), updated by compare-and-set so that every worker spends from one budget per client.
 *
 * <p>GCRA in integer nanoseconds: a request at {@code now} is allowed when {@code max(TAT, now) - now}
 * is at most the tolerance, {@code (burst - 1) × interval}, and then moves TAT to
 * {@code max(TAT, now) + interval}. A client sending as fast as it can thus gets {@code burst} requests
 * at once and one more every interval: burst + rate × T in T seconds. The clock is
 * {@link System#nanoTime}, which HotSpot on Linux reads from CLOCK_MONOTONIC, counted from boot: one
 * clock for every process on the host, which is what lets workers compare each other's TATs.
 *
 * <p>The table: open addressing from the key's hash, linear over at most {@value #PROBE} entries (two
 * cache lines). An entry is two longs, the key (0: free) and the TAT; entries are never freed, only
 * taken over. A new client takes the first free entry of its window; when there is none, an entry
 * whose budget is full again (TAT ≤ now: forgetting it changes nothing), else the entry closest to
 * full among clients not being limited, which is forgotten early (counted in metrics); a client being
 * limited is never forgotten. When every entry of the window holds a client being limited, the new
 * client is let through uncounted (counted in metrics): refusing it instead would let anyone who fills
 * a window lock out the clients who hash there.
 *
 * <p>Taking an entry over sets its TAT to 0 (a full budget) before it swaps the key, so that two
 * workers cannot both take it. A request of the old client landing between the two, in another worker
 * at the same instant, is charged to the new one: the one imprecision, one request, at an eviction.
 */
final class ClientTable {
    static final int PROBE = 8;
    private static final int ENTRY = SharedLayout.RATE_LIMIT_ENTRY_BYTES;
    /** What {@link #admit} returns for a request let through without a table entry. */
    static final long UNTRACKED = Long.MAX_VALUE;
    /** The entry changed hands under us: look the key up again. */
    private static final long MOVED = Long.MIN_VALUE;

    private final SharedRegion table;
    private final int mask;
    private final long interval;
    private final long tolerance;
    private final RequestMetrics metrics;

    ClientTable(SharedRegion table, long intervalNanos, int burst, RequestMetrics metrics) {
        long entries = table.size() / ENTRY;
        if (Long.bitCount(entries) != 1 || entries < PROBE) throw new IllegalArgumentException("a table of " + entries + " entries");
        this.table = table;
        this.mask = (int) entries - 1;
        this.interval = intervalNanos;
        this.tolerance = (burst - 1) * intervalNanos;
        this.metrics = metrics;
    }

    long intervalNanos() {
        return interval;
    }

    /**
     * Charges one request of {@code key} ({@link ClientKey}) at {@code now} (a {@link System#nanoTime}
     * reading). Returns, when allowed, how many more requests the client may send at once (≥ 0); when
     * limited, minus the nanoseconds until it may send again (< 0); {@link #UNTRACKED} when let through
     * without an entry.
     */
    long admit(long key, long now) {
        int home = (int) (mix(key) & mask);
        search:
        while (true) {
            int free = -1, victim = -1;
            long victimKey = 0, victimTat = Long.MAX_VALUE;
            boolean victimFull = false;
            for (int i = 0; i < PROBE; i++) {
                int slot = (home + i) & mask;
                long k = table.get(keyAt(slot));
                if (k == key) {
                    long outcome = charge(slot, key, now);
                    if (outcome != MOVED) return outcome;
                    continue search;
                }
                if (k == 0) {
                    // Entries are never freed: the key is not further on.
                    free = slot;
                    break;
                }
                long tat = table.get(tatAt(slot));
                if (tat <= now) {
                    if (!victimFull) {
                        victim = slot;
                        victimKey = k;
                        victimTat = tat;
                        victimFull = true;
                    }
                } else if (!victimFull && tat - now <= tolerance && tat < victimTat) {
                    victim = slot;
                    victimKey = k;
                    victimTat = tat;
                }
            }
            if (free >= 0) {
                if (table.compareAndSet(keyAt(free), 0, key)) {
                    long outcome = charge(free, key, now);
                    if (outcome != MOVED) return outcome;
                }
                continue;
            }
            if (victim < 0) {
                metrics.rateLimitUntracked();
                return UNTRACKED;
            }
            if (!table.compareAndSet(tatAt(victim), victimTat, 0)) continue;
            if (!table.compareAndSet(keyAt(victim), victimKey, key)) continue;
            if (!victimFull) metrics.rateLimitForgotten();
            long outcome = charge(victim, key, now);
            if (outcome != MOVED) return outcome;
        }
    }

    private long charge(int slot, long key, long now) {
        while (true) {
            long tat = table.get(tatAt(slot));
            if (table.get(keyAt(slot)) != key) return MOVED;
            long start = Math.max(tat, now);
            long ahead = start - now;
            if (ahead > tolerance) return -(ahead - tolerance);
            long next = start + interval;
            if (table.compareAndSet(tatAt(slot), tat, next)) return Math.floorDiv(tolerance - (next - now), interval) + 1;
        }
    }

    private static long keyAt(int slot) {
        return (long) slot * ENTRY;
    }

    private static long tatAt(int slot) {
        return (long) slot * ENTRY + Long.BYTES;
    }

    /** Murmur3's 64-bit finaliser: neighbouring addresses land far apart. */
    private static long mix(long k) {
        k ^= k >>> 33;
        k *= 0xff51afd7ed558ccdL;
        k ^= k >>> 33;
        k *= 0xc4ceb53a87f5ec4dL;
        k ^= k >>> 33;
        return k;
    }
}
