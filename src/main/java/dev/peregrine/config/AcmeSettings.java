package dev.peregrine.config;

import java.net.URI;
import java.nio.file.Path;
import java.util.List;

/**
 * Certificates obtained from an ACME CA (--acme-domain): the names, in lower case, the account's contact
 * address (null for none), the cache directory, the CA's directory URL and, when the CA's own HTTPS is
 * signed by a root the JDK does not know (a test CA), the PEM file of the roots to trust (else null).
 */
public record AcmeSettings(List<String> domains, String email, Path cache, URI directory, Path caBundle) {
    public static final Path DEFAULT_CACHE = Path.of("acme");
    public static final URI LETS_ENCRYPT = URI.create("https://acme-v02.api.letsencrypt.org/directory");
    public static final URI LETS_ENCRYPT_STAGING = URI.create("https://acme-staging-v02.api.letsencrypt.org/directory");
}
