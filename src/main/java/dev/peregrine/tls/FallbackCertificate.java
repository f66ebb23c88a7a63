package dev.peregrine.tls;

import dev.peregrine.acme.CertifiedKey;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.operator.OperatorCreationException;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;
import org.jboss.logging.Logger;
import org.shredzone.acme4j.util.KeyPairUtils;

import java.math.BigInteger;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.SecureRandom;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.time.Instant;
import java.util.Date;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The self-signed certificate that a handshake without a server name gets when no other certificate
 * would answer it: with --acme-domain names only, before the first one has its certificate. Such a
 * handshake is a probe to an IP address (a kubelet HTTPS probe verifies no certificate), which then
 * reaches the health check and the application instead of an alert. A name, ACME or other, never gets
 * it: a name still waiting for its certificate is refused as before.
 *
 * <p>Made in memory at startup, an ECDSA P-256 key and a certificate signed by it, shared by TCP and
 * QUIC. acme4j's certificate maker (the tls-alpn-01 one) signs with RSA only, hence Bouncy Castle here.
 */
final class FallbackCertificate {
    private static final Logger LOG = Logger.getLogger("peregrine");
    /** The only name in it: .invalid (RFC 6761) cannot be anybody's. */
    static final String SUBJECT = "CN=peregrine-fallback.invalid";

    private final CertifiedKey certified;
    private final AtomicBoolean announced = new AtomicBoolean();

    private FallbackCertificate(CertifiedKey certified) {
        this.certified = certified;
    }

    /** A new key and certificate, valid from an hour ago (clocks differ) for ten years. */
    static FallbackCertificate generate() {
        // The key kind of the ACME certificates (AcmeClient), through Bouncy Castle's provider that CertificateManager.open adds.
        KeyPair key = KeyPairUtils.createECKeyPair("secp256r1");
        Instant notBefore = Instant.now().minus(Duration.ofHours(1));
        X500Name name = new X500Name(SUBJECT);
        try {
            X509Certificate certificate = new JcaX509CertificateConverter().getCertificate(new JcaX509v3CertificateBuilder(
                    name, new BigInteger(64, new SecureRandom()), Date.from(notBefore), Date.from(notBefore.plus(Duration.ofDays(3650))),
                    name, key.getPublic())
                    .build(new JcaContentSignerBuilder("SHA256withECDSA").build(key.getPrivate())));
            return new FallbackCertificate(new CertifiedKey(new X509Certificate[] {certificate}, key.getPrivate()));
        } catch (GeneralSecurityException | OperatorCreationException e) {
            throw new IllegalStateException("cannot make the fallback TLS certificate: " + e.getMessage(), e);
        }
    }

    CertifiedKey certified() {
        return certified;
    }

    /** Logs, once per process, that the fallback is in use. */
    void announce() {
        if (announced.compareAndSet(false, true)) {
            LOG.info("TLS: handshakes without a server name (a probe to an IP address) get a self-signed fallback certificate"
                    + " until an --acme-domain certificate exists; handshakes naming a name still waiting for its certificate stay refused");
        }
    }
}
