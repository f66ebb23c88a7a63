package dev.peregrine.metrics;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.HashSet;
import java.util.Set;

import static dev.peregrine.metrics.MetricsLayout.*;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class MetricsLayoutTest {

    @Test
    void aDurationOnABoundFallsInThatBucketAndJustAboveInTheNext() {
        for (int i = 0; i < DURATION_BOUNDS.length; i++) {
            assertEquals(i, bucketIndex(DURATION_BOUNDS, DURATION_BOUNDS[i]), "on bound " + i);
            assertEquals(i + 1, bucketIndex(DURATION_BOUNDS, DURATION_BOUNDS[i] + 1), "just above bound " + i);
        }
    }

    @ParameterizedTest
    @CsvSource({"0, 0", "1, 0", "500000, 0", "500001, 1", "3000000, 3", "60000000000, 15", "60000000001, 16", "9223372036854775807, 16"})
    void durationBuckets(long nanos, int bucket) {
        assertEquals(bucket, bucketIndex(DURATION_BOUNDS, nanos));
    }

    @ParameterizedTest
    @CsvSource({"0, 0", "10000, 0", "10001, 1", "75000, 3", "1000000000, 15", "1000000001, 16"})
    void pythonWaitBuckets(long nanos, int bucket) {
        assertEquals(bucket, bucketIndex(PYTHON_WAIT_BOUNDS, nanos));
    }

    @Test
    void boundsAscendAndEndWithInfinity() {
        for (long[] bounds : new long[][] {DURATION_BOUNDS, PYTHON_WAIT_BOUNDS}) {
            for (int i = 1; i < bounds.length; i++) assertTrue(bounds[i] > bounds[i - 1]);
            double[] seconds = boundsInSeconds(bounds);
            assertEquals(bounds.length + 1, seconds.length);
            assertEquals(Double.POSITIVE_INFINITY, seconds[bounds.length]);
        }
        assertEquals(0.0005, boundsInSeconds(DURATION_BOUNDS)[0]);
    }

    @ParameterizedTest
    @CsvSource({"GET, GET", "HEAD, HEAD", "POST, POST", "PUT, PUT", "DELETE, DELETE", "PATCH, PATCH", "OPTIONS, OPTIONS",
            "TRACE, other", "PROPFIND, other", "get, other"})
    void methods(String method, String label) {
        assertEquals(label, METHODS[methodIndex(method)]);
    }

    @ParameterizedTest
    @CsvSource({"100, 1xx", "101, 1xx", "200, 2xx", "204, 2xx", "308, 3xx", "404, 4xx", "499, 4xx", "500, 5xx", "599, 5xx", "42, 1xx", "999, 5xx"})
    void statusClasses(int status, String label) {
        assertEquals(label, STATUS_CLASSES[statusClassIndex(status)]);
    }

    @Test
    void everyRequestCellIsDistinctAndInside() {
        Set<Integer> cells = new HashSet<>();
        for (int m = 0; m < METHODS.length; m++) {
            for (int s = 0; s < STATUS_CLASSES.length; s++) {
                for (int p = 0; p < PROTOCOLS.length; p++) cells.add(requestCell(m, s, p));
            }
        }
        assertEquals(REQUEST_CELLS, cells.size());
        assertTrue(cells.stream().allMatch(c -> c >= 0 && c < REQUEST_CELLS));
    }

    @Test
    void slotSectionsDoNotOverlapAndSlotsFillWholeCacheLines() {
        assertTrue(DURATION_BUCKETS >= REQUESTS + REQUEST_CELLS);
        assertTrue(DURATION_SUM_NANOS >= DURATION_BUCKETS + DURATION_BOUNDS.length + 1);
        assertTrue(PYTHON_WAIT_SUM_NANOS >= PYTHON_WAIT_BUCKETS + PYTHON_WAIT_BOUNDS.length + 1);
        assertTrue(PYTHON_WAIT_BUCKETS > WEBTRANSPORT_DATAGRAMS_DROPPED);
        assertTrue(WORKER_ID > PYTHON_WAIT_SUM_NANOS && WORKER_ID < SLOT_LONGS);
        assertEquals(0, PYTHON_WAIT_BUCKETS % 8, "the Python thread's counters start a cache line");
        assertEquals(0, SLOT_LONGS % 8);
        assertEquals(0, slotBase(1) % 64);
    }
}
