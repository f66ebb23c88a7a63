package dev.peregrine.acme;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * At most one order for a name at a time, among the workers of a server and among servers sharing the
 * cache directory on a volume: a file created exclusively, whose modification time the holder touches
 * (the heartbeat). A lock whose heartbeat stopped for {@link #STALE} belongs to a process that died, and
 * is taken over. A file rather than {@code FileChannel.lock}: POSIX locks are per process, unreliable
 * on network volumes, and cannot tell a stuck holder from a live one.
 */
final class OrderLock implements AcmeStorage.Lock {
    static final Duration HEARTBEAT = Duration.ofSeconds(5);
    static final Duration STALE = Duration.ofSeconds(30);

    private final Path file;
    private final ScheduledFuture<?> heartbeat;

    private OrderLock(Path file, ScheduledExecutorService scheduler) {
        this.file = file;
        this.heartbeat = scheduler.scheduleWithFixedDelay(this::touch, HEARTBEAT.toMillis(), HEARTBEAT.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** The lock, or null when a live process holds it. */
    static OrderLock tryAcquire(Path file, ScheduledExecutorService scheduler) throws IOException {
        try {
            Instant beat = Files.getLastModifiedTime(file).toInstant();
            if (beat.plus(STALE).isAfter(Instant.now())) return null;
            // Two takers may both find it stale; the exclusive create below lets one of them win,
            // unless the second deletes the winner's new file in between: a window of microseconds.
            Files.deleteIfExists(file);
        } catch (NoSuchFileException e) {
            // Free.
        }
        try {
            Files.writeString(Files.createFile(file), ProcessHandle.current().pid() + "\n", StandardCharsets.US_ASCII);
        } catch (FileAlreadyExistsException e) {
            return null;
        }
        return new OrderLock(file, scheduler);
    }

    private void touch() {
        try {
            Files.setLastModifiedTime(file, FileTime.from(Instant.now()));
        } catch (IOException ignored) {
            // Deleted under us (by hand): the order finishes; a second one would at worst be a duplicate.
        }
    }

    @Override
    public void close() throws IOException {
        heartbeat.cancel(false);
        Files.deleteIfExists(file);
    }
}
