package dev.peregrine.shared;

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

/**
 * A fixed-size memory area every worker of one server maps, for state that must be one across workers
 * (the rate limit's table of clients, the response cache). The supervisor creates it as a file
 * under /dev/shm before the first worker starts and deletes it when it exits, so the state outlives
 * the replacement of workers (SIGHUP, crashes) and a new server starts empty; a server without a
 * supervisor keeps it in its own off-heap memory.
 *
 * <p>The area starts with a header of {@value #HEADER_BYTES} bytes: a magic number, the layout
 * fingerprint its creator was built with, and its size. Whoever opens it must expect the same
 * fingerprint: processes built from different versions, or run with different options, refuse each
 * other's area instead of reading it with the wrong map. After the header, the users address it in
 * bytes from 0 ({@link #slice}); every access is to an aligned long, atomically, through one VarHandle,
 * which is what makes compare-and-set correct between processes mapping one file.
 */
public final class SharedRegion {
    /** "PEREGSHM" in ASCII. */
    static final long MAGIC = 0x50455245_4753484DL;
    static final int HEADER_BYTES = 64;
    private static final long HEADER_MAGIC = 0, HEADER_FINGERPRINT = 8, HEADER_SIZE = 16;

    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();

    /** The whole area, header included; offsets given to the accessors start after the header. */
    private final MemorySegment segment;
    private final long base;
    private final long size;

    private SharedRegion(MemorySegment segment, long base, long size) {
        this.segment = segment;
        this.base = base;
        this.size = size;
    }

    /** Where the files of shared areas go: /dev/shm keeps them in memory; elsewhere the page cache does the same job. */
    public static Path directory() {
        return Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") : Path.of(System.getProperty("java.io.tmpdir"));
    }

    /** An area in this process only, zeroed. */
    public static SharedRegion inProcess(long size, long fingerprint) {
        requireSize(size);
        // An automatic arena: I/O threads may still read it while the server shuts down.
        MemorySegment segment = Arena.ofAuto().allocate(HEADER_BYTES + size, 64);
        return initialise(segment, size, fingerprint);
    }

    /**
     * Creates the file the workers will map (replacing any left by an earlier run), readable and
     * writable by this user only, zeroed.
     */
    public static SharedRegion create(Path file, long size, long fingerprint) throws IOException {
        requireSize(size);
        Files.deleteIfExists(file);
        try (FileChannel channel = FileChannel.open(file, Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                StandardOpenOption.WRITE), PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")))) {
            // Mapping past the end grows the file with zeros; under /dev/shm pages are only taken when touched.
            MemorySegment segment = channel.map(FileChannel.MapMode.READ_WRITE, 0, HEADER_BYTES + size, Arena.ofAuto());
            return initialise(segment, size, fingerprint);
        } catch (FileAlreadyExistsException e) {
            throw new IOException("another process created " + file + " at the same time", e);
        }
    }

    /** Maps a file that {@link #create} made with the same fingerprint and size; refuses anything else. */
    public static SharedRegion open(Path file, long size, long fingerprint) throws IOException {
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            if (channel.size() != HEADER_BYTES + size) {
                throw new IOException(file + " holds " + channel.size() + " bytes, not the " + (HEADER_BYTES + size) + " this worker expects");
            }
            MemorySegment segment = channel.map(FileChannel.MapMode.READ_WRITE, 0, HEADER_BYTES + size, Arena.ofAuto());
            if ((long) LONG.getVolatile(segment, HEADER_MAGIC) != MAGIC) throw new IOException(file + " is not a Peregrine shared area");
            long found = (long) LONG.getVolatile(segment, HEADER_FINGERPRINT);
            if (found != fingerprint || (long) LONG.getVolatile(segment, HEADER_SIZE) != size) {
                throw new IOException(file + " has layout " + Long.toHexString(found) + "; this worker expects " + Long.toHexString(fingerprint));
            }
            return new SharedRegion(segment, HEADER_BYTES, size);
        }
    }

    private static SharedRegion initialise(MemorySegment segment, long size, long fingerprint) {
        LONG.setVolatile(segment, HEADER_FINGERPRINT, fingerprint);
        LONG.setVolatile(segment, HEADER_SIZE, size);
        // Last: a process that sees the magic sees the rest of the header.
        LONG.setVolatile(segment, HEADER_MAGIC, MAGIC);
        return new SharedRegion(segment, HEADER_BYTES, size);
    }

    private static void requireSize(long size) {
        if (size < Long.BYTES || size % 64 != 0) throw new IllegalArgumentException("a shared area is a positive multiple of 64 bytes, not " + size);
    }

    /** Bytes usable from offset 0. */
    public long size() {
        return size;
    }

    /** The {@code bytes} from {@code offset} (both multiples of 8) as an area of their own, addressed from 0. */
    public SharedRegion slice(long offset, long bytes) {
        if (offset < 0 || bytes < 0 || offset + bytes > size || offset % Long.BYTES != 0 || bytes % Long.BYTES != 0) {
            throw new IndexOutOfBoundsException("slice of " + bytes + " bytes at " + offset + " in " + size);
        }
        return new SharedRegion(segment, base + offset, bytes);
    }

    public long get(long offset) {
        return (long) LONG.getVolatile(segment, at(offset));
    }

    public void set(long offset, long value) {
        LONG.setVolatile(segment, at(offset), value);
    }

    public boolean compareAndSet(long offset, long expected, long value) {
        return LONG.compareAndSet(segment, at(offset), expected, value);
    }

    public long getAndAdd(long offset, long delta) {
        return (long) LONG.getAndAdd(segment, at(offset), delta);
    }

    /**
     * Copies {@code length} bytes of {@code source} to {@code offset}, plainly: the bytes are published by
     * a later volatile write (a version word), and read by {@link #copyOut} followed by {@link #loadFence}.
     */
    public void copyIn(long offset, byte[] source, int from, int length) {
        MemorySegment.copy(source, from, segment, ValueLayout.JAVA_BYTE, bytesAt(offset, length), length);
    }

    /** Copies {@code length} bytes at {@code offset} to {@code target}, plainly (see {@link #copyIn}). */
    public void copyOut(long offset, byte[] target, int to, int length) {
        MemorySegment.copy(segment, ValueLayout.JAVA_BYTE, bytesAt(offset, length), target, to, length);
    }

    /** Keeps the plain reads before it (a {@link #copyOut}) from moving after the volatile reads that follow it. */
    public static void loadFence() {
        VarHandle.loadLoadFence();
    }

    private long bytesAt(long offset, int length) {
        if (offset < 0 || length < 0 || offset + length > size) {
            throw new IndexOutOfBoundsException(length + " bytes at " + offset + " in " + size);
        }
        return base + offset;
    }

    private long at(long offset) {
        // An unaligned or stray offset would be a silent corruption of another user's state: checked always.
        if (offset < 0 || offset > size - Long.BYTES || (offset & 7) != 0) {
            throw new IndexOutOfBoundsException("long at " + offset + " in " + size + " bytes");
        }
        return base + offset;
    }
}
