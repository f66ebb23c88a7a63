package dev.peregrine.shared;

import java.io.IOException;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * How many connections each worker process holds, in a small file the supervisor creates, so that a
 * worker holding clearly more than its share stops accepting and leaves the next connections to the
 * others. The kernel alone hands out {@code accept} on the one shared socket unevenly: under
 * {@code wrk -c256} two workers were measured holding 11 and 245. (Sockets of their own per worker,
 * SO_REUSEPORT, would spread evenly, but the kernel resets the connections queued on the socket of a
 * worker that exits, which a SIGHUP must never do.)
 *
 * <p>One 64-byte line per slot. A line holds 0 where no worker accepts (none started there, exited,
 * draining, or pausing while its application is busy), else that worker's open connections plus one.
 * Each worker writes only its own line; the supervisor clears the line of a worker that exited.
 */
public final class ConnectionShares {
    public static final String FILE_ENV = "PEREGRINE_SHARES_FILE";
    public static final String SLOT_ENV = "PEREGRINE_SHARES_SLOT";
    /** "SHARES" and the format's version. */
    private static final long FINGERPRINT = 0x5348_4152_4553_0001L;
    private static final int LINE = 64;
    /** At or below this many connections a worker never pauses: a handful is no imbalance worth a delay. */
    private static final int FLOOR = 8;

    private final SharedRegion region;
    private final int slots;
    private final int mine;
    private final AtomicInteger open = new AtomicInteger();
    private volatile boolean accepting;

    private ConnectionShares(SharedRegion region, int mine) {
        this.region = region;
        this.slots = (int) (region.size() / LINE);
        this.mine = mine;
    }

    /**
     * Lines for {@code processes} workers: a replacement overlaps its predecessor, and a second SIGHUP
     * soon after the first can overlap a third process while the first still drains.
     */
    public static int slotsFor(int processes) {
        return 3 * processes;
    }

    /** The supervisor's file, with a line for each process that may be alive at once. */
    public static SharedRegion create(Path file, int slots) throws IOException {
        return SharedRegion.create(file, (long) slots * LINE, FINGERPRINT);
    }

    /** Clears a slot whose worker exited, whatever it last wrote; the supervisor's. */
    public static void clear(SharedRegion region, int slot) {
        region.set((long) slot * LINE, 0);
    }

    /** This worker's view of its supervisor's file; null for a single process, which has no one to share with. */
    public static ConnectionShares forWorker(Map<String, String> environment, int slots) throws IOException {
        // slots: what slotsFor gave the supervisor, from the same options
        String file = environment.get(FILE_ENV), slot = environment.get(SLOT_ENV);
        if (file == null || slot == null) return null;
        return new ConnectionShares(SharedRegion.open(Path.of(file), (long) slots * LINE, FINGERPRINT), Integer.parseInt(slot));
    }

    public void opened() {
        publish(open.incrementAndGet());
    }

    public void closed() {
        publish(open.decrementAndGet());
    }

    /** Whether this worker accepts new connections: only then does it count among those sharing them. */
    public void accepting(boolean accepting) {
        this.accepting = accepting;
        publish(open.get());
    }

    private void publish(int count) {
        // A racing opened() and accepting(false) may leave a stale count for the next change to fix: the
        // balance is a heuristic, and the next publication follows within one connection or one check.
        region.set((long) mine * LINE, accepting ? count + 1 : 0);
    }

    /**
     * Whether this worker holds more than its share of the connections of the workers that accept: more
     * than their mean plus an eighth of it (and at least {@value #FLOOR}). The worker with the fewest is
     * never over, so some worker always accepts.
     */
    public boolean overShare() {
        int held = open.get();
        if (held <= FLOOR) return false;
        long total = held;
        int sharing = 1;
        for (int slot = 0; slot < slots; slot++) {
            if (slot == mine) continue;
            long line = region.get((long) slot * LINE);
            if (line > 0) {
                total += line - 1;
                sharing++;
            }
        }
        if (sharing < 2) return false;
        long mean = total / sharing;
        return held > mean + Math.max(2, mean / 8);
    }
}
