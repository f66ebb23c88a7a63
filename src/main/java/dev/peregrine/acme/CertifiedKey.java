package dev.peregrine.acme;

import java.security.PrivateKey;
import java.security.cert.X509Certificate;
import java.time.Instant;

/** A certificate chain (leaf first) and its private key, as one file of the cache holds them. */
public record CertifiedKey(X509Certificate[] chain, PrivateKey key) {
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
