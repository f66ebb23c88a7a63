package dev.peregrine.acme;

import org.jboss.logging.Logger;
import org.shredzone.acme4j.util.KeyPairUtils;

import java.io.IOException;
import java.io.Reader;
import java.io.StringWriter;
import java.net.URI;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.KeyPair;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledExecutorService;

/**
 * The --acme-cache directory, shared by every worker and by every server mounting the same volume:
 * <pre>
 *   account.key          the ACME account's key pair
 *   account.url          the account's URL at the CA, so that it is not registered again
 *   NAME.pem             the private key and certificate chain of NAME, in one file so that they change together
 *   NAME.lock            held by the process ordering for NAME (see {@link OrderLock})
 *   NAME.backoff         failures in a row and the time of the next attempt
 *   challenges/NAME.pem  the tls-alpn-01 certificate of a pending authorization, read by every worker
 * </pre>
 * Every file is written to a temporary file of mode 0600 then renamed over the old one, so that a reader
 * sees the old content or the new, never half of it, and a crash leaves no truncated key.
 */
final class AcmeCache implements AcmeStorage {
    private static final Logger LOG = Logger.getLogger("peregrine");

    private final Path directory;
    private final Map<String, Challenge> challenges = new ConcurrentHashMap<>();

    AcmeCache(Path directory) {
        this.directory = directory;
    }

    void create() throws IOException {
        Files.createDirectories(directory.resolve("challenges"), PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
    }

    private Path certificateFile(String name) {
        return directory.resolve(name + ".pem");
    }

    private Path challengeFile(String name) {
        return directory.resolve("challenges").resolve(name + ".pem");
    }

    private Path backoffFile(String name) {
        return directory.resolve(name + ".backoff");
    }

    @Override
    public KeyPair accountKey() throws IOException {
        Path file = directory.resolve("account.key");
        if (Files.exists(file)) {
            try (Reader reader = Files.newBufferedReader(file, StandardCharsets.US_ASCII)) {
                return KeyPairUtils.readKeyPair(reader);
            } catch (IOException | RuntimeException e) {
                throw new CertifiedKey.Corrupt(file.toString(), e);
            }
        }
        KeyPair key = KeyPairUtils.createECKeyPair("secp256r1");
        StringWriter pem = new StringWriter();
        KeyPairUtils.writeKeyPair(key, pem);
        write(file, pem.toString());
        return key;
    }

    @Override
    public URL accountUrl() throws IOException {
        Path file = directory.resolve("account.url");
        if (!Files.exists(file)) return null;
        try {
            return URI.create(Files.readString(file).trim()).toURL();
        } catch (IllegalArgumentException e) {
            throw new CertifiedKey.Corrupt(file.toString(), e);
        }
    }

    @Override
    public void saveAccountUrl(URL url) throws IOException {
        write(directory.resolve("account.url"), url + "\n");
    }

    /** The file's modification time. */
    @Override
    public Object certificateVersion(String name) throws IOException {
        try {
            return Files.getLastModifiedTime(certificateFile(name));
        } catch (NoSuchFileException e) {
            return null;
        }
    }

    @Override
    public CertifiedKey certificate(String name, Object version) throws IOException {
        return read(certificateFile(name));
    }

    @Override
    public void saveCertificate(String name, CertifiedKey certified) throws IOException {
        write(certificateFile(name), certified);
    }

    @Override
    public Backoff backoff(String name) {
        try {
            return Backoff.parse(Files.readString(backoffFile(name)));
        } catch (IOException e) {
            return Backoff.NONE;
        }
    }

    @Override
    public void saveBackoff(String name, Backoff backoff) throws IOException {
        write(backoffFile(name), backoff.format());
    }

    @Override
    public void clearBackoff(String name) throws IOException {
        Files.deleteIfExists(backoffFile(name));
    }

    @Override
    public Lock tryLock(String name, ScheduledExecutorService scheduler) throws IOException {
        return OrderLock.tryAcquire(directory.resolve(name + ".lock"), scheduler);
    }

    @Override
    public void saveChallenge(String name, CertifiedKey validation) throws IOException {
        write(challengeFile(name), validation);
    }

    @Override
    public void deleteChallenge(String name) throws IOException {
        Files.deleteIfExists(challengeFile(name));
    }

    /** A small local file, read on the I/O thread, and parsed again only when it changes. */
    @Override
    public CompletableFuture<CertifiedKey> challenge(String name) {
        Path file = challengeFile(name);
        try {
            FileTime stamp = Files.getLastModifiedTime(file);
            Challenge known = challenges.get(name);
            if (known != null && known.stamp().equals(stamp)) return CompletableFuture.completedFuture(known.certified());
            CertifiedKey certified = read(file);
            if (certified != null) challenges.put(name, new Challenge(stamp, certified));
            return CompletableFuture.completedFuture(certified);
        } catch (NoSuchFileException e) {
            challenges.remove(name);
        } catch (IOException e) {
            LOG.warnf("ACME: cannot use the tls-alpn-01 certificate: %s", e.getMessage());
        }
        return CompletableFuture.completedFuture(null);
    }

    /** The key and chain in {@code file}, or null when there is no such file. */
    static CertifiedKey read(Path file) throws IOException {
        try {
            return CertifiedKey.fromPem(Files.readString(file, StandardCharsets.US_ASCII), file.toString());
        } catch (NoSuchFileException e) {
            return null;
        }
    }

    static void write(Path file, CertifiedKey certified) throws IOException {
        write(file, certified.toPem());
    }

    static void write(Path file, String content) throws IOException {
        Path temporary = Files.createTempFile(file.getParent(), "." + file.getFileName(), ".tmp",
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        try {
            Files.writeString(temporary, content, StandardCharsets.US_ASCII);
            try {
                Files.move(temporary, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(temporary, file, StandardCopyOption.REPLACE_EXISTING);
            }
        } finally {
            Files.deleteIfExists(temporary);
        }
    }

    private record Challenge(FileTime stamp, CertifiedKey certified) {}
}
