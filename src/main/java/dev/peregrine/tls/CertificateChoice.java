package dev.peregrine.tls;

import dev.peregrine.acme.CertificateManager;
import dev.peregrine.acme.CertifiedKey;
import io.netty.util.Mapping;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Which certificate a handshake gets for the name it asks for, the same for TCP TLS and for QUIC, each
 * with its own kind of context {@code C}: an ACME name gets its current certificate (refused while it has
 * none), any other name the --tls-cert pair that carries it or the first pair, and without pairs the
 * first ACME name that has a certificate; while none has one, a handshake without a name gets the
 * {@link FallbackCertificate} (a probe to an IP address) and one with another name is refused.
 *
 * <p>The context of an ACME certificate is made on the first handshake after the certificate changed:
 * on the I/O thread, once per certificate (a few milliseconds), so that every worker switches to a
 * renewed certificate with its next handshake and no worker needs telling.
 */
final class CertificateChoice<C> {
    /** Makes the context of one certificate; a failure refuses the handshakes that need it. */
    interface ContextMaker<C> {
        C make(CertifiedKey certified) throws Exception;
    }

    /** Null without --acme-domain. */
    private final CertificateManager acme;
    private final ContextMaker<C> maker;
    private final Map<String, Served<C>> contexts = new ConcurrentHashMap<>();
    /** Null without --acme-domain or with --tls-cert pairs: then something else answers a handshake without a name. */
    private final FallbackCertificate fallback;
    private volatile C fallbackContext;

    CertificateChoice(CertificateManager acme, FallbackCertificate fallback, ContextMaker<C> maker) {
        this.acme = acme;
        this.fallback = fallback;
        this.maker = maker;
    }

    /** {@code pairsByName}: the pairs' contexts with the first as default, or null without pairs. */
    C choose(String hostname, Mapping<String, C> pairsByName) throws NoCertificate {
        if (acme != null && hostname != null && acme.manages(hostname)) {
            CertifiedKey certified = acme.certificate(hostname);
            if (certified == null) throw new NoCertificate(NoCertificate.HANDSHAKE_FAILURE, "no certificate for " + hostname + " yet, ACME is obtaining it");
            return contextOf(hostname, certified);
        }
        if (pairsByName != null) return pairsByName.map(hostname);
        if (acme != null) {
            for (String name : acme.domains()) {
                CertifiedKey certified = acme.certificate(name);
                if (certified != null) return contextOf(name, certified);
            }
        }
        if (hostname == null && fallback != null) return fallbackContext();
        throw new NoCertificate(NoCertificate.UNRECOGNIZED_NAME, hostname == null ? "the client sent no server name, and no certificate is ready"
                : "no certificate for " + hostname);
    }

    /** The context of {@code certified}, the certificate of {@code name}, made when it is first asked for. */
    C contextOf(String name, CertifiedKey certified) throws NoCertificate {
        Served<C> served = contexts.get(name);
        if (served != null && served.certified() == certified) return served.context();
        try {
            C context = maker.make(certified);
            contexts.put(name, new Served<>(certified, context));
            return context;
        } catch (Exception e) {
            throw new NoCertificate(NoCertificate.HANDSHAKE_FAILURE, "the certificate of " + name + " cannot be used: " + e.getMessage());
        }
    }

    /** The fallback's context, made by the first handshake that needs it. */
    private C fallbackContext() throws NoCertificate {
        C context = fallbackContext;
        if (context != null) return context;
        try {
            context = maker.make(fallback.certified());
        } catch (Exception e) {
            throw new NoCertificate(NoCertificate.HANDSHAKE_FAILURE, "the fallback certificate cannot be used: " + e.getMessage());
        }
        fallbackContext = context;
        fallback.announce();
        return context;
    }

    private record Served<C>(CertifiedKey certified, C context) {}
}
