package dev.peregrine.acme;

import org.bouncycastle.asn1.pkcs.PrivateKeyInfo;
import org.bouncycastle.cert.X509CertificateHolder;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.openssl.PEMKeyPair;
import org.bouncycastle.openssl.PEMParser;
import org.bouncycastle.openssl.jcajce.JcaPEMKeyConverter;
import org.bouncycastle.openssl.jcajce.JcaPEMWriter;
import org.shredzone.acme4j.util.KeyPairUtils;

import java.io.IOException;
import java.io.Reader;
import java.io.StringReader;
import java.io.StringWriter;
import java.net.URI;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.PrivateKey;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.List;

/**
 * The cache directory, shared by every worker and by every server mounting the same volume:
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
final class AcmeCache {
    private final Path directory;

    AcmeCache(Path directory) {
        this.directory = directory;
    }

    Path directory() {
        return directory;
    }

    void create() throws IOException {
        Files.createDirectories(directory.resolve("challenges"), PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
    }

    Path certificateFile(String name) {
        return directory.resolve(name + ".pem");
    }

    Path challengeFile(String name) {
        return directory.resolve("challenges").resolve(name + ".pem");
    }

    Path lockFile(String name) {
        return directory.resolve(name + ".lock");
    }

    Path backoffFile(String name) {
        return directory.resolve(name + ".backoff");
    }

    /** The account key, created and saved on the first call ever. */
    KeyPair accountKey() throws IOException {
        Path file = directory.resolve("account.key");
        if (Files.exists(file)) {
            try (Reader reader = Files.newBufferedReader(file, StandardCharsets.US_ASCII)) {
                return KeyPairUtils.readKeyPair(reader);
            } catch (IOException | RuntimeException e) {
                throw new CorruptFile(file, e);
            }
        }
        KeyPair key = KeyPairUtils.createECKeyPair("secp256r1");
        StringWriter pem = new StringWriter();
        KeyPairUtils.writeKeyPair(key, pem);
        write(file, pem.toString());
        return key;
    }

    /** Null before the account is registered. */
    URL accountUrl() throws IOException {
        Path file = directory.resolve("account.url");
        if (!Files.exists(file)) return null;
        try {
            return URI.create(Files.readString(file).trim()).toURL();
        } catch (IllegalArgumentException e) {
            throw new CorruptFile(file, e);
        }
    }

    void saveAccountUrl(URL url) throws IOException {
        write(directory.resolve("account.url"), url + "\n");
    }

    /** The key and chain in {@code file}, or null when there is no such file. */
    static CertifiedKey read(Path file) throws IOException {
        String pem;
        try {
            pem = Files.readString(file, StandardCharsets.US_ASCII);
        } catch (NoSuchFileException e) {
            return null;
        }
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
            throw new CorruptFile(file, e);
        }
        if (key == null || chain.isEmpty()) throw new CorruptFile(file, new IOException(key == null ? "no private key" : "no certificate"));
        return new CertifiedKey(chain.toArray(X509Certificate[]::new), key);
    }

    static void write(Path file, CertifiedKey certified) throws IOException {
        StringWriter pem = new StringWriter();
        try (JcaPEMWriter writer = new JcaPEMWriter(pem)) {
            writer.writeObject(certified.key());
            for (X509Certificate certificate : certified.chain()) writer.writeObject(certificate);
        }
        write(file, pem.toString());
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

    /** A cache file that exists but cannot be used; the message names it. */
    static final class CorruptFile extends IOException {
        CorruptFile(Path file, Exception cause) {
            super(file + " is corrupt (" + (cause.getMessage() != null ? cause.getMessage() : cause.getClass().getSimpleName()) + ")", cause);
        }
    }
}
