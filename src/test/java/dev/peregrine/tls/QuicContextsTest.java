package dev.peregrine.tls;

import dev.peregrine.acme.CertificateManager;
import dev.peregrine.config.AcmeSettings;
import io.netty.incubator.codec.quic.QuicSslContext;
import io.netty.util.DomainWildcardMappingBuilder;
import org.bouncycastle.openssl.jcajce.JcaPEMWriter;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.shredzone.acme4j.Identifier;
import org.shredzone.acme4j.util.CertificateUtils;
import org.shredzone.acme4j.util.KeyPairUtils;

import java.io.StringWriter;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyPair;
import java.security.Security;
import java.security.cert.X509Certificate;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

/** The choice of HTTP/3's certificate by SNI: pairs, ACME names, and the defaults for no name or an unknown one. */
class QuicContextsTest {
    @TempDir
    Path dir;

    @BeforeAll
    static void provider() {
        if (Security.getProvider("BC") == null) Security.addProvider(new org.bouncycastle.jce.provider.BouncyCastleProvider());
    }

    @Test
    void withAcmeOnlyTheFirstNameWithACertificateAnswersNoNameAndUnknownNames() throws Exception {
        writeCertificate("a.example");
        // b.example comes first but has no certificate yet. The fallback is there, and unused: a.example has one.
        QuicContexts contexts = new QuicContexts(acme("b.example", "a.example"), FallbackCertificate.generate(), new RefusalLog());
        QuicSslContext a = contexts.map("a.example");
        assertNotNull(a);
        assertSame(a, contexts.map("A.Example"), "made once per certificate, and names are matched in lower case");
        assertSame(a, contexts.map(null), "a client that sends no name (an IP address)");
        assertSame(a, contexts.map("unknown.example"));
        assertNull(contexts.map("b.example"), "a name still waiting for its certificate is refused");
    }

    @Test
    void pairsAnswerTheirNamesAndTheFirstPairIsTheDefault() throws Exception {
        writeCertificate("a.example");
        QuicContexts contexts = new QuicContexts(acme("a.example"), null, new RefusalLog());
        Pair firstPair = selfSigned("first.example");
        QuicSslContext first = QuicContexts.context(firstPair.chain, firstPair.key);
        Pair second = selfSigned("second.example");
        QuicSslContext secondContext = QuicContexts.context(second.chain, second.key);
        contexts.pairs(new DomainWildcardMappingBuilder<>(first).add("second.example", secondContext).build());
        assertSame(secondContext, contexts.map("second.example"));
        assertSame(first, contexts.map(null));
        assertSame(first, contexts.map("unknown.example"));
        QuicSslContext acme = contexts.map("a.example");
        assertNotNull(acme);
        assertNotNull(contexts.engines(), "one engine provider for every connection");
        assertSame(acme, contexts.map("a.example"));
    }

    @Test
    void beforeAnyAcmeCertificateOnlyAClientSendingNoNameGetsTheSelfSignedFallback() throws Exception {
        FallbackCertificate fallback = FallbackCertificate.generate();
        X509Certificate certificate = fallback.certified().chain()[0];
        assertEquals(certificate.getSubjectX500Principal(), certificate.getIssuerX500Principal(), "self-signed");
        certificate.verify(certificate.getPublicKey());
        assertEquals("EC", certificate.getPublicKey().getAlgorithm());
        assertEquals(256, ((java.security.interfaces.ECPublicKey) certificate.getPublicKey()).getParams().getCurve().getField().getFieldSize());
        QuicContexts contexts = new QuicContexts(acme("a.example"), fallback, new RefusalLog());
        QuicSslContext noName = contexts.map(null);
        assertNotNull(noName, "a probe to an IP address");
        assertSame(noName, contexts.map(null), "made once");
        assertNull(contexts.map("a.example"), "a name still waiting for its certificate is refused");
        assertNull(contexts.map("unknown.example"), "a name is never answered with the fallback");
        assertNull(new QuicContexts(acme("a.example"), null, new RefusalLog()).map(null), "without a fallback, refused as before");
    }

    private CertificateManager acme(String... names) {
        return CertificateManager.open(new AcmeSettings(List.of(names), null, dir, URI.create("https://ca.invalid/dir"), null), false);
    }

    private void writeCertificate(String name) throws Exception {
        Pair pair = selfSigned(name);
        StringWriter pem = new StringWriter();
        try (JcaPEMWriter writer = new JcaPEMWriter(pem)) {
            writer.writeObject(pair.key);
            writer.writeObject(pair.chain[0]);
        }
        Files.writeString(dir.resolve(name + ".pem"), pem.toString());
    }

    private record Pair(X509Certificate[] chain, java.security.PrivateKey key) {}

    private static Pair selfSigned(String name) throws Exception {
        KeyPair key = KeyPairUtils.createKeyPair(2048); // acme4j signs its tls-alpn-01 certificate with SHA256withRSA
        X509Certificate certificate = CertificateUtils.createTlsAlpn01Certificate(key, Identifier.dns(name), new byte[32]);
        return new Pair(new X509Certificate[] {certificate}, key.getPrivate());
    }
}
