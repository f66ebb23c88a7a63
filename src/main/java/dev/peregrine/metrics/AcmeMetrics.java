package dev.peregrine.metrics;

import java.time.Instant;
import java.util.List;

/**
 * The outcome of each ACME order ({@code peregrine_acme_orders_total{domain, outcome}}) and when the
 * certificate each name is served with expires ({@code peregrine_certificate_expiry_timestamp_seconds{domain}}).
 * The certificate manager of each process registers the names (in --acme-domain order, the same in
 * every process, so that a position names the same domain in every slot), counts each order's end and
 * sets the expiry of what it serves; both go into this process's slot of the shared metrics, so that
 * whichever process serves the port (a supervisor, or a lone worker) sees every worker's, and a
 * supervisor needs no access to the certificates. A registry rather than a constructor argument: the
 * exporters are made below the layer that knows the certificates.
 */
public final class AcmeMetrics {
    private static volatile List<String> names = List.of();
    /** This process's slot; {@link RequestMetrics#OFF} when it counts nothing. */
    private static volatile RequestMetrics recorder = RequestMetrics.OFF;

    private AcmeMetrics() {}

    public static void register(List<String> domains) {
        names = List.copyOf(domains);
    }

    /** An order for {@code domain} ended with a certificate ({@code issued}) or without. */
    public static void count(String domain, boolean issued) {
        recorder.acmeOrder(names.indexOf(domain), issued);
    }

    /** {@code domain} is served with a certificate that expires at {@code notAfter}, or with none (null). */
    public static void serving(String domain, Instant notAfter) {
        recorder.certificateExpires(names.indexOf(domain), notAfter == null ? 0 : notAfter.getEpochSecond());
    }

    static void countInto(RequestMetrics slot) {
        recorder = slot;
    }

    /** The names counted and gauged, by position: the first {@link MetricsLayout#ACME_NAMES} of those registered. */
    static List<String> registered() {
        List<String> all = names;
        return all.subList(0, Math.min(all.size(), MetricsLayout.ACME_NAMES));
    }
}
