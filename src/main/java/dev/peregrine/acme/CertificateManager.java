package dev.peregrine.acme;

import dev.peregrine.config.AcmeSettings;
import dev.peregrine.config.ConfigException;
import dev.peregrine.ops.metrics.AcmeOrders;
import dev.peregrine.ops.metrics.CertificateExpiry;
import org.bouncycastle.jce.provider.BouncyCastleProvider;
import org.jboss.logging.Logger;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.security.Security;
import java.time.Duration;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * The certificates of --acme-domain, kept in the cache directory and in memory. Each process (each
 * worker) runs one: it serves what the cache holds, looks at the cache every {@link #POLL} for a
 * certificate another process stored, and orders one itself when a name has none that is valid or
 * its renewal time has come (the CA's renewal window, RFC 9773, else when a third of the lifetime
 * remains), unless another process holds the name's {@link OrderLock} or the
 * name's {@link Backoff} says to wait. Orders run on the manager's own thread, never an I/O thread.
 */
public final class CertificateManager {
    /** The ALPN protocol of tls-alpn-01 (RFC 8737); a handshake that offers it is a validation, never a request. */
    public static final String ACME_TLS_PROTOCOL = "acme-tls/1";
    private static final Logger LOG = Logger.getLogger("peregrine");
    private static final Duration POLL = Duration.ofSeconds(2);

    private final AcmeSettings settings;
    private final AcmeCache cache;
    private final AcmeClient client;
    private final Map<String, Domain> domains = new LinkedHashMap<>();
    private final Map<String, Challenge> challenges = new ConcurrentHashMap<>();
    private ScheduledExecutorService scheduler;

    private CertificateManager(AcmeSettings settings) {
        this.settings = settings;
        this.cache = new AcmeCache(settings.cache());
        this.client = new AcmeClient(settings, cache);
        for (String name : settings.domains()) domains.put(name, new Domain(name));
    }

    /** Creates the cache directory if needed and reads the certificates it holds; nothing is ordered yet. */
    public static CertificateManager open(AcmeSettings settings) {
        // acme4j signs CSRs and the tls-alpn-01 certificate through Bouncy Castle's provider, by name.
        if (Security.getProvider(BouncyCastleProvider.PROVIDER_NAME) == null) Security.addProvider(new BouncyCastleProvider());
        CertificateManager manager = new CertificateManager(settings);
        try {
            manager.cache.create();
        } catch (IOException e) {
            throw new ConfigException("option '--acme-cache': cannot create " + settings.cache() + " (" + e.getMessage() + ")");
        }
        AcmeOrders.register(settings.domains());
        for (Domain domain : manager.domains.values()) {
            manager.refresh(domain);
            // Read through refresh: a supervisor runs no manager thread, yet its scrapes see renewed certificates.
            CertificateExpiry.register(domain.name, () -> {
                manager.refresh(domain);
                CertifiedKey current = domain.current;
                return current == null ? Double.NaN : current.notAfter().getEpochSecond();
            });
        }
        return manager;
    }

    public List<String> domains() {
        return settings.domains();
    }

    public boolean manages(String name) {
        return domains.containsKey(name);
    }

    /** The current certificate of {@code name}, or null while it has none. */
    public CertifiedKey certificate(String name) {
        Domain domain = domains.get(name);
        return domain == null ? null : domain.current;
    }

    /**
     * The tls-alpn-01 certificate of a pending authorization for {@code name}, or null when none is
     * pending. Read from the cache directory, where the process that placed the order wrote it: the
     * CA's connection lands on any worker. A small local file, read on the I/O thread only for
     * handshakes that offer acme-tls/1, and parsed again only when it changes.
     */
    public CertifiedKey challenge(String name) {
        if (!domains.containsKey(name)) return null;
        Path file = cache.challengeFile(name);
        try {
            FileTime stamp = Files.getLastModifiedTime(file);
            Challenge known = challenges.get(name);
            if (known != null && known.stamp().equals(stamp)) return known.certified();
            CertifiedKey certified = AcmeCache.read(file);
            if (certified == null) return null;
            challenges.put(name, new Challenge(stamp, certified));
            return certified;
        } catch (NoSuchFileException e) {
            challenges.remove(name);
            return null;
        } catch (IOException e) {
            LOG.warnf("ACME: cannot use the tls-alpn-01 certificate: %s", e.getMessage());
            return null;
        }
    }

    /** Starts looking after the certificates, on a thread of its own; in a worker, not in a supervisor. */
    public void start() {
        scheduler = Executors.newScheduledThreadPool(2, task -> {
            Thread thread = new Thread(task, "peregrine-acme");
            thread.setDaemon(true);
            return thread;
        });
        for (Domain domain : domains.values()) {
            if (domain.current != null) {
                LOG.infof("ACME: serving the cached certificate for %s (serial %s, valid until %s, renewal from %s)",
                        domain.name, domain.current.serial(), domain.current.notAfter(), domain.renewAt);
            }
        }
        scheduler.scheduleWithFixedDelay(this::checkAll, 0, POLL.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** SIGHUP: read the cache anew, even a file whose time stamp did not change. */
    public void rescan() {
        synchronized (domains) {
            for (Domain domain : domains.values()) domain.stamp = null;
        }
    }

    private void checkAll() {
        for (Domain domain : domains.values()) {
            try {
                check(domain);
            } catch (RuntimeException e) {
                LOG.errorf(e, "ACME: unexpected failure looking after %s", domain.name);
            }
        }
    }

    private void check(Domain domain) {
        refresh(domain);
        if (domain.current != null && !Instant.now().isBefore(domain.askRenewalInfoAt)) askRenewalInfo(domain, Instant.now());
        // After the CA's answer, which may have set the renewal to now.
        Instant now = Instant.now();
        if (domain.current != null && now.isBefore(domain.renewAt)) return;
        Backoff backoff = Backoff.read(cache.backoffFile(domain.name));
        if (now.isBefore(backoff.next())) return;
        OrderLock lock;
        try {
            lock = OrderLock.tryAcquire(cache.lockFile(domain.name), scheduler);
        } catch (IOException e) {
            LOG.warnf("ACME: cannot lock %s: %s", cache.lockFile(domain.name), e.getMessage());
            return;
        }
        if (lock == null) return; // Another process orders; its certificate shows up in the cache.
        try (lock) {
            // Another process may have stored a certificate between our look and the lock.
            refresh(domain);
            if (domain.current != null && Instant.now().isBefore(domain.renewAt)) return;
            order(domain, backoff);
        } catch (IOException e) {
            LOG.warnf("ACME: cannot release %s: %s", cache.lockFile(domain.name), e.getMessage());
        }
    }

    private void order(Domain domain, Backoff backoff) {
        LOG.infof("ACME: %s a certificate for %s from %s", domain.current == null ? "ordering" : "renewing", domain.name, settings.directory());
        try {
            CertifiedKey certified = client.order(domain.name, domain.current);
            AcmeCache.write(cache.certificateFile(domain.name), certified);
            Files.deleteIfExists(cache.backoffFile(domain.name));
            refresh(domain);
            AcmeOrders.count(domain.name, true);
            LOG.infof("ACME: certificate for %s issued (serial %s, valid until %s), serving it from now on",
                    domain.name, certified.serial(), certified.notAfter());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Exception e) { // AcmeException (the CA's refusal, or the CA unreachable) or IOException (the cache)
            AcmeOrders.count(domain.name, false);
            Backoff next = backoff.failedAgain(Instant.now());
            try {
                next.write(cache.backoffFile(domain.name));
            } catch (IOException written) {
                LOG.warnf("ACME: cannot write %s: %s", cache.backoffFile(domain.name), written.getMessage());
            }
            LOG.warnf("ACME: could not obtain a certificate for %s (failure %d in a row): %s; next attempt at %s",
                    domain.name, next.failures(), AcmeClient.describe(e), next.next());
        }
    }

    /**
     * Asks the CA when to renew (RFC 9773): right after a certificate is taken, then again when the CA's
     * Retry-After says. A CA that offers no renewal information is not asked again for this
     * certificate, and the third of the lifetime stays. A window seen before keeps the time chosen in
     * it; a new one (the CA moved it, say before a mass revocation) gets a new time. A failed request
     * keeps the time there is, and is tried again after 1, 2, 4... minutes, up to {@link RenewalAdvice#LATEST}.
     */
    private void askRenewalInfo(Domain domain, Instant now) {
        CertifiedKey asked = domain.current;
        Optional<RenewalAdvice> answer;
        Exception failure = null;
        try {
            answer = client.renewalAdvice(asked, POLL);
        } catch (Exception e) { // AcmeException or IOException (the CA unreachable or refusing), or a malformed answer
            answer = Optional.empty();
            failure = e;
        }
        synchronized (domains) {
            // A scrape or SIGHUP may have taken a new certificate meanwhile: the answer is about the old one.
            if (domain.current != asked) return;
            if (failure != null) {
                Duration wait = Duration.ofMinutes(1L << Math.min(domain.renewalInfoFailures++, 20));
                if (wait.compareTo(RenewalAdvice.LATEST) > 0) wait = RenewalAdvice.LATEST;
                domain.askRenewalInfoAt = now.plus(wait);
                LOG.warnf("ACME: no renewal information for %s from the CA: %s; renewal stays at %s, asking again at %s",
                        domain.name, AcmeClient.describe(failure), domain.renewAt, domain.askRenewalInfoAt);
                return;
            }
            if (answer.isEmpty()) {
                domain.askRenewalInfoAt = Instant.MAX;
                return;
            }
            RenewalAdvice advice = answer.get();
            domain.renewalInfoFailures = 0;
            domain.askRenewalInfoAt = advice.nextCheck(now);
            if (advice.sameWindow(domain.advice)) return;
            domain.advice = advice;
            domain.renewAt = advice.renewAt();
            LOG.infof("ACME: the CA suggests renewing %s (serial %s) between %s and %s%s; renewal at %s",
                    domain.name, asked.serial(), advice.start(), advice.end(),
                    advice.explanation().map(url -> " (" + url + ")").orElse(""), domain.renewAt);
        }
    }

    /** Takes the cache's certificate for {@code domain} when its file changed; a corrupt file is reported once. */
    private void refresh(Domain domain) {
        synchronized (domains) {
            Path file = cache.certificateFile(domain.name);
            FileTime stamp;
            try {
                stamp = Files.getLastModifiedTime(file);
            } catch (IOException e) {
                return; // None yet, or not readable: what is in memory stays.
            }
            if (stamp.equals(domain.stamp)) return;
            domain.stamp = stamp;
            try {
                CertifiedKey certified = AcmeCache.read(file);
                if (certified == null) return;
                if (!certified.notAfter().isAfter(Instant.now())) {
                    LOG.infof("ACME: the cached certificate for %s expired at %s", domain.name, certified.notAfter());
                    return;
                }
                boolean renewed = domain.current != null;
                domain.current = certified;
                domain.renewAt = renewalTime(certified);
                domain.askRenewalInfoAt = Instant.EPOCH;
                domain.renewalInfoFailures = 0;
                domain.advice = null;
                if (renewed) LOG.infof("ACME: new certificate for %s (serial %s) in use for new connections", domain.name, certified.serial());
            } catch (IOException e) {
                // What is in memory (if anything) stays in use until the new certificate arrives.
                LOG.errorf("ACME: %s; a new certificate will be ordered", e.getMessage());
                domain.renewAt = Instant.EPOCH;
            }
        }
    }

    /**
     * When a third of the lifetime remains, less up to a thirtieth of it at random, so that servers
     * (and workers) that got their certificates together do not renew together.
     */
    private static Instant renewalTime(CertifiedKey certified) {
        Duration lifetime = Duration.between(certified.notBefore(), certified.notAfter());
        long jitter = ThreadLocalRandom.current().nextLong(Math.max(1, lifetime.toMillis() / 30));
        return certified.notAfter().minus(lifetime.dividedBy(3)).minusMillis(jitter);
    }

    private static final class Domain {
        final String name;
        volatile CertifiedKey current;
        Instant renewAt = Instant.EPOCH;
        /** When to ask the CA for renewal information next; {@link Instant#MAX} when it offers none. */
        Instant askRenewalInfoAt = Instant.EPOCH;
        int renewalInfoFailures;
        /** The CA's last answer for the current certificate, or null. */
        RenewalAdvice advice;
        /** The time stamp of the cache file last read, or null to read it again. */
        FileTime stamp;

        Domain(String name) {
            this.name = name;
        }
    }

    private record Challenge(FileTime stamp, CertifiedKey certified) {}
}
