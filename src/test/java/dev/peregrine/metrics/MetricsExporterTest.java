package dev.peregrine.metrics;

import org.junit.jupiter.api.Test;

import java.util.concurrent.TimeUnit;

import static dev.peregrine.metrics.MetricsLayout.HTTP_1_0;
import static dev.peregrine.metrics.MetricsLayout.HTTP_1_1;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class MetricsExporterTest {
    private static final String TEXT = MetricsExporter.contentType(null);

    @Test
    void sumsEverySlotAndLabelsWorkers() {
        MetricsStore store = MetricsStore.offHeap(4);
        store.assignWorker(0, 1);
        store.assignWorker(1, 2);
        store.assignWorker(2, 1); // the replacement of worker 1, overlapping it
        MetricsExporter exporter = new MetricsExporter(store);

        String before = exporter.scrape(TEXT);
        assertFalse(before.contains("peregrine_requests_total{"), "no request series before any request");

        long start = System.nanoTime() - TimeUnit.MILLISECONDS.toNanos(3);
        store.recorder(0).requestFinished("GET", HTTP_1_1, 200, start, 0, 5);
        store.recorder(1).requestFinished("GET", HTTP_1_1, 204, start, 0, 0);
        store.recorder(2).requestFinished("DELETE", HTTP_1_0, 404, start, 7, 9);
        store.recorder(0).requestStarted();
        store.recorder(2).requestStarted();
        store.recorder(1).connectionOpened();
        store.recorder(0).webTransportDatagramDropped();
        store.recorder(2).webTransportDatagramDropped();
        store.workerStarted();
        store.workerStarted();

        String text = exporter.scrape(TEXT);
        assertLine(text, "peregrine_requests_total{method=\"GET\",protocol=\"HTTP/1.1\",status=\"2xx\"} 2.0");
        assertLine(text, "peregrine_requests_total{method=\"DELETE\",protocol=\"HTTP/1.0\",status=\"4xx\"} 1.0");
        assertLine(text, "peregrine_request_duration_seconds_count 3");
        assertLine(text, "peregrine_request_duration_seconds_bucket{le=\"0.0025\"} 0");
        assertLine(text, "peregrine_request_duration_seconds_bucket{le=\"+Inf\"} 3");
        assertLine(text, "peregrine_request_body_bytes_total 7.0");
        assertLine(text, "peregrine_response_body_bytes_total 14.0");
        assertLine(text, "peregrine_requests_in_flight 2.0");
        assertLine(text, "peregrine_worker_requests_in_flight{worker=\"1\"} 2.0");
        assertLine(text, "peregrine_worker_requests_in_flight{worker=\"2\"} 0.0");
        assertLine(text, "peregrine_worker_connections_active{worker=\"2\"} 1.0");
        assertLine(text, "peregrine_connections_active 1.0");
        assertLine(text, "peregrine_worker_starts_total 2.0");
        assertLine(text, "peregrine_webtransport_datagrams_dropped_total 2.0");
        assertLine(text, "peregrine_python_wait_seconds_count 0");
    }

    @Test
    void acmeOrdersAreSummedOverSlotsByNameAndOutcome() {
        MetricsStore store = MetricsStore.offHeap(2);
        AcmeMetrics.register(java.util.List.of("a.example", "b.example"));
        try {
            MetricsExporter exporter = new MetricsExporter(store);
            store.recorder(0).acmeOrder(1, true);
            store.recorder(1).acmeOrder(1, true);
            store.recorder(1).acmeOrder(0, false);
            store.recorder(1).acmeOrder(MetricsLayout.ACME_NAMES, true); // past the counted names: ignored
            String text = exporter.scrape(TEXT);
            assertLine(text, "peregrine_acme_orders_total{domain=\"b.example\",outcome=\"issued\"} 2.0");
            assertLine(text, "peregrine_acme_orders_total{domain=\"a.example\",outcome=\"failed\"} 1.0");
            assertLine(text, "peregrine_acme_orders_total{domain=\"a.example\",outcome=\"issued\"} 0.0");
        } finally {
            AcmeMetrics.register(java.util.List.of());
        }
    }

    @Test
    void certificateExpiryIsTheLatestAnyWorkerServesAndNaNWhileNoneHasOne() {
        MetricsStore store = MetricsStore.offHeap(3);
        AcmeMetrics.register(java.util.List.of("a.example", "b.example"));
        try {
            MetricsExporter exporter = new MetricsExporter(store);
            store.recorder(0).certificateExpires(0, 1_800_000_000L);
            store.recorder(2).certificateExpires(0, 1_900_000_000L); // renewed in this worker first
            String text = exporter.scrape(TEXT);
            assertLine(text, "peregrine_certificate_expiry_timestamp_seconds{domain=\"a.example\"} 1.9E9");
            assertLine(text, "peregrine_certificate_expiry_timestamp_seconds{domain=\"b.example\"} NaN");
            store.clearGauges(2); // that worker exited
            assertLine(exporter.scrape(TEXT), "peregrine_certificate_expiry_timestamp_seconds{domain=\"a.example\"} 1.8E9");
        } finally {
            AcmeMetrics.register(java.util.List.of());
        }
    }

    @Test
    void openMetricsWhenTheScraperAsksForIt() {
        String type = MetricsExporter.contentType("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5");
        assertTrue(type.startsWith("application/openmetrics-text"));
        String text = new MetricsExporter(MetricsStore.offHeap(1)).scrape(type);
        assertTrue(text.endsWith("# EOF\n"), text);
        assertTrue(text.contains("# UNIT peregrine_request_duration_seconds seconds"), text);
    }

    private static void assertLine(String text, String line) {
        assertTrue(text.lines().anyMatch(line::equals), "no line '" + line + "' in:\n" + text);
    }
}
