package dev.peregrine.metrics;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.prometheus.metrics.model.registry.Collector;
import io.prometheus.metrics.model.snapshots.ClassicHistogramBuckets;
import io.prometheus.metrics.model.snapshots.HistogramSnapshot;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import io.prometheus.metrics.model.snapshots.Unit;

import java.util.BitSet;
import java.util.List;
import java.util.function.ToDoubleFunction;

import static dev.peregrine.metrics.MetricsLayout.*;

/**
 * Presents a {@link MetricsStore} as Prometheus metrics through Micrometer. Every meter reads the
 * shared memory when scraped and sums it over all slots, so the numbers are those of every worker
 * whichever process serves the scrape; in-flight requests and open connections also appear per worker.
 *
 * <p>Series appear once they have something to say: a method, status class and protocol combination
 * once a request had it, a worker once a slot was assigned to it. Not thread-safe: one thread scrapes.
 */
public final class MetricsExporter {
    private final MetricsStore store;
    private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    private final BitSet requestSeries = new BitSet(REQUEST_CELLS);
    private final BitSet workerSeries = new BitSet();
    /** How many names' order counters and expiry gauges are registered. */
    private int acmeSeries;

    public MetricsExporter(MetricsStore store) {
        this.store = store;
        counter("peregrine.connections", "Connections accepted", CONNECTIONS_TOTAL).register(registry);
        counter("peregrine.request.body", "Request body bytes received", REQUEST_BODY_BYTES).baseUnit("bytes").register(registry);
        counter("peregrine.response.body", "Response body bytes sent, chunked framing included", RESPONSE_BODY_BYTES)
                .baseUnit("bytes").register(registry);
        counter("peregrine.rate.limited", "Requests answered 429 by --rate-limit", RATE_LIMITED).register(registry);
        counter("peregrine.rate.limit.untracked", "Requests --rate-limit let through uncounted: no room in its table", RATE_LIMIT_UNTRACKED)
                .register(registry);
        counter("peregrine.rate.limit.forgotten", "Clients with part of their --rate-limit budget spent, forgotten to make room",
                RATE_LIMIT_FORGOTTEN).register(registry);
        counter("peregrine.cache.hits", "GET and HEAD requests answered by the response cache", CACHE_HITS).register(registry);
        counter("peregrine.cache.misses", "GET and HEAD requests the response cache passed to the application", CACHE_MISSES).register(registry);
        counter("peregrine.cache.stores", "Responses the response cache stored", CACHE_STORES).register(registry);
        counter("peregrine.cache.evictions", "Entries the response cache dropped to make room", CACHE_EVICTIONS).register(registry);
        gauge("peregrine.cache.held", "Bytes of the entries the response cache holds", s -> s.sum(CACHE_BYTES_STORED) - s.sum(CACHE_BYTES_RELEASED))
                .baseUnit("bytes").register(registry);
        counter("peregrine.compressed.responses", "Response bodies --compress compressed (a cache hit sent from a stored coded variant is none)",
                COMPRESSED).register(registry);
        counter("peregrine.webtransport.datagrams.dropped",
                "WebTransport datagrams dropped on arrival: their session held as many unreceived by the application as it may",
                WEBTRANSPORT_DATAGRAMS_DROPPED).register(registry);
        for (int operation = 0; operation < STORE_OPERATIONS.length; operation++) {
            counter("peregrine.shared.store.errors", "Operations on --shared-store that failed or timed out (the request was served without it)",
                    STORE_ERRORS + operation).tag("operation", STORE_OPERATIONS[operation]).register(registry);
        }
        gauge("peregrine.connections.active", "Connections open now", s -> s.sum(CONNECTIONS_ACTIVE)).register(registry);
        gauge("peregrine.requests.in.flight", "Requests received and not yet answered in full", s -> s.sum(REQUESTS_IN_FLIGHT))
                .register(registry);
        headerCounter("peregrine.worker.starts", "Worker processes started", WORKER_STARTS);
        headerCounter("peregrine.worker.exits", "Worker processes that exited", WORKER_EXITS);
        headerCounter("peregrine.worker.restarts", "Worker processes started again after one exited unasked", WORKER_RESTARTS);
        registry.getPrometheusRegistry().register(new StoredHistogram("peregrine_request_duration_seconds",
                "Time from a request's head arriving to its response being written in full", DURATION_BOUNDS, DURATION_BUCKETS,
                DURATION_SUM_NANOS));
        registry.getPrometheusRegistry().register(new StoredHistogram("peregrine_python_wait_seconds",
                "Time a request ready on the Java side waited for the Python thread to start it", PYTHON_WAIT_BOUNDS,
                PYTHON_WAIT_BUCKETS, PYTHON_WAIT_SUM_NANOS));
        registry.getPrometheusRegistry().register(new StoredHistogram("peregrine_shared_store_round_trip_seconds",
                "Time from a command to --shared-store being sent to its answer", STORE_ROUND_TRIP_BOUNDS, STORE_ROUND_TRIP_BUCKETS,
                STORE_ROUND_TRIP_SUM_NANOS));
    }

