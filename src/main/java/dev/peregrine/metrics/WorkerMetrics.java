package dev.peregrine.metrics;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.Map;

/**
 * A worker's side of the metrics. Under a supervisor, the worker maps the supervisor's file and counts
 * into the slot it was given ({@value #FILE_ENV}, {@value #SLOT_ENV}); the supervisor serves the port.
 * Alone, with {@code --metrics-port}, it keeps the counters in its own memory and serves them itself.
 * Otherwise it counts nothing.
 */
public final class WorkerMetrics implements AutoCloseable {
    /** The metrics file a supervisor made with {@link MetricsStore#create}. */
    public static final String FILE_ENV = "PEREGRINE_METRICS_FILE";
    /** The slot of that file this worker process writes into. */
    public static final String SLOT_ENV = "PEREGRINE_WORKER_SLOT";

    private static final WorkerMetrics OFF = new WorkerMetrics(RequestMetrics.OFF, null);

    private final RequestMetrics recorder;
    private final MetricsServer server;

    private WorkerMetrics(RequestMetrics recorder, MetricsServer server) {
        this.recorder = recorder;
        this.server = server;
    }

    /**
     * Sets up counting for this process.
     *
     * @param port null when --metrics-port was not given
     * @throws IOException when the supervisor's file cannot be used or the port cannot be bound
     */
    public static WorkerMetrics start(Integer port, String host, Map<String, String> environment) throws IOException {
        String file = environment.get(FILE_ENV);
        if (file != null) {
            MetricsStore store = MetricsStore.open(Path.of(file));
            RequestMetrics recorder = store.recorder(slot(environment.get(SLOT_ENV), store.slots()));
            AcmeMetrics.countInto(recorder);
            return new WorkerMetrics(recorder, null);
        }
        if (port == null) return OFF;
        MetricsStore store = MetricsStore.offHeap(1);
        store.assignWorker(0, 1);
        store.workerStarted();
        MetricsServer server;
        try {
            server = MetricsServer.start(new MetricsExporter(store), host, port);
        } catch (IOException e) {
            throw new IOException("cannot serve metrics on " + host + ":" + port + ": " + e.getMessage(), e);
        }
        AcmeMetrics.countInto(store.recorder(0));
        return new WorkerMetrics(store.recorder(0), server);
    }

    private static int slot(String value, int slots) throws IOException {
        try {
            int slot = Integer.parseInt(value == null ? "" : value.strip());
            if (slot >= 0 && slot < slots) return slot;
        } catch (NumberFormatException ignored) {
            // reported below with the value
        }
        throw new IOException(SLOT_ENV + " is '" + value + "', not a slot of the metrics file (0.." + (slots - 1) + ")");
    }

    public RequestMetrics recorder() {
        return recorder;
    }

    /** The address this process serves metrics on, or null when it serves none. */
    public InetSocketAddress address() {
        return server == null ? null : server.address();
    }

    /** The scrape URL this process serves, or null when it serves none. */
    public String url() {
        return server == null ? null : server.url();
    }

    @Override
    public void close() {
        if (server != null) server.close();
    }
}
