package dev.peregrine.metrics;

import java.nio.file.Path;

/** The other process of {@link MetricsStoreTest}: maps the file and counts connections into one slot from several threads. */
public final class MetricsStoreChild {
    static final int THREADS = 2;

    public static void main(String[] args) throws Exception {
        RequestMetrics recorder = MetricsStore.open(Path.of(args[0])).recorder(Integer.parseInt(args[1]));
        int n = Integer.parseInt(args[2]);
        Thread[] threads = new Thread[THREADS];
        for (int t = 0; t < THREADS; t++) {
            threads[t] = new Thread(() -> {
                for (int i = 0; i < n; i++) recorder.connectionOpened();
            });
            threads[t].start();
        }
        for (Thread thread : threads) thread.join();
    }
}