    /** The exposition in the given format: Prometheus text 0.0.4 or OpenMetrics (see {@link #contentType}). */
    public String scrape(String contentType) {
        registerNewSeries();
        registerCertificateSeries();
        return registry.scrape(contentType);
    }

    /** The format to answer with for an Accept header: OpenMetrics when the scraper prefers it, else the text format. */
    public static String contentType(String accept) {
        if (accept != null && accept.contains("application/openmetrics-text")) {
            return "application/openmetrics-text; version=1.0.0; charset=utf-8";
        }
        return "text/plain; version=0.0.4; charset=utf-8";
    }

    private void registerNewSeries() {
        for (int m = 0; m < METHODS.length; m++) {
            for (int s = 0; s < STATUS_CLASSES.length; s++) {
                for (int p = 0; p < PROTOCOLS.length; p++) {
                    int cell = requestCell(m, s, p);
                    if (requestSeries.get(cell) || store.sum(REQUESTS + cell) == 0) continue;
                    requestSeries.set(cell);
                    counter("peregrine.requests", "Requests answered, by method, status class and protocol", REQUESTS + cell)
                            .tags("method", METHODS[m], "status", STATUS_CLASSES[s], "protocol", PROTOCOLS[p])
                            .register(registry);
                }
            }
        }
        for (int slot = 0; slot < store.slots(); slot++) {
            int worker = store.workerOf(slot);
            if (worker < 1 || workerSeries.get(worker)) continue;
            workerSeries.set(worker);
            String label = Integer.toString(worker);
            gauge("peregrine.worker.connections.active", "Connections open now in one worker",
                    s -> s.sumForWorker(worker, CONNECTIONS_ACTIVE)).tag("worker", label).register(registry);
            gauge("peregrine.worker.requests.in.flight", "Requests in flight in one worker",
                    s -> s.sumForWorker(worker, REQUESTS_IN_FLIGHT)).tag("worker", label).register(registry);
        }
    }

    private void registerCertificateSeries() {
        List<String> names = AcmeMetrics.registered();
        for (int name = acmeSeries; name < names.size(); name++) {
            String domain = names.get(name);
            int expiry = CERTIFICATE_EXPIRY + name;
            // The latest any worker serves: during a renewal, some workers take the new certificate a poll before others.
            gauge("peregrine.certificate.expiry.timestamp", "When the certificate obtained by ACME for a name expires (Unix time)",
                    s -> s.max(expiry) > 0 ? s.max(expiry) : Double.NaN).baseUnit("seconds").tag("domain", domain).register(registry);
            // Both outcomes from the start, at zero: an alert on failures needs the series before the first one.
            for (String outcome : new String[] {"issued", "failed"}) {
                int position = ACME_ORDERS + 2 * name + (outcome.equals("issued") ? 0 : 1);
                counter("peregrine.acme.orders", "ACME orders ended, by name and outcome (a certificate issued, or not)", position)
                        .tags("domain", domain, "outcome", outcome).register(registry);
            }
        }
        acmeSeries = names.size();
    }

    private FunctionCounter.Builder<MetricsStore> counter(String name, String help, int position) {
        return FunctionCounter.builder(name, store, s -> s.sum(position)).description(help);
    }

    private void headerCounter(String name, String help, int position) {
        FunctionCounter.builder(name, store, s -> s.header(position)).description(help).register(registry);
    }

    private Gauge.Builder<MetricsStore> gauge(String name, String help, ToDoubleFunction<MetricsStore> value) {
        return Gauge.builder(name, store, value).description(help);
    }

    /**
     * A Prometheus histogram whose buckets, sum and count are the store's, summed over slots. The
     * buckets are kept per bucket (one add per observation) and made cumulative here, which also keeps
     * the +Inf bucket equal to the count.
     */
    private final class StoredHistogram implements Collector {
        private final String name;
        private final String help;
        private final double[] upperBounds;
        private final int buckets;
        private final int sumNanos;

        StoredHistogram(String name, String help, long[] bounds, int buckets, int sumNanos) {
            this.name = name;
            this.help = help;
            this.upperBounds = boundsInSeconds(bounds);
            this.buckets = buckets;
            this.sumNanos = sumNanos;
        }

        @Override
        public MetricSnapshot collect() {
            long[] counts = new long[upperBounds.length];
            for (int i = 0; i < counts.length; i++) counts[i] = store.sum(buckets + i);
            return HistogramSnapshot.builder()
                    .name(name)
                    .help(help)
                    .unit(Unit.SECONDS)
                    .dataPoint(HistogramSnapshot.HistogramDataPointSnapshot.builder()
                            .classicHistogramBuckets(ClassicHistogramBuckets.of(upperBounds, counts))
                            .sum(Unit.nanosToSeconds(store.sum(sumNanos)))
                            .build())
                    .build();
        }

        @Override
        public String getPrometheusName() {
            return name;
        }
    }
}
