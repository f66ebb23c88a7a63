package dev.peregrine.acme;

import dev.peregrine.config.AcmeSettings;
import org.jboss.logging.Logger;
import org.shredzone.acme4j.AccountBuilder;
import org.shredzone.acme4j.Authorization;
import org.shredzone.acme4j.Certificate;
import org.shredzone.acme4j.Login;
import org.shredzone.acme4j.Order;
import org.shredzone.acme4j.Problem;
import org.shredzone.acme4j.RenewalInfo;
import org.shredzone.acme4j.Session;
import org.shredzone.acme4j.Status;
import org.shredzone.acme4j.challenge.TlsAlpn01Challenge;
import org.shredzone.acme4j.connector.HttpConnector;
import org.shredzone.acme4j.connector.NetworkSettings;
import org.shredzone.acme4j.connector.Resource;
import org.shredzone.acme4j.exception.AcmeException;
import org.shredzone.acme4j.exception.AcmeNotSupportedException;
import org.shredzone.acme4j.exception.AcmeRateLimitedException;
import org.shredzone.acme4j.exception.AcmeServerException;
import org.shredzone.acme4j.provider.GenericAcmeProvider;
import org.shredzone.acme4j.util.KeyPairUtils;

import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import java.io.IOException;
import java.io.InputStream;
import java.net.URL;
import java.net.http.HttpClient;
import java.nio.file.Files;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;

/** One ACME account at one CA, and the orders placed with it (RFC 8555), validated by tls-alpn-01 (RFC 8737). */
final class AcmeClient {
    private static final Logger LOG = Logger.getLogger("peregrine");
    /** How long the CA may take to validate, and to issue once the order is finalized. */
    private static final Duration WAIT = Duration.ofMinutes(3);

    private final AcmeSettings settings;
    private final AcmeStorage storage;
    private Login login;

    AcmeClient(AcmeSettings settings, AcmeStorage storage) {
        this.settings = settings;
        this.storage = storage;
    }

    /**
     * Orders a certificate for {@code name}; the tls-alpn-01 certificate is in the storage while the CA
     * validates. {@code replacing}, the certificate in use (or null), is named in the order when the CA
     * offers renewal information (RFC 9773 5), so that the CA can exempt the renewal from its rate limits.
     */
    CertifiedKey order(String name, CertifiedKey replacing) throws IOException, AcmeException, InterruptedException {
        Order order = placeOrder(name, replacing);
        LOG.infof("ACME: order for %s placed (%s)", name, order.getLocation());
        for (Authorization authorization : order.getAuthorizations()) {
            if (authorization.getStatus() != Status.VALID) authorize(name, authorization);
        }
        KeyPair domainKey = KeyPairUtils.createECKeyPair("secp256r1");
        order.waitUntilReady(WAIT);
        order.execute(domainKey);
        Status status = order.waitForCompletion(WAIT);
        if (status != Status.VALID) {
            throw new OrderFailed("the order for " + name + " ended " + status + order.getError().map(p -> ": " + describe(p)).orElse(""));
        }
        Certificate certificate = order.getCertificate();
        List<X509Certificate> chain = certificate.getCertificateChain();
        return new CertifiedKey(chain.toArray(X509Certificate[]::new), domainKey.getPrivate());
    }

    private Order placeOrder(String name, CertifiedKey replacing) throws IOException, AcmeException {
        Login login = login();
        if (replacing == null || login.getSession().resourceUrlOptional(Resource.RENEWAL_INFO).isEmpty()) {
            return login.newOrder().domain(name).create();
        }
        try {
            return login.newOrder().domain(name).replaces(replacing.chain()[0]).create();
        } catch (AcmeServerException e) {
            // Naming the certificate helps (a CA may exempt the renewal from its rate limits) but must
            // never stop a renewal. A CA refuses it when an earlier order replaced that certificate
            // already (alreadyReplaced: that order was finalized, but its certificate never reached the
            // cache, a crash in between) or when it does not know the certificate (one from another CA
            // left in the cache): named again, it would be refused at every attempt and the name never
            // renewed. A rate limit is no such refusal.
            if (e instanceof AcmeRateLimitedException) throw e;
            LOG.infof("ACME: the CA refused an order for %s naming the certificate it replaces (serial %s): %s; ordering without naming it",
                    name, replacing.serial(), describe(e));
            return login.newOrder().domain(name).create();
        }
    }

    /**
     * The CA's renewal information for {@code certified} (RFC 9773), or empty when the CA offers none.
     * The random time is drawn by acme4j between now (or the window's start) and the window's end
     * less one poll of the manager, so that the poll still falls inside the window; a window already
     * over gives now.
     */
    Optional<RenewalAdvice> renewalAdvice(CertifiedKey certified, Duration poll) throws IOException, AcmeException {
        RenewalInfo info;
        try {
            info = login().bindRenewalInfo(certified.chain()[0]);
        } catch (AcmeNotSupportedException e) {
            return Optional.empty();
        }
        Optional<Instant> retryAfter = info.fetch();
        Instant start = info.getSuggestedWindowStart();
        Instant end = info.getSuggestedWindowEnd();
        // RFC 9773 4.2: such a window is invalid and counts as no answer.
        if (!end.isAfter(start)) throw new AcmeException("the CA's renewal window ends (" + end + ") before it starts (" + start + ")");
        Instant renewAt = info.getRandomProposal(poll).orElseGet(Instant::now);
        return Optional.of(new RenewalAdvice(start, end, renewAt, retryAfter, info.getExplanation()));
    }

