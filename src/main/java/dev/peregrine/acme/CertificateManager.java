package dev.peregrine.acme;

import dev.peregrine.config.AcmeSettings;
import dev.peregrine.config.ConfigException;
import dev.peregrine.metrics.AcmeMetrics;
import dev.peregrine.store.SharedStore;
import org.bouncycastle.jce.provider.BouncyCastleProvider;
import org.jboss.logging.Logger;

import java.io.IOException;
import java.security.Security;
import java.time.Duration;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * The certificates of --acme-domain, kept in an {@link AcmeStorage} (the --acme-cache directory, or
 * --shared-store) and in memory. Each process (each worker) runs one: it serves what the storage holds,
 * looks at the storage every {@link #POLL} for a certificate another process stored, and orders one
 * itself when a name has none that is valid or its renewal time has come (the CA's renewal window,
 * RFC 9773, else when a third of the lifetime remains), unless another process holds the name's order
 * lock or the name's {@link Backoff} says to wait. Orders run on the manager's own thread, never an I/O
 * thread.
 */
public final class CertificateManager {
    /** The ALPN protocol of tls-alpn-01 (RFC 8737); a handshake that offers it is a validation, never a request. */
    public static final String ACME_TLS_PROTOCOL = "acme-tls/1";
    private static final Logger LOG = Logger.getLogger("peregrine");
    private static final Duration POLL = Duration.ofSeconds(2);

    private final AcmeSettings settings;
    /** Null until {@link #keepIn} when the storage is --shared-store, whose connection the worker makes later. */
    private volatile AcmeStorage storage;
    private AcmeClient client;
    private final Map<String, Domain> domains = new LinkedHashMap<>();
    private ScheduledExecutorService scheduler;

    private CertificateManager(AcmeSettings settings, AcmeStorage storage) {
        this.settings = settings;
        this.storage = storage;
        for (String name : settings.domains()) domains.put(name, new Domain(name));
    }

    /**
     * Without a shared store, creates the cache directory if needed and reads the certificates it holds,
     * so that a worker serves them from its first handshake; with one, reads nothing before {@link #keepIn}.
     * Nothing is ordered yet.
     */
    public static CertificateManager open(AcmeSettings settings, boolean sharedStore) {
        // acme4j signs CSRs and the tls-alpn-01 certificate through Bouncy Castle's provider, by name.
        if (Security.getProvider(BouncyCastleProvider.PROVIDER_NAME) == null) Security.addProvider(new BouncyCastleProvider());
        AcmeMetrics.register(settings.domains());
        if (sharedStore) return new CertificateManager(settings, null);
        AcmeCache cache = new AcmeCache(settings.cache());
        try {
            cache.create();
        } catch (IOException e) {
            throw new ConfigException("option '--acme-cache': cannot create " + settings.cache() + " (" + e.getMessage() + ")");
        }
        CertificateManager manager = new CertificateManager(settings, cache);
        for (Domain domain : manager.domains.values()) manager.refresh(domain);
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
     * The tls-alpn-01 certificate of a pending authorization for {@code name}, completing with null when
     * none is pending. Read from the storage, where the process that placed the order put it: the CA's
     * connection lands on any worker of any replica. Asked on the I/O thread, only for handshakes that
     * offer acme-tls/1.
     */
    public CompletableFuture<CertifiedKey> challenge(String name) {
        AcmeStorage from = storage;
        if (!domains.containsKey(name) || from == null) return CompletableFuture.completedFuture(null);
        return from.challenge(name);
    }

    /**
     * With --shared-store: keeps the certificates in {@code store}, the worker's connection to it, and
     * reads those it holds now, from the calling thread, before the worker listens: a new replica
     * serves them from its first handshake.
     */
    public void keepIn(SharedStore store) {
        storage = new StoreAcmeStorage(store, settings.directory());
        for (Domain domain : domains.values()) refresh(domain);
    }

    /** Starts looking after the certificates, on a thread of its own; in a worker, not in a supervisor. */
    public void start() {
        scheduler = Executors.newScheduledThreadPool(2, task -> {
            Thread thread = new Thread(task, "peregrine-acme");
            thread.setDaemon(true);
            return thread;
        });
        client = new AcmeClient(settings, storage);
        for (Domain domain : domains.values()) {
            AcmeMetrics.serving(domain.name, domain.current == null ? null : domain.current.notAfter());
            if (domain.current != null) {
                LOG.infof("ACME: serving the cached certificate for %s (serial %s, valid until %s, renewal from %s)",
                        domain.name, domain.current.serial(), domain.current.notAfter(), domain.renewAt);
            }
        }
        scheduler.scheduleWithFixedDelay(this::checkAll, 0, POLL.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** SIGHUP: read the storage anew, even a file whose time stamp did not change. */
    public void rescan() {
        synchronized (domains) {
            for (Domain domain : domains.values()) domain.version = null;
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
        // This process's own record too: a store that failed may have lost or never taken the stored one.
        Backoff backoff = storage.backoff(domain.name).orLater(domain.backoff);
        if (now.isBefore(backoff.next())) return;
        AcmeStorage.Lock lock;
        try {
            lock = storage.tryLock(domain.name, scheduler);
        } catch (IOException e) {
            failedToLock(domain, "take", e);
            return;
        }
        if (lock == null) return; // Another process orders; its certificate shows up in the storage.
        try (lock) {
            // Another process may have stored a certificate between our look and the lock.
            refresh(domain);
            if (domain.current != null && Instant.now().isBefore(domain.renewAt)) return;
            order(domain, backoff);
        } catch (IOException e) {
            failedToLock(domain, "release", e);
        }
    }

    /** A store that fails is reported by the store itself, at most once a minute: not again at each poll. */
    private static void failedToLock(Domain domain, String what, IOException e) {
        if (e instanceof StoreAcmeStorage.Unavailable) LOG.debugf("ACME: cannot %s the order lock of %s: %s", what, domain.name, e.getMessage());
        else LOG.warnf("ACME: cannot %s the order lock of %s: %s", what, domain.name, e.getMessage());
    }

    private void order(Domain domain, Backoff backoff) {
        LOG.infof("ACME: %s a certificate for %s from %s", domain.current == null ? "ordering" : "renewing", domain.name, settings.directory());
        try {
            CertifiedKey certified = client.order(domain.name, domain.current);
            storage.saveCertificate(domain.name, certified);
            domain.backoff = Backoff.NONE;
            storage.clearBackoff(domain.name);
            refresh(domain, true);
            AcmeMetrics.count(domain.name, true);
            LOG.infof("ACME: certificate for %s issued (serial %s, valid until %s), serving it from now on",
                    domain.name, certified.serial(), certified.notAfter());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Exception e) { // AcmeException (the CA's refusal, or the CA unreachable) or IOException (the storage)
            AcmeMetrics.count(domain.name, false);
            Backoff next = backoff.failedAgain(Instant.now());
            domain.backoff = next;
            try {
                storage.saveBackoff(domain.name, next);
            } catch (IOException written) {
                LOG.warnf("ACME: cannot keep the back-off of %s: %s", domain.name, written.getMessage());
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

    /**
     * Takes the storage's certificate for {@code domain} when it changed; a corrupt one is reported once.
     * When the storage has none while this process serves a valid one, it is given back to the storage.
     */
    private void refresh(Domain domain) {
        refresh(domain, false);
    }

    /** {@code ordered}: the certificate is the one this process just stored, which its caller reports. */
    private void refresh(Domain domain, boolean ordered) {
        synchronized (domains) {
            Object version;
            try {
                version = storage.certificateVersion(domain.name);
                if (version == null && domain.current != null && domain.current.notAfter().isAfter(Instant.now())) {
                    storage.lost(domain.name, domain.current);
                }
            } catch (IOException e) {
                return; // Not readable now: what is in memory stays.
            }
            if (version == null || version.equals(domain.version)) return;
            domain.version = version;
            try {
                CertifiedKey certified = storage.certificate(domain.name, version);
                if (certified == null) return;
                if (!certified.notAfter().isAfter(Instant.now())) {
                    LOG.infof("ACME: the stored certificate for %s expired at %s", domain.name, certified.notAfter());
                    return;
                }
                boolean renewed = domain.current != null;
                domain.current = certified;
                domain.renewAt = renewalTime(certified);
                domain.askRenewalInfoAt = Instant.EPOCH;
                domain.renewalInfoFailures = 0;
                domain.advice = null;
                AcmeMetrics.serving(domain.name, certified.notAfter());
                if (renewed) {
                    LOG.infof("ACME: new certificate for %s (serial %s) in use for new connections", domain.name, certified.serial());
                } else if (!ordered && scheduler != null) {
                    // Before start() the certificates read are reported there, as cached ones.
                    LOG.infof("ACME: certificate for %s (serial %s) stored by another process, serving it from now on",
                            domain.name, certified.serial());
                }
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
        /** What the storage held when last read ({@link AcmeStorage#certificateVersion}), or null to read it again. */
        Object version;
        /** The last failed order's back-off as this process knows it, whatever the storage kept. */
        Backoff backoff = Backoff.NONE;

        Domain(String name) {
            this.name = name;
        }
    }
}
