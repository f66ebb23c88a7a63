package dev.peregrine.metrics;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static dev.peregrine.metrics.MetricsLayout.*;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class MetricsStoreTest {
    private static final int THREADS = 4;
    private static final int PER_THREAD = 50_000;
    private static final int CROSS_PROCESS_ADDS = 1_000_000;

    @TempDir
    Path dir;

    @Test
    void addsFromSeveralThreadsSumExactly() throws InterruptedException {
        MetricsStore store = MetricsStore.offHeap(1);
        RequestMetrics recorder = store.recorder(0);
        runConcurrently(THREADS, () -> {
            for (int i = 0; i < PER_THREAD; i++) {
                recorder.connectionOpened();
                recorder.requestStarted();
                recorder.requestFinished("GET", HTTP_1_1, 200, System.nanoTime(), 3, 7);
                recorder.requestEnded();
            }
        });
        long n = (long) THREADS * PER_THREAD;
        assertEquals(n, store.sum(CONNECTIONS_TOTAL));
        assertEquals(n, store.sum(CONNECTIONS_ACTIVE));
        assertEquals(0, store.sum(REQUESTS_IN_FLIGHT));
        assertEquals(n, store.sum(REQUESTS + requestCell(methodIndex("GET"), statusClassIndex(200), HTTP_1_1)));
        assertEquals(3 * n, store.sum(REQUEST_BODY_BYTES));
        assertEquals(7 * n, store.sum(RESPONSE_BODY_BYTES));
        assertEquals(n, durationCount(store));
    }

    @Test
    void twoMappingsOfOneFileSeeEachOthersWrites() throws IOException {
        Path file = dir.resolve("metrics");
        MetricsStore supervisor = MetricsStore.create(file, 4);
        MetricsStore worker = MetricsStore.open(file);
        assertEquals(4, worker.slots());

        worker.recorder(2).requestFinished("POST", HTTP_1_0, 503, System.nanoTime(), 10, 20);
        supervisor.assignWorker(2, 3);
        supervisor.workerStarted();

        assertEquals(1, supervisor.get(2, REQUESTS + requestCell(methodIndex("POST"), statusClassIndex(503), HTTP_1_0)));
        assertEquals(10, supervisor.sum(REQUEST_BODY_BYTES));
        assertEquals(3, worker.workerOf(2));
        assertEquals(1, worker.header(WORKER_STARTS));
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(file)));
    }

    /** Another JVM adds into the same slot while this one does: the sums are exact only if the adds are atomic across processes. */
    @Test
    void anotherProcessAddsAtomicallyIntoTheSameFile() throws Exception {
        Path file = dir.resolve("metrics");
        MetricsStore store = MetricsStore.create(file, 2);
        Process child = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp", System.getProperty("java.class.path"), MetricsStoreChild.class.getName(), file.toString(), "1",
                Integer.toString(CROSS_PROCESS_ADDS))
                .redirectErrorStream(true).start();
        RequestMetrics recorder = store.recorder(1);
        // Start once the child is counting, so that both processes add at the same time.
        while (store.get(1, CONNECTIONS_TOTAL) == 0 && child.isAlive()) Thread.onSpinWait();
        for (int i = 0; i < CROSS_PROCESS_ADDS; i++) recorder.connectionOpened();
        assertTrue(child.waitFor(60, TimeUnit.SECONDS), "the child process did not finish");
        String output = new String(child.getInputStream().readAllBytes());
        assertEquals(0, child.exitValue(), output);
        assertEquals(CROSS_PROCESS_ADDS * (1L + MetricsStoreChild.THREADS), store.get(1, CONNECTIONS_TOTAL));
        assertEquals(0, store.get(0, CONNECTIONS_TOTAL));
    }

    @Test
    void gaugesAreClearedPerSlotAndCountersKept() {
        MetricsStore store = MetricsStore.offHeap(2);
        RequestMetrics first = store.recorder(0), second = store.recorder(1);
        for (RequestMetrics r : List.of(first, second)) {
            r.connectionOpened();
            r.connectionOpened();
            r.requestStarted();
        }
        store.clearGauges(0);
        assertEquals(0, store.get(0, CONNECTIONS_ACTIVE));
        assertEquals(0, store.get(0, REQUESTS_IN_FLIGHT));
        assertEquals(2, store.get(1, CONNECTIONS_ACTIVE));
        assertEquals(1, store.get(1, REQUESTS_IN_FLIGHT));
        assertEquals(2, store.get(0, CONNECTIONS_TOTAL), "clearing gauges must leave counters alone");
    }

    @Test
    void countersSurviveASlotBeingReused() throws IOException {
        Path file = dir.resolve("metrics");
        MetricsStore supervisor = MetricsStore.create(file, 2);
        RequestMetrics predecessor = MetricsStore.open(file).recorder(0);
        predecessor.connectionOpened();
        predecessor.requestFinished("GET", HTTP_1_1, 200, System.nanoTime(), 0, 100);
        supervisor.clearGauges(0); // the predecessor exited with its connection open

        RequestMetrics successor = MetricsStore.open(file).recorder(0);
        successor.connectionOpened();
        successor.requestFinished("GET", HTTP_1_1, 200, System.nanoTime(), 0, 50);

        assertEquals(2, supervisor.sum(CONNECTIONS_TOTAL));
        assertEquals(1, supervisor.sum(CONNECTIONS_ACTIVE));
        assertEquals(150, supervisor.sum(RESPONSE_BODY_BYTES));
        assertEquals(2, supervisor.sum(REQUESTS + requestCell(0, 1, HTTP_1_1)));
        assertEquals(2, durationCount(supervisor));
    }

    @Test
    void creatingAgainStartsFromZero() throws IOException {
        Path file = dir.resolve("metrics");
        MetricsStore.create(file, 1).recorder(0).connectionOpened();
        assertEquals(0, MetricsStore.create(file, 1).sum(CONNECTIONS_TOTAL));
    }

    @Test
    void openRefusesWhatIsNotAMetricsFile() throws IOException {
        Path empty = Files.createFile(dir.resolve("empty"));
        Path other = Files.write(dir.resolve("other"), new byte[4096]);
        assertThrows(IOException.class, () -> MetricsStore.open(empty));
        IOException e = assertThrows(IOException.class, () -> MetricsStore.open(other));
        assertTrue(e.getMessage().contains("not a Peregrine metrics file"), e.getMessage());
        assertThrows(IOException.class, () -> MetricsStore.open(dir.resolve("missing")));
    }

    @Test
    void openRefusesATruncatedFile() throws IOException {
        Path file = dir.resolve("metrics");
        MetricsStore.create(file, 3);
        try (var channel = java.nio.channels.FileChannel.open(file, java.nio.file.StandardOpenOption.WRITE)) {
            channel.truncate(byteSize(2));
        }
        IOException e = assertThrows(IOException.class, () -> MetricsStore.open(file));
        assertTrue(e.getMessage().contains("truncated"), e.getMessage());
    }

    @Test
    void slotsOutsideTheAreaAreRefused() {
        MetricsStore store = MetricsStore.offHeap(2);
        assertThrows(IndexOutOfBoundsException.class, () -> store.recorder(2));
        assertThrows(IndexOutOfBoundsException.class, () -> store.clearGauges(-1));
        assertThrows(IllegalArgumentException.class, () -> MetricsStore.offHeap(0));
    }

    @Test
    void offRecordsNothingAndReadsNoClock() {
        RequestMetrics off = RequestMetrics.OFF;
        assertFalse(off.enabled());
        assertEquals(0, off.clock());
        off.connectionOpened();
        off.requestFinished("GET", HTTP_1_1, 200, 0, 1, 1);
        off.pythonStarted(0);
    }

    @Test
    void pythonWaitIsRecordedInItsHistogram() {
        MetricsStore store = MetricsStore.offHeap(1);
        RequestMetrics recorder = store.recorder(0);
        recorder.pythonStarted(recorder.clock() - TimeUnit.MILLISECONDS.toNanos(3));
        long total = 0;
        for (int i = 0; i <= PYTHON_WAIT_BOUNDS.length; i++) total += store.sum(PYTHON_WAIT_BUCKETS + i);
        assertEquals(1, total);
        assertEquals(0, store.sum(PYTHON_WAIT_BUCKETS + bucketIndex(PYTHON_WAIT_BOUNDS, 1_000)));
        assertTrue(store.sum(PYTHON_WAIT_SUM_NANOS) >= TimeUnit.MILLISECONDS.toNanos(3));
    }

    private static long durationCount(MetricsStore store) {
        long count = 0;
        for (int i = 0; i <= DURATION_BOUNDS.length; i++) count += store.sum(DURATION_BUCKETS + i);
        return count;
    }

    private static void runConcurrently(int threads, Runnable work) throws InterruptedException {
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> started = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread thread = new Thread(() -> {
                try {
                    start.await();
                } catch (InterruptedException e) {
                    return;
                }
                work.run();
            });
            thread.start();
            started.add(thread);
        }
        start.countDown();
        for (Thread thread : started) thread.join();
    }
}
