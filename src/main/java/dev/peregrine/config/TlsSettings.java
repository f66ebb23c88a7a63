package dev.peregrine.config;

import java.nio.file.Path;
import java.util.List;

/**
 * TLS, off when {@code certificates} is empty and {@code acme} null. The first pair is the default
 * certificate, the others are chosen by SNI, as are the names of {@code acme} (null without
 * --acme-domain). {@code redirectHttpPort} is null without a redirect port, {@code hstsSeconds} -1
 * when no Strict-Transport-Security header is added.
 */
public record TlsSettings(List<CertificatePair> certificates, String ciphers, Integer redirectHttpPort, long hstsSeconds, AcmeSettings acme) {

    /** One --tls-cert and the --tls-key given with it. */
    public record CertificatePair(Path certificate, Path key) {}

    public boolean enabled() {
        return !certificates.isEmpty() || acme != null;
    }
}