    private void authorize(String name, Authorization authorization) throws IOException, AcmeException, InterruptedException {
        TlsAlpn01Challenge challenge = authorization.findChallenge(TlsAlpn01Challenge.class)
                .orElseThrow(() -> new OrderFailed("the CA offers no tls-alpn-01 challenge for " + name));
        // RSA: acme4j 3.5 signs the validation certificate with SHA256withRSA whatever the key.
        KeyPair challengeKey = KeyPairUtils.createKeyPair(2048);
        X509Certificate validation = challenge.createCertificate(challengeKey, authorization.getIdentifier());
        storage.saveChallenge(name, new CertifiedKey(new X509Certificate[] {validation}, challengeKey.getPrivate()));
        try {
            LOG.infof("ACME: answering tls-alpn-01 for %s, asking the CA to validate", name);
            challenge.trigger();
            Status status = challenge.waitForCompletion(WAIT);
            if (status != Status.VALID) {
                throw new OrderFailed("the CA could not validate " + name + challenge.getError().map(p -> ": " + describe(p)).orElse(" (" + status + ")"));
            }
            LOG.infof("ACME: %s validated", name);
        } finally {
            try {
                storage.deleteChallenge(name);
            } catch (IOException e) {
                // It expires by itself; the order's own outcome is what matters.
                LOG.debugf("ACME: cannot remove the tls-alpn-01 certificate of %s: %s", name, e.getMessage());
            }
        }
    }

    /** Logs in with the cached account, registering it on the first order ever. */
    private Login login() throws IOException, AcmeException {
        if (login != null) return login;
        Session session = new Session(settings.directory(), new Provider(trust()));
        KeyPair key = storage.accountKey();
        URL account = storage.accountUrl();
        if (account != null) {
            login = session.login(account, key);
        } else {
            AccountBuilder builder = new AccountBuilder().agreeToTermsOfService().useKeyPair(key);
            if (settings.email() != null) builder.addEmail(settings.email());
            login = builder.createLogin(session);
            storage.saveAccountUrl(login.getAccountLocation());
            LOG.infof("ACME: account registered at %s (%s)", settings.directory(), login.getAccountLocation());
        }
        return login;
    }

    /** The roots of --acme-ca-bundle, or null for the JDK's own. */
    private SSLContext trust() throws IOException {
        if (settings.caBundle() == null) return null;
        try (InputStream in = Files.newInputStream(settings.caBundle())) {
            KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
            store.load(null, null);
            int index = 0;
            for (java.security.cert.Certificate root : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
                store.setCertificateEntry("root-" + index++, root);
            }
            TrustManagerFactory factory = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            factory.init(store);
            SSLContext context = SSLContext.getInstance("TLS");
            context.init(null, factory.getTrustManagers(), null);
            return context;
        } catch (GeneralSecurityException e) {
            throw new IOException("--acme-ca-bundle " + settings.caBundle() + " holds no usable certificate: " + e.getMessage(), e);
        }
    }

    /** The CA's problem document (RFC 7807), its type and detail and those of its sub-problems. */
    static String describe(Problem problem) {
        StringBuilder text = new StringBuilder(problem.getDetail().orElse(problem.getTitle().orElse("no detail")));
        text.append(" [").append(problem.getType()).append(']');
        for (Problem sub : problem.getSubProblems()) text.append("; ").append(describe(sub));
        return text.toString();
    }

    /** The reason of a failed request: the CA's problem document when it sent one. */
    static String describe(Exception e) {
        if (e instanceof AcmeServerException server && server.getProblem() != null) return describe(server.getProblem());
        StringBuilder text = new StringBuilder(Optional.ofNullable(e.getMessage()).orElse(e.getClass().getSimpleName()));
        for (Throwable cause = e.getCause(); cause != null; cause = cause.getCause()) {
            text.append(": ").append(Optional.ofNullable(cause.getMessage()).orElse(cause.getClass().getSimpleName()));
        }
        return text.toString();
    }

    /** An order or authorization the CA refused; the message holds its reason. */
    static final class OrderFailed extends AcmeException {
        OrderFailed(String message) {
            super(message);
        }
    }

    /** Any CA by its directory URL, with the roots of --acme-ca-bundle when given. */
    private static final class Provider extends GenericAcmeProvider {
        private final SSLContext trust;

        Provider(SSLContext trust) {
            this.trust = trust;
        }

        @Override
        protected HttpConnector createHttpConnector(NetworkSettings networkSettings) {
            return new HttpConnector(networkSettings) {
                @Override
                public HttpClient.Builder createClientBuilder() {
                    HttpClient.Builder builder = super.createClientBuilder();
                    return trust != null ? builder.sslContext(trust) : builder;
                }
            };
        }
    }
}
