package dev.peregrine.workers;

import dev.peregrine.config.ServerSettings;
import dev.peregrine.metrics.MetricsExporter;
import dev.peregrine.metrics.MetricsServer;
import dev.peregrine.metrics.MetricsStore;
import dev.peregrine.metrics.WorkerMetrics;
import dev.peregrine.shared.SharedRegion;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Map;

/**
 * The metrics of a supervised server: the shared file every worker counts into, the slots handed out
 * to worker processes, the supervisor's own counters, and the port that serves the sum. Supervisor
 * thread only.
 */
final class SupervisorMetrics implements AutoCloseable {
    /**
     * Slots per worker position: a replacement overlaps its predecessor, and a quick second SIGHUP can
     * overlap a third process while the first still drains; a slot is only reused once its process exited.
     */
    private static final int SLOTS_PER_WORKER = 4;

    private final Path file;
    private final MetricsStore store;
    private final MetricsServer server;
    private final Deque<Integer> free = new ArrayDeque<>();

    private SupervisorMetrics(Path file, MetricsStore store, MetricsServer server) {
        this.file = file;
        this.store = store;
        this.server = server;
        for (int i = 0; i < store.slots(); i++) free.add(i);
    }

    /** Null when --metrics-port was not given. */
    static SupervisorMetrics start(ServerSettings settings, int workers) throws IOException {
        if (settings.operations().metricsPort() == null) return null;
        Path file = SharedRegion.directory().resolve("peregrine-" + ProcessHandle.current().pid() + ".metrics");
        MetricsStore store = MetricsStore.create(file, workers * SLOTS_PER_WORKER);
        try {
            MetricsServer server = MetricsServer.start(new MetricsExporter(store), settings.operations().metricsHost(), settings.operations().metricsPort());
            return new SupervisorMetrics(file, store, server);
        } catch (IOException e) {
            Files.deleteIfExists(file);
            throw new IOException("cannot serve metrics on " + settings.operations().metricsHost() + ":" + settings.operations().metricsPort() + ": " + e.getMessage(), e);
        }
    }

    /** A free slot for a new process of worker {@code position}; its counters continue from its last user. */
    int takeSlot(int position) {
        Integer slot = free.poll();
        // Only with more processes alive than slots (replacements piling up): share, at the cost of gauges.
        int chosen = slot != null ? slot : position;
        store.assignWorker(chosen, position + 1);
        return chosen;
    }

    void releaseSlot(int slot) {
        if (slot >= 0 && !free.contains(slot)) free.add(slot);
    }

    Map<String, String> environment(int slot) {
        return Map.of(WorkerMetrics.FILE_ENV, file.toString(), WorkerMetrics.SLOT_ENV, Integer.toString(slot));
    }

    void started() {
        store.workerStarted();
    }

    /** A process exited: what it held open (connections, requests) is no longer open, whatever its end. */
    void exited(int slot) {
        store.workerExited();
        if (slot < 0) return;
        store.clearGauges(slot);
        releaseSlot(slot);
    }

    void restarted() {
        store.workerRestarted();
    }

    String url() {
        return server.url();
    }

    @Override
    public void close() {
        server.close();
        try {
            Files.deleteIfExists(file);
        } catch (IOException ignored) {
            // A leftover file in /dev/shm is small and named after a pid that is gone.
        }
    }
}
