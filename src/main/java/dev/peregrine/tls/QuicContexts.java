package dev.peregrine.tls;

import dev.peregrine.acme.CertificateManager;
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
import java.util.function.Function;

/**
 * HTTP/3's certificates, chosen by SNI as for TCP: the --tls-cert pair that carries the name, the
 * current certificate of an --acme-domain, or the default (the first pair; without pairs, the first
 * ACME name that has a certificate, and while none has one the {@link FallbackCertificate} for a
 * client that sends no name).
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

    private final RefusalLog refusals;
    private final CertificateChoice<QuicSslContext> choice;
    /** The pairs' contexts by name, the first pair's as default; null without --tls-cert pairs. */
    private volatile Mapping<String, QuicSslContext> pairsByName;
    private final QuicSslContext bySni;

    QuicContexts(CertificateManager acme, FallbackCertificate fallback, RefusalLog refusals) {
        this.refusals = refusals;
        this.choice = new CertificateChoice<>(acme, fallback, certified -> context(certified.chain(), certified.key()));
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
            return choice.choose(hostname, pairsByName);
        } catch (NoCertificate refusal) {
            // The server-name callback does not tell the client's address. Null refuses the handshake.
            refusals.refused(String.valueOf(hostname), "QUIC handshake for " + hostname, refusal.getMessage());
            return null;
        } catch (RuntimeException e) { // A failure here would end the handshake without a word.
            LOG.errorf(e, "QUIC handshake for %s: cannot choose a certificate", hostname);
            return null;
        }
    }
}
