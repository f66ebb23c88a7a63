package dev.peregrine.tls;

import dev.peregrine.acme.CertificateManager;
import dev.peregrine.acme.CertifiedKey;
import io.netty.incubator.codec.http3.Http3;
import io.netty.incubator.codec.quic.QuicChannel;
import io.netty.incubator.codec.quic.QuicSslContext;
import io.netty.incubator.codec.quic.QuicSslContextBuilder;
import io.netty.incubator.codec.quic.QuicSslEngine;
import io.netty.util.Mapping;
import org.jboss.logging.Logger;

import java.security.PrivateKey;
import java.security.cert.X509Certificate;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;

/**
 * HTTP/3's certificates, chosen by SNI as for TCP: the --tls-cert pair that carries the name, the
 * current certificate of an --acme-domain, or the default (the first pair; without pairs, the first
 * ACME name that has a certificate).
 *
 * <p>Every QUIC connection starts on one context made by {@code buildForServerWithSni}. BoringSSL
 * calls its server-name callback for every ClientHello, with a null name when the client sent none
 * (an IP address), and {@link #map} answers with the context to move the connection to; null
 * refuses the handshake with a fatal alert. This runs on the connection's I/O thread, so the
 * context of a renewed ACME certificate is made there by the first handshake that needs it, once
 * per certificate and worker, as for TCP: no worker needs telling.
 */
final class QuicContexts implements Mapping<String, QuicSslContext> {
    private static final Logger LOG = Logger.getLogger("peregrine");

    /** Null without --acme-domain. */
    private final CertificateManager acme;
    private final RefusalLog refusals;
    /** The context of each ACME name's current certificate. */
    private final Map<String, Served> managed = new ConcurrentHashMap<>();
    /** The pairs' contexts by name, the first pair's as default; null without --tls-cert pairs. */
    private volatile Mapping<String, QuicSslContext> pairsByName;
    private final QuicSslContext bySni;

    QuicContexts(CertificateManager acme, RefusalLog refusals) {
        this.acme = acme;
        this.refusals = refusals;
        this.bySni = QuicSslContextBuilder.buildForServerWithSni(this);
    }

    /** A QUIC server context for one certificate, offering HTTP/3 by ALPN. */
    static QuicSslContext context(X509Certificate[] chain, PrivateKey key) {
        return QuicSslContextBuilder.forServer(key, null, chain)
                .applicationProtocols(Http3.supportedApplicationProtocols())
                .build();
    }

    /** Puts the pairs' contexts in use for new connections (at start and after SIGHUP). */
    void pairs(Mapping<String, QuicSslContext> byName) {
        pairsByName = byName;
    }

    /** The TLS engine of each new QUIC connection; its certificate is chosen during its handshake. */
    Function<QuicChannel, QuicSslEngine> engines() {
        return channel -> bySni.newEngine(channel.alloc());
    }

    @Override
    public QuicSslContext map(String serverName) {
        // Lower case as Netty's SniHandler gives names on TCP: the ACME names and the pairs' names are.
        String hostname = serverName == null ? null : serverName.toLowerCase(Locale.ROOT);
        try {
            return choose(hostname);
        } catch (RuntimeException e) { // A failure here would end the handshake without a word.
            LOG.errorf(e, "QUIC handshake for %s: cannot choose a certificate", hostname);
            return null;
        }
    }

    private QuicSslContext choose(String hostname) {
        if (acme != null && hostname != null && acme.manages(hostname)) {
            CertifiedKey certified = acme.certificate(hostname);
            if (certified == null) return refuse(hostname, "no certificate for " + hostname + " yet, ACME is obtaining it");
            return contextOf(hostname, certified);
        }
        Mapping<String, QuicSslContext> pairs = pairsByName;
        if (pairs != null) return pairs.map(hostname);
        if (acme != null) {
            for (String name : acme.domains()) {
                CertifiedKey certified = acme.certificate(name);
                if (certified != null) return contextOf(name, certified);
            }
        }
        return refuse(String.valueOf(hostname), hostname == null ? "the client sent no server name, and no certificate is ready"
                : "no certificate for " + hostname);
    }

    /** The context of {@code certified}, made when it is first asked for: the certificate changed, or this is its first handshake. */
    private QuicSslContext contextOf(String name, CertifiedKey certified) {
        Served served = managed.get(name);
        if (served != null && served.certified() == certified) return served.context();
        try {
            QuicSslContext context = context(certified.chain(), certified.key());
            managed.put(name, new Served(certified, context));
            return context;
        } catch (RuntimeException e) {
            return refuse(name, "the certificate of " + name + " cannot be used: " + e.getMessage());
        }
    }

    private QuicSslContext refuse(String name, String reason) {
        // The server-name callback does not tell the client's address.
        refusals.refused(name, "QUIC handshake for " + name, reason);
        return null;
    }

    private record Served(CertifiedKey certified, QuicSslContext context) {}
}
