package dev.peregrine.acme;

import java.io.IOException;
import java.net.URL;
import java.security.KeyPair;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;

/**
 * Where the ACME account, the certificates, the order locks, the back-off and the pending tls-alpn-01
 * certificates live, shared by every process that serves the same names: the --acme-cache directory
 * ({@link AcmeCache}), which the workers of one host share and servers mounting one volume too, or
 * --shared-store ({@link StoreAcmeStorage}), which replicas without a common volume share.
 */
interface AcmeStorage {
    /** The account key, created and saved by the first process ever to ask; every later one reads that one. */
    KeyPair accountKey() throws IOException;

    /** Null before the account is registered. */
    URL accountUrl() throws IOException;

    void saveAccountUrl(URL url) throws IOException;

    /**
     * What stands for the current content of {@code name}'s certificate: equal to the last one read when
     * nothing changed, so that the certificate is parsed again only when it did. Null when there is none.
     */
    Object certificateVersion(String name) throws IOException;

    /** {@code name}'s certificate as of {@code version} (from {@link #certificateVersion}), or null when it is gone. */
    CertifiedKey certificate(String name, Object version) throws IOException;

    void saveCertificate(String name, CertifiedKey certified) throws IOException;

    /** The storage no longer holds the certificate this process serves (a store restarted without persistence). */
    default void lost(String name, CertifiedKey served) throws IOException {}

    /** Failed orders for {@code name} in a row; {@link Backoff#NONE} when it cannot be read. */
    Backoff backoff(String name);

    void saveBackoff(String name, Backoff backoff) throws IOException;

    void clearBackoff(String name) throws IOException;

    /**
     * The right to order for {@code name}, held until closed while a heartbeat on {@code scheduler} keeps
     * it; null when another process holds it. A holder that died loses it within 30 s.
     */
    Lock tryLock(String name, ScheduledExecutorService scheduler) throws IOException;

    /** The tls-alpn-01 certificate of a pending authorization, for whichever process the CA's connection reaches. */
    void saveChallenge(String name, CertifiedKey validation) throws IOException;

    void deleteChallenge(String name) throws IOException;

    /**
     * The pending tls-alpn-01 certificate of {@code name}, or null: asked on an I/O thread, during the
     * handshake of the CA's connection, so it may complete later but never blocks.
     */
    CompletableFuture<CertifiedKey> challenge(String name);

    /** An order lock; closing it lets the next process order. */
    interface Lock extends AutoCloseable {
        @Override
        void close() throws IOException;
    }
}
