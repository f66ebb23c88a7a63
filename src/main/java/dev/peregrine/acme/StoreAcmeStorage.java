package dev.peregrine.acme;

import dev.peregrine.metrics.MetricsLayout;
import dev.peregrine.store.SharedStore;
import dev.peregrine.store.StoreScript;
import io.lettuce.core.ScriptOutputType;
import org.shredzone.acme4j.util.KeyPairUtils;

import java.io.IOException;
import java.io.StringReader;
import java.io.StringWriter;
import java.net.URI;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.security.KeyPair;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.time.Duration;
import java.time.Instant;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The ACME state in --shared-store, for replicas that share no volume. Keys, under a prefix of the CA's
 * directory URL (an account, a certificate or a back-off at one CA means nothing at another):
 * <pre>
 *   peregrine:acme:CA:account.key          the account's key pair (PEM), set once with NX: the first replica's wins
 *   peregrine:acme:CA:account.url          the account's URL at the CA
 *   peregrine:acme:CA:cert:NAME            key and chain of NAME (PEM), expiring with the certificate
 *   peregrine:acme:CA:lock:NAME            the order lock: a random token, NX, 30 s, extended every 5 s by its holder
 *   peregrine:acme:CA:backoff:NAME         failures in a row and the next attempt
 *   peregrine:acme:CA:challenge:NAME       the tls-alpn-01 certificate of a pending authorization (10 min at most)
 * </pre>
 * Every call but {@link #challenge} comes from the certificate manager's own thread and waits for the
 * answer (the store's background timeout bounds it); a store that fails makes the call throw an
 * {@link IOException}, and the manager keeps what it holds and tries again at its next poll.
 */
final class StoreAcmeStorage implements AcmeStorage {
    private static final StoreScript GET = StoreScript.of("return redis.call('GET', KEYS[1])");
    /** SET with its options (NX, PX...) after the value; 1 when set, 0 when NX found the key. */
    private static final StoreScript SET = StoreScript.of(
            "if redis.call('SET', KEYS[1], ARGV[1], unpack(ARGV, 2)) then return 1 end return 0");
    private static final StoreScript DELETE = StoreScript.of("return redis.call('DEL', KEYS[1])");
    private static final StoreScript EXTEND = StoreScript.of(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0");
    private static final StoreScript RELEASE = StoreScript.of(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0");
    private static final Duration LOCK_EXPIRY = OrderLock.STALE;
    private static final Duration CHALLENGE_EXPIRY = Duration.ofMinutes(10);
    private static final SecureRandom TOKENS = new SecureRandom();

    private final SharedStore store;
    private final String prefix;
    /** The last challenge read per name, and its text: parsed again only when it changes. */
    private final Map<String, Challenge> challenges = new ConcurrentHashMap<>();

    StoreAcmeStorage(SharedStore store, URI directory) {
        this.store = store;
        this.prefix = "peregrine:acme:" + HexFormat.of().formatHex(sha256(directory.toString()), 0, 8) + ":";
    }

    @Override
    public KeyPair accountKey() throws IOException {
        String pem = get("account.key");
        if (pem == null) {
            KeyPair created = KeyPairUtils.createECKeyPair("secp256r1");
            StringWriter text = new StringWriter();
            KeyPairUtils.writeKeyPair(created, text);
            set("account.key", text.toString(), "NX");
            pem = get("account.key"); // another replica's, when it was first
            if (pem == null) throw new IOException("the shared store lost the account key just stored");
        }
        try {
            return KeyPairUtils.readKeyPair(new StringReader(pem));
        } catch (IOException | RuntimeException e) {
            throw new CertifiedKey.Corrupt("the shared store's " + prefix + "account.key", e);
        }
    }

    @Override
    public URL accountUrl() throws IOException {
        String url = get("account.url");
        try {
            return url == null ? null : URI.create(url.trim()).toURL();
        } catch (IllegalArgumentException e) {
            throw new CertifiedKey.Corrupt("the shared store's " + prefix + "account.url", e);
        }
    }

    @Override
    public void saveAccountUrl(URL url) throws IOException {
        set("account.url", url.toString());
    }

    /** The PEM text itself: one GET says both whether it changed and what it is. */
    @Override
    public Object certificateVersion(String name) throws IOException {
        return get("cert:" + name);
    }

    @Override
    public CertifiedKey certificate(String name, Object version) throws IOException {
        return version == null ? null : CertifiedKey.fromPem((String) version, "the shared store's " + prefix + "cert:" + name);
    }

    @Override
    public void saveCertificate(String name, CertifiedKey certified) throws IOException {
        set("cert:" + name, certified.toPem(), "PX", Long.toString(untilExpiry(certified)));
    }

    /** Put back with NX: a replica that ordered meanwhile keeps its newer certificate. */
    @Override
    public void lost(String name, CertifiedKey served) throws IOException {
        set("cert:" + name, served.toPem(), "NX", "PX", Long.toString(untilExpiry(served)));
    }

    @Override
    public Backoff backoff(String name) {
        try {
            String text = get("backoff:" + name);
            return text == null ? Backoff.NONE : Backoff.parse(text);
        } catch (IOException e) {
            return Backoff.NONE;
        }
    }

    @Override
    public void saveBackoff(String name, Backoff backoff) throws IOException {
        // Kept a day past the next attempt: long enough for any process to read it, never forever.
        long millis = Duration.between(Instant.now(), backoff.next()).plusDays(1).toMillis();
        set("backoff:" + name, backoff.format(), "PX", Long.toString(Math.max(millis, 1)));
    }

    @Override
    public void clearBackoff(String name) throws IOException {
        call(DELETE, ScriptOutputType.INTEGER, "backoff:" + name);
    }

    @Override
    public Lock tryLock(String name, ScheduledExecutorService scheduler) throws IOException {
        String key = "lock:" + name;
        byte[] random = new byte[16];
        TOKENS.nextBytes(random);
        String token = HexFormat.of().formatHex(random);
        if (!set(key, token, "NX", "PX", Long.toString(LOCK_EXPIRY.toMillis()))) return null;
        long beat = OrderLock.HEARTBEAT.toMillis();
        ScheduledFuture<?> heartbeat = scheduler.scheduleWithFixedDelay(() -> {
            try {
                call(EXTEND, ScriptOutputType.INTEGER, key, token, Long.toString(LOCK_EXPIRY.toMillis()));
            } catch (IOException ignored) {
                // The store is down: the order finishes; a second one would at worst be a duplicate.
            }
        }, beat, beat, TimeUnit.MILLISECONDS);
        return () -> {
            heartbeat.cancel(false);
            call(RELEASE, ScriptOutputType.INTEGER, key, token);
        };
    }

    @Override
    public void saveChallenge(String name, CertifiedKey validation) throws IOException {
        set("challenge:" + name, validation.toPem(), "PX", Long.toString(CHALLENGE_EXPIRY.toMillis()));
    }

    @Override
    public void deleteChallenge(String name) throws IOException {
        call(DELETE, ScriptOutputType.INTEGER, "challenge:" + name);
    }

    /** One GET, answered on the store connection's I/O thread, where the parsing (rare: the CA's handshakes only) happens too. */
    @Override
    public CompletableFuture<CertifiedKey> challenge(String name) {
        return store.<byte[]>eval(GET, ScriptOutputType.VALUE, MetricsLayout.STORE_ACME, false, keys("challenge:" + name))
                .handle((value, error) -> {
                    if (error != null || value == null) {
                        challenges.remove(name);
                        return null;
                    }
                    String pem = new String(value, StandardCharsets.US_ASCII);
                    Challenge known = challenges.get(name);
                    if (known != null && known.pem().equals(pem)) return known.certified();
                    try {
                        CertifiedKey certified = CertifiedKey.fromPem(pem, "the shared store's " + prefix + "challenge:" + name);
                        challenges.put(name, new Challenge(pem, certified));
                        return certified;
                    } catch (IOException e) {
                        return null;
                    }
                });
    }

    private String get(String key) throws IOException {
        byte[] value = call(GET, ScriptOutputType.VALUE, key);
        return value == null ? null : new String(value, StandardCharsets.US_ASCII);
    }

    /** True when set; false when NX found the key. */
    private boolean set(String key, String value, String... options) throws IOException {
        String[] args = new String[options.length + 1];
        args[0] = value;
        System.arraycopy(options, 0, args, 1, options.length);
        Long done = call(SET, ScriptOutputType.INTEGER, key, args);
        return done != null && done == 1;
    }

    /** Runs {@code script} on one key of ours and waits for its answer, which the store's timeout bounds. */
    private <T> T call(StoreScript script, ScriptOutputType type, String key, String... args) throws IOException {
        byte[][] values = new byte[args.length][];
        for (int i = 0; i < args.length; i++) values[i] = args[i].getBytes(StandardCharsets.US_ASCII);
        try {
            return store.<T>eval(script, type, MetricsLayout.STORE_ACME, false, keys(key), values).get(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Unavailable(e);
        } catch (ExecutionException | TimeoutException e) {
            throw new Unavailable(e.getCause() != null ? e.getCause() : e);
        }
    }

    private byte[][] keys(String key) {
        return new byte[][] {(prefix + key).getBytes(StandardCharsets.US_ASCII)};
    }

    private static long untilExpiry(CertifiedKey certified) {
        return Math.max(1, Duration.between(Instant.now(), certified.notAfter()).toMillis());
    }

    private static byte[] sha256(String text) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JDK has SHA-256", e);
        }
    }

    /**
     * The store failed or did not answer: counted and warned about by {@link SharedStore} already (at
     * most once a minute), so the manager need not say it again at each poll.
     */
    static final class Unavailable extends IOException {
        Unavailable(Throwable cause) {
            super("the shared store: " + cause.getMessage(), cause);
        }
    }

    private record Challenge(String pem, CertifiedKey certified) {}
}
