package dev.peregrine.ops.metrics;

import java.util.List;

/**
 * The outcome of each ACME order, for the {@code peregrine_acme_orders_total{domain, outcome}}
 * counter. The certificate manager of each process registers the names (in --acme-domain order,
 * the same in every process, so that a position names the same domain in every slot) and counts
 * each order's end; the count goes into this process's slot of the shared metrics, so that whichever
 * process serves the port (a supervisor, or a lone worker) sums the orders of every worker. A
 * registry rather than a constructor argument, as with {@link CertificateExpiry}: the exporters are
 * made below the layer that knows the certificates.
 */
public final class AcmeOrders {
    private static volatile List<String> names = List.of();
    /** This process's slot; {@link RequestMetrics#OFF} when it counts nothing. */
    private static volatile RequestMetrics recorder = RequestMetrics.OFF;

    private AcmeOrders() {}

    public static void register(List<String> domains) {
        names = List.copyOf(domains);
    }

    /** An order for {@code domain} ended with a certificate ({@code issued}) or without. */
    public static void count(String domain, boolean issued) {
        recorder.acmeOrder(names.indexOf(domain), issued);
    }

    static void countInto(RequestMetrics slot) {
        recorder = slot;
    }

    /** The names counted, by position: the first {@link MetricsLayout#ACME_NAMES} of those registered. */
    static List<String> registered() {
        List<String> all = names;
        return all.subList(0, Math.min(all.size(), MetricsLayout.ACME_NAMES));
    }
}
