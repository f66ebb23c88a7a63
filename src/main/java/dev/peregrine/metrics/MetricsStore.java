package dev.peregrine.metrics;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.channels.FileChannel;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;

import static dev.peregrine.metrics.MetricsLayout.*;

/**
 * The server's counters in one fixed-layout memory area: a header, then one slot per worker process.
 * With one process the area is plain off-heap memory; with several it is a file every worker maps
 * (under /dev/shm it never touches a disk), so that whoever serves the metrics port reads every
 * worker's numbers straight from memory, without asking any process anything.
 *
 * <p>Every update is one atomic add on an aligned long: no lock, no allocation, and correct across
 * processes because the mapping is shared. A process writes only into its own slot. Slots are reused by
 * later processes (a replacement after SIGHUP, a restart after a crash): counters keep what the
 * predecessors left, so every sum only grows, as Prometheus expects of a counter; gauges belong to the
 * live process and are zeroed with {@link #clearGauges} when it exits.
 */
public final class MetricsStore {
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();

    private final MemorySegment segment;
    private final int slots;

    private MetricsStore(MemorySegment segment, int slots) {
        this.segment = segment;
        this.slots = slots;
    }

    /** An area in this process only: what a server without a supervisor uses. */
    public static MetricsStore offHeap(int slots) {
        requireSlots(slots);
        // An automatic arena: I/O threads may still count a closing connection while the server shuts down.
        MemorySegment segment = Arena.ofAuto().allocate(byteSize(slots), 64);
        return initialise(segment, slots);
    }

    /**
     * Creates the file shared by the workers (replacing any left by an earlier run), readable and
     * writable by this user only, with every counter at zero.
     */
    public static MetricsStore create(Path file, int slots) throws IOException {
        requireSlots(slots);
        Files.deleteIfExists(file);
        try (FileChannel channel = FileChannel.open(file, Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                StandardOpenOption.WRITE), PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")))) {
            // Mapping past the end grows the file with zeros.
            MemorySegment segment = channel.map(FileChannel.MapMode.READ_WRITE, 0, byteSize(slots), Arena.ofAuto());
            return initialise(segment, slots);
        } catch (FileAlreadyExistsException e) {
            throw new IOException("another process created " + file + " at the same time", e);
        }
    }

    /** Maps a file that {@link #create} made, as a worker does; refuses anything else. */
    public static MetricsStore open(Path file) throws IOException {
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            long size = channel.size();
            if (size < (long) HEADER_LONGS * Long.BYTES) throw new IOException(file + " is not a Peregrine metrics file");
            MemorySegment segment = channel.map(FileChannel.MapMode.READ_WRITE, 0, size, Arena.ofAuto());
            if (read(segment, headerOffset(HEADER_MAGIC)) != MAGIC) throw new IOException(file + " is not a Peregrine metrics file");
            long version = read(segment, headerOffset(HEADER_VERSION));
            long slotLongs = read(segment, headerOffset(HEADER_SLOT_LONGS));
            long slots = read(segment, headerOffset(HEADER_SLOTS));
            if (version != VERSION || slotLongs != SLOT_LONGS) {
                throw new IOException(file + " has metrics layout " + version + " (" + slotLongs + " longs a slot); this build has "
                        + VERSION + " (" + SLOT_LONGS + ")");
            }
            if (slots < 1 || slots > Integer.MAX_VALUE || size < byteSize((int) slots)) throw new IOException(file + " is truncated");
            return new MetricsStore(segment, (int) slots);
        }
    }

    private static MetricsStore initialise(MemorySegment segment, int slots) {
        write(segment, headerOffset(HEADER_VERSION), VERSION);
        write(segment, headerOffset(HEADER_SLOTS), slots);
        write(segment, headerOffset(HEADER_SLOT_LONGS), SLOT_LONGS);
        // Last: a process that sees the magic sees the rest of the header.
        write(segment, headerOffset(HEADER_MAGIC), MAGIC);
        return new MetricsStore(segment, slots);
    }

    private static void requireSlots(int slots) {
        if (slots < 1) throw new IllegalArgumentException("a metrics area needs at least one slot, not " + slots);
    }

    public int slots() {
        return slots;
    }

    /** The recorder a worker process gives its transport and application adapter. */
    public RequestMetrics recorder(int slot) {
        return new RequestMetrics(segment, slotBase(checked(slot)));
    }

    /** Marks which worker (numbered from 1) the process in {@code slot} serves as: per-worker series are labelled with it. */
    public void assignWorker(int slot, int worker) {
        if (worker < 1) throw new IllegalArgumentException("workers are numbered from 1, not " + worker);
        write(segment, slotOffset(checked(slot), WORKER_ID), worker);
    }

    public int workerOf(int slot) {
        return (int) read(segment, slotOffset(checked(slot), WORKER_ID));
    }

    /** The process in {@code slot} is gone: its open connections and requests in flight are no more. */
    public void clearGauges(int slot) {
        checked(slot);
        for (int gauge : GAUGES) write(segment, slotOffset(slot, gauge), 0);
    }

    public void workerStarted() { add(segment, headerOffset(WORKER_STARTS), 1); }
    public void workerExited() { add(segment, headerOffset(WORKER_EXITS), 1); }
    public void workerRestarted() { add(segment, headerOffset(WORKER_RESTARTS), 1); }

    /** One long of the header; {@code position} is one of {@link MetricsLayout}'s header positions. */
    long header(int position) {
        return read(segment, headerOffset(position));
    }

    /** One long of one slot; {@code position} is one of {@link MetricsLayout}'s slot positions. */
    long get(int slot, int position) {
        return read(segment, slotOffset(slot, position));
    }

    /** A slot position summed over every slot. */
    long sum(int position) {
        long total = 0;
        for (int slot = 0; slot < slots; slot++) total += get(slot, position);
        return total;
    }

    /** The largest value of a slot position over every slot. */
    long max(int position) {
        long largest = Long.MIN_VALUE;
        for (int slot = 0; slot < slots; slot++) largest = Math.max(largest, get(slot, position));
        return largest;
    }

    /** A slot position summed over the slots assigned to {@code worker}. */
    long sumForWorker(int worker, int position) {
        long total = 0;
        for (int slot = 0; slot < slots; slot++) {
            if (workerOf(slot) == worker) total += get(slot, position);
        }
        return total;
    }

    private int checked(int slot) {
        if (slot < 0 || slot >= slots) throw new IndexOutOfBoundsException("metrics slot " + slot + " of " + slots);
        return slot;
    }

    // ---- access to the longs: offsets in bytes, always 8-byte aligned, which atomic access requires ----

    private static long headerOffset(int position) {
        return (long) position * Long.BYTES;
    }

    private static long slotOffset(int slot, int position) {
        return slotBase(slot) + (long) position * Long.BYTES;
    }

    static void add(MemorySegment segment, long offset, long delta) {
        // The exact (long) result type lets the VarHandle call link without an adapter.
        long unused = (long) LONG.getAndAdd(segment, offset, delta);
    }

    private static long read(MemorySegment segment, long offset) {
        return (long) LONG.getVolatile(segment, offset);
    }

    static void write(MemorySegment segment, long offset, long value) {
        LONG.setVolatile(segment, offset, value);
    }
}
