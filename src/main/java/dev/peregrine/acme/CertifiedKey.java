package dev.peregrine.acme;

import org.bouncycastle.asn1.pkcs.PrivateKeyInfo;
import org.bouncycastle.cert.X509CertificateHolder;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.openssl.PEMKeyPair;
import org.bouncycastle.openssl.PEMParser;
import org.bouncycastle.openssl.jcajce.JcaPEMKeyConverter;
import org.bouncycastle.openssl.jcajce.JcaPEMWriter;

import java.io.IOException;
import java.io.StringReader;
import java.io.StringWriter;
import java.security.GeneralSecurityException;
import java.security.PrivateKey;
import java.security.cert.X509Certificate;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

/**
 * A certificate chain (leaf first) and its private key, stored as one PEM text (the key, then the chain)
 * so that they change together.
 */
public record CertifiedKey(X509Certificate[] chain, PrivateKey key) {
    /** The key and chain of {@code pem}; {@code where} names its file or key in the failure's message. */
    static CertifiedKey fromPem(String pem, String where) throws Corrupt {
        PrivateKey key = null;
        List<X509Certificate> chain = new ArrayList<>();
        try (PEMParser parser = new PEMParser(new StringReader(pem))) {
            JcaPEMKeyConverter keys = new JcaPEMKeyConverter();
            JcaX509CertificateConverter certificates = new JcaX509CertificateConverter();
            for (Object object = parser.readObject(); object != null; object = parser.readObject()) {
                if (object instanceof PEMKeyPair pair) key = keys.getKeyPair(pair).getPrivate();
                else if (object instanceof PrivateKeyInfo info) key = keys.getPrivateKey(info);
                else if (object instanceof X509CertificateHolder holder) chain.add(certificates.getCertificate(holder));
            }
        } catch (IOException | GeneralSecurityException | RuntimeException e) {
            throw new Corrupt(where, e);
        }
        if (key == null || chain.isEmpty()) throw new Corrupt(where, new IOException(key == null ? "no private key" : "no certificate"));
        return new CertifiedKey(chain.toArray(X509Certificate[]::new), key);
    }

    String toPem() throws IOException {
        StringWriter pem = new StringWriter();
        try (JcaPEMWriter writer = new JcaPEMWriter(pem)) {
            writer.writeObject(key);
            for (X509Certificate certificate : chain) writer.writeObject(certificate);
        }
        return pem.toString();
    }

    /** Stored content that exists but cannot be used; the message names where it is. */
    static final class Corrupt extends IOException {
        Corrupt(String where, Exception cause) {
            super(where + " is corrupt (" + (cause.getMessage() != null ? cause.getMessage() : cause.getClass().getSimpleName()) + ")", cause);
        }
    }

    public Instant notAfter() {
        return chain[0].getNotAfter().toInstant();
    }

    public Instant notBefore() {
        return chain[0].getNotBefore().toInstant();
    }

    public String serial() {
        return chain[0].getSerialNumber().toString(16);
    }
}
