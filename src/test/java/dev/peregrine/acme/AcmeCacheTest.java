package dev.peregrine.acme;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.shredzone.acme4j.Identifier;
import org.shredzone.acme4j.util.CertificateUtils;
import org.shredzone.acme4j.util.KeyPairUtils;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.KeyPair;
import java.security.Security;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The cache directory's files: written whole with mode 0600, read back, refused by name when damaged; the lock and the backoff. */
class AcmeCacheTest {
    private static ScheduledExecutorService scheduler;

    @TempDir
    Path dir;

    @BeforeAll
    static void provider() {
        Security.addProvider(new org.bouncycastle.jce.provider.BouncyCastleProvider());
        scheduler = Executors.newSingleThreadScheduledExecutor();
    }

    @AfterAll
    static void stop() {
        scheduler.shutdownNow();
    }

    @Test
    void aKeyAndChainAreWrittenOwnerOnlyAndReadBack() throws Exception {
        KeyPair key = KeyPairUtils.createKeyPair(2048);
        X509Certificate certificate = CertificateUtils.createTlsAlpn01Certificate(key, Identifier.dns("a.example"), new byte[32]);
        Path file = dir.resolve("a.example.pem");
        AcmeCache.write(file, new CertifiedKey(new X509Certificate[] {certificate}, key.getPrivate()));
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(file)));
        try (var leftovers = Files.list(dir)) {
            assertEquals(1, leftovers.count(), "no temporary file stays behind");
        }
        CertifiedKey read = AcmeCache.read(file);
        assertArrayEquals(certificate.getEncoded(), read.chain()[0].getEncoded());
        assertArrayEquals(key.getPrivate().getEncoded(), read.key().getEncoded());
        assertNull(AcmeCache.read(dir.resolve("missing.pem")));
    }

    @Test
    void aCorruptFileIsNamed() throws IOException {
        Path file = Files.writeString(dir.resolve("a.example.pem"), "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n");
        IOException e = assertThrows(CertifiedKey.Corrupt.class, () -> AcmeCache.read(file));
        assertTrue(e.getMessage().startsWith(file + " is corrupt"), e.getMessage());
        Files.writeString(file, "");
        assertTrue(assertThrows(CertifiedKey.Corrupt.class, () -> AcmeCache.read(file)).getMessage().contains("no private key"));
    }

    @Test
    void theAccountKeyIsMadeOnceAndKept() throws IOException {
        AcmeCache cache = new AcmeCache(dir);
        cache.create();
        KeyPair first = cache.accountKey();
        assertArrayEquals(first.getPublic().getEncoded(), cache.accountKey().getPublic().getEncoded());
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(dir.resolve("account.key"))));
        Files.writeString(dir.resolve("account.key"), "garbage");
        assertTrue(assertThrows(CertifiedKey.Corrupt.class, cache::accountKey).getMessage().startsWith(dir.resolve("account.key") + " is corrupt"));
    }

    @Test
    void theLockIsExclusiveUntilReleasedOrStale() throws IOException {
        Path file = dir.resolve("a.example.lock");
        OrderLock held = OrderLock.tryAcquire(file, scheduler);
        assertNotNull(held);
        assertNull(OrderLock.tryAcquire(file, scheduler), "a live holder keeps it");
        held.close();
        OrderLock again = OrderLock.tryAcquire(file, scheduler);
        assertNotNull(again);
        // A holder that died stops beating: past STALE its lock is taken over.
        again.close();
        Files.writeString(file, "12345\n");
        Files.setLastModifiedTime(file, FileTime.from(Instant.now().minus(OrderLock.STALE).minusSeconds(1)));
        try (OrderLock takenOver = OrderLock.tryAcquire(file, scheduler)) {
            assertNotNull(takenOver);
        }
    }

    @Test
    void theBackoffDoublesUpToItsCeilingAndSurvivesARestart() throws IOException {
        Instant now = Instant.ofEpochSecond(1_000_000);
        Backoff once = Backoff.NONE.failedAgain(now);
        assertEquals(1, once.failures());
        assertEquals(now.plus(Backoff.FIRST), once.next());
        Backoff twice = once.failedAgain(now);
        assertEquals(now.plus(Backoff.FIRST.multipliedBy(2)), twice.next());
        Backoff many = twice;
        for (int i = 0; i < 40; i++) many = many.failedAgain(now);
        assertEquals(now.plus(Backoff.LONGEST), many.next());
        AcmeCache cache = new AcmeCache(dir);
        cache.saveBackoff("a.example", twice);
        assertEquals(twice, cache.backoff("a.example"));
        assertEquals(Backoff.NONE, cache.backoff("missing.example"));
        assertEquals(Backoff.NONE, Backoff.parse("garbage"));
        assertEquals(many, twice.orLater(many));
        assertEquals(many, many.orLater(twice));
        assertTrue(Duration.between(now, many.next()).compareTo(Duration.ofDays(1)) < 0);
    }
}
