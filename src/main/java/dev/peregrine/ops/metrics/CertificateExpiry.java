package dev.peregrine.ops.metrics;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.DoubleSupplier;

/**
 * The expiry time of each certificate the server obtains itself (--acme-domain), for the
 * {@code peregrine_certificate_expiry_timestamp_seconds{domain}} gauge. The process's certificate
 * manager registers each name; the exporter of the same process (a worker's, or the supervisor's)
 * reads them when scraped. A registry rather than a constructor argument because the exporters are
 * made below the layer that knows the certificates.
 */
public final class CertificateExpiry {
    private static final Map<String, DoubleSupplier> EXPIRY = new ConcurrentHashMap<>();

    private CertificateExpiry() {}

    /** {@code expirySeconds} gives the Unix time the name's certificate expires, or NaN while it has none. */
    public static void register(String domain, DoubleSupplier expirySeconds) {
        EXPIRY.put(domain, expirySeconds);
    }

    static Map<String, DoubleSupplier> registered() {
        return EXPIRY;
    }
}
