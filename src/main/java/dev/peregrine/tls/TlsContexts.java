package dev.peregrine.tls;

import dev.peregrine.acme.CertificateManager;
import dev.peregrine.acme.CertifiedKey;
import dev.peregrine.config.ConfigException;
import dev.peregrine.config.ServerSettings;
import dev.peregrine.config.TlsSettings.CertificatePair;
import dev.peregrine.store.SharedStore;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.ssl.ApplicationProtocolConfig;
import io.netty.handler.ssl.ApplicationProtocolNames;
import io.netty.handler.ssl.OpenSsl;
import io.netty.handler.ssl.SniHandler;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslProvider;
import io.netty.incubator.codec.quic.QuicChannel;
import io.netty.incubator.codec.quic.QuicSslContext;
import io.netty.incubator.codec.quic.QuicSslEngine;
import io.netty.util.DomainWildcardMappingBuilder;
import io.netty.util.Mapping;
import io.netty.util.concurrent.Future;
import io.netty.util.concurrent.ImmediateEventExecutor;
import io.netty.util.concurrent.Promise;
import org.bouncycastle.asn1.pkcs.PrivateKeyInfo;
import org.bouncycastle.openssl.PEMKeyPair;
import org.bouncycastle.openssl.PEMParser;
import org.bouncycastle.openssl.jcajce.JcaPEMKeyConverter;
import org.jboss.logging.Logger;

import javax.naming.InvalidNameException;
import javax.naming.ldap.LdapName;
import javax.naming.ldap.Rdn;
import javax.net.ssl.SSLException;
import java.io.IOException;
import java.io.InputStream;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.PrivateKey;
import java.security.Signature;
import java.security.cert.Certificate;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.cert.CertificateParsingException;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;

/**
 * The server's TLS contexts, one per --tls-cert/--tls-key pair and one per --acme-domain certificate,
 * and the choice between them by SNI. The first pair answers clients that send no name or a name no
 * certificate carries; without pairs, the first ACME name that has a certificate does, and while none
 * has one a client that sends no name (a probe to an IP address) gets a self-signed
 * {@link FallbackCertificate}. A handshake for an ACME name that has no certificate yet is refused with
 * an alert; one that offers ALPN acme-tls/1 while the name's authorization is pending gets the
 * tls-alpn-01 certificate (RFC 8737) instead.
 *
 * <p>With --http3, QUIC chooses among the same certificates the same way ({@link QuicContexts}), except
 * that tls-alpn-01 is answered on TCP only, where ACME CAs validate.
 *
 * <p>Every file is read and checked here, before anything is served, so that a bad certificate or key
 * ends the start with one line naming it. {@link #reload} reads the files again (SIGHUP): new
 * connections get the new contexts, established ones keep theirs.
 */
public final class TlsContexts {
    private static final Logger LOG = Logger.getLogger("peregrine");
    /** Set to "jdk" to measure the JDK's TLS against BoringSSL (docs/TRANSPORT.md). */
    private static final String PROVIDER_PROPERTY = "peregrine.tls-provider";
    /** The largest plaintext TLS record (2^14 bytes); a ClientHello comes in such records. */
    private static final int MAX_RECORD = 16 * 1024;
    private static final CompletableFuture<CertifiedKey> NO_VALIDATION = CompletableFuture.completedFuture(null);
    private static final List<String> TLS13_SUITES = List.of("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256");

    private final List<CertificatePair> pairs;
    private final String ciphers;
    private final List<String> alpn;
    private final SslProvider provider;
    private final boolean http3;
    /** Null without --tls-cert pairs. */
    private volatile Mapping<String, SslContext> byName;
    /** Null without --acme-domain. */
    private final CertificateManager acme;
    /** The context of each ACME name's current certificate, and of each pending tls-alpn-01 certificate. */
    private final CertificateChoice<SslContext> managed;
    private final CertificateChoice<SslContext> validations;
    private final RefusalLog refusals = new RefusalLog();
    /** HTTP/3's certificates, or null without --http3. */
    private final QuicContexts quic;

    private TlsContexts(List<CertificatePair> pairs, String ciphers, List<String> alpn, boolean http3, CertificateManager acme,
                        FallbackCertificate fallback) {
        this.pairs = pairs;
        this.acme = acme;
        this.ciphers = ciphers;
        this.alpn = alpn;
        this.http3 = http3;
        this.quic = http3 ? new QuicContexts(acme, fallback, refusals) : null;
        this.managed = new CertificateChoice<>(acme, fallback, certified -> withCiphers(builder(certified.chain(), certified.key(), alpn)).build());
        this.validations = new CertificateChoice<>(acme, null,
                certified -> withCiphers(builder(certified.chain(), certified.key(), List.of(CertificateManager.ACME_TLS_PROTOCOL))).build());
        this.provider = "jdk".equalsIgnoreCase(System.getProperty(PROVIDER_PROPERTY)) || !OpenSsl.isAvailable() ? SslProvider.JDK : SslProvider.OPENSSL;
    }

    /** Loads every pair of {@code settings}; a file that cannot be used is a {@link ConfigException} naming it. */
    public static TlsContexts load(ServerSettings settings) {
        List<String> alpn = settings.protocols().http2Only() ? List.of(ApplicationProtocolNames.HTTP_2)
                : settings.protocols().http2() ? List.of(ApplicationProtocolNames.HTTP_2, ApplicationProtocolNames.HTTP_1_1)
                : List.of(ApplicationProtocolNames.HTTP_1_1);
        CertificateManager acme = settings.tls().acme() != null ? CertificateManager.open(settings.tls().acme(), settings.sharedStore() != null) : null;
        // With pairs, the first answers clients that send no name; with ACME names only, nothing may yet.
        FallbackCertificate fallback = acme != null && settings.tls().certificates().isEmpty() ? FallbackCertificate.generate() : null;
        TlsContexts contexts = new TlsContexts(settings.tls().certificates(), settings.tls().ciphers(), alpn, settings.protocols().http3(), acme, fallback);
        contexts.build();
        return contexts;
    }

    /** "BoringSSL" or "JDK": which TLS implementation serves. */
    public String implementation() {
        return provider == SslProvider.OPENSSL ? "BoringSSL" : "JDK";
    }

    /** The protocols offered by ALPN, in order of preference. */
    public List<String> alpn() {
        return alpn;
    }

    /** A handler that reads the client's hello and puts in the TLS handler of the certificate it names. */
    public SniHandler newHandler(long handshakeTimeoutMillis) {
        Mapping<String, SslContext> current = byName;
        // Bounds the ClientHello a client may send before a certificate is chosen (a few KiB in practice).
        return new SniHandler(current != null ? current : name -> null, MAX_RECORD, handshakeTimeoutMillis) {
            /** What the hello offers by ALPN; null when it offers nothing (then HTTP/1.1 is served). */
            private List<String> offered;
            private boolean refused;
            /** The hello while an answer is awaited from the storage of tls-alpn-01 certificates: Netty's until then. */
            private ByteBuf awaited;

            @Override
            protected void decode(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) throws Exception {
                // A record longer than TLS allows (RFC 8446 5.1) cannot start a handshake, but Netty would wait
                // for all of it, up to the handshake timeout, before looking at the ClientHello.
                if (in.readableBytes() >= 5 && in.getUnsignedShort(in.readerIndex() + 3) > MAX_RECORD) {
                    in.skipBytes(in.readableBytes());
                    ctx.close();
                    return;
                }
                super.decode(ctx, in, out);
            }

            @Override
            protected Future<SslContext> lookup(ChannelHandlerContext ctx, ByteBuf clientHello) throws Exception {
                // Null when Netty could not parse the hello and falls back to the default certificate.
                offered = clientHello != null ? ClientHelloAlpn.offered(clientHello) : null;
                Future<SslContext> chosen = super.lookup(ctx, clientHello);
                // Netty releases the hello when the lookup completes, and a refusal's never does.
                if (refused && clientHello != null) clientHello.release();
                else if (!chosen.isDone()) awaited = clientHello;
                return chosen;
            }

            @Override
            protected Future<SslContext> lookup(ChannelHandlerContext ctx, String hostname) {
                CompletableFuture<CertifiedKey> validation = validation(hostname, offered).exceptionally(failed -> null);
                if (validation.isDone()) return answer(ctx, hostname, validation.getNow(null));
                // The tls-alpn-01 certificate is in --shared-store: reads wait for it, the I/O thread does not.
                Promise<SslContext> later = ctx.executor().newPromise();
                validation.whenComplete((certified, error) -> ctx.executor().execute(() -> {
                    Future<SslContext> chosen = answer(ctx, hostname, error == null ? certified : null);
                    if (chosen.isDone()) {
                        later.setSuccess(chosen.getNow());
                    } else if (awaited != null) {
                        awaited.release(); // refused: Netty's listener, which would have released it, never runs
                        awaited = null;
                    }
                }));
                return later;
            }

            /** The chosen context, or a future that never completes when the handshake is refused (with an alert, here). */
            private Future<SslContext> answer(ChannelHandlerContext ctx, String hostname, CertifiedKey validation) {
                try {
                    return ImmediateEventExecutor.INSTANCE.newSucceededFuture(choose(hostname, offered, current, validation));
                } catch (NoCertificate refusal) {
                    // Answered here rather than by a failed future, on which Netty would retry with the default certificate.
                    refusals.refused(String.valueOf(hostname), "TLS handshake from " + ctx.channel().remoteAddress(), refusal.getMessage());
                    refused = true;
                    ctx.writeAndFlush(Unpooled.wrappedBuffer(refusal.alert())).addListener(ChannelFutureListener.CLOSE);
                    return ImmediateEventExecutor.INSTANCE.newPromise();
                }
            }
        };
    }

    /** The pending tls-alpn-01 certificate for a hello naming {@code hostname} and offering acme-tls/1; null otherwise. */
    private CompletableFuture<CertifiedKey> validation(String hostname, List<String> offered) {
        if (offered != null && acme != null && hostname != null && offered.contains(CertificateManager.ACME_TLS_PROTOCOL) && acme.manages(hostname)) {
            return acme.challenge(hostname);
        }
        return NO_VALIDATION;
    }

    /** With --shared-store: the ACME certificates are kept in {@code store} (the worker's connection), not --acme-cache. */
    public void keepCertificatesIn(SharedStore store) {
        if (acme != null) acme.keepIn(store);
    }

    /** Starts obtaining and renewing the ACME certificates (in a worker; a supervisor only checks the settings). */
    public void startCertificateManagement() {
        if (acme != null) acme.start();
    }

    /**
     * The context for a ClientHello naming {@code hostname} (null without SNI) and offering {@code offered}
     * by ALPN; {@code validation}, when not null, is the pending tls-alpn-01 certificate it asks for.
     */
    private SslContext choose(String hostname, List<String> offered, Mapping<String, SslContext> pairsByName,
                              CertifiedKey validation) throws NoCertificate {
        if (validation != null) return validations.contextOf(hostname, validation);
        // RFC 7301 3.2. BoringSSL, through Netty, can only complete such a handshake with no protocol (which then
        // served HTTP/1.1 to a client that never asked for it, even on acme-tls/1, against RFC 8737 3).
        if (offered != null && Collections.disjoint(offered, alpn)) {
            throw new NoCertificate(NoCertificate.NO_APPLICATION_PROTOCOL, "the client offers by ALPN only " + offered + ", none of which is served");
        }
        return managed.choose(hostname, pairsByName);
    }

    /** Reads the certificate files again; on failure the contexts in use stay, and the reason is logged. */
    public void reload() {
        try {
            build();
            if (acme != null) acme.rescan();
            LOG.info("Reloaded the TLS certificates");
        } catch (RuntimeException e) { // ConfigException names the option and the file; anything else its own cause
            LOG.errorf("Could not reload the TLS certificates, the previous ones stay in use: %s", e.getMessage());
        }
    }

    /**
     * The TLS engine of each new QUIC connection: its certificate is chosen by SNI during its handshake,
     * from the pairs and ACME certificates in use at that moment, as for TCP ({@link QuicContexts}).
     */
    public Function<QuicChannel, QuicSslEngine> quicEngines() {
        return quic.engines();
    }

    /** Reads and checks every pair, then puts the new contexts in use: all of them or, on failure, none. */
    private void build() {
        DomainWildcardMappingBuilder<SslContext> mapping = null;
        DomainWildcardMappingBuilder<QuicSslContext> quicMapping = null;
        for (CertificatePair pair : pairs) {
            X509Certificate[] chain = readChain(pair.certificate());
            PrivateKey key = readKey(pair.key());
            checkPair(chain[0], key, pair);
            SslContext context = context(chain, key, pair);
            QuicSslContext quicContext = http3 ? QuicContexts.context(chain, key) : null;
            if (mapping == null) {
                // The first pair is the default: it answers names no certificate carries, and clients that send none.
                mapping = new DomainWildcardMappingBuilder<>(pairs.size() * 4 + 1, context);
                if (http3) quicMapping = new DomainWildcardMappingBuilder<>(pairs.size() * 4 + 1, quicContext);
            }
            for (String name : names(chain[0])) {
                mapping.add(name, context);
                if (quicMapping != null) quicMapping.add(name, quicContext);
            }
        }
        byName = mapping != null ? mapping.build() : null;
        if (quic != null) quic.pairs(quicMapping != null ? quicMapping.build() : null);
    }

    private SslContext context(X509Certificate[] chain, PrivateKey key, CertificatePair pair) {
        try {
            SslContext context = withCiphers(builder(chain, key, alpn)).build();
            if (ciphers != null) checkCiphers(context);
            return context;
        } catch (SSLException | IllegalArgumentException e) {
            if (ciphers != null && String.valueOf(e.getMessage()).toLowerCase(Locale.ROOT).contains("cipher")) {
                throw new ConfigException("invalid value for option '--tls-ciphers': '" + ciphers + "' names a cipher this TLS library does not know");
            }
            throw new ConfigException("option '--tls-cert' " + pair.certificate() + " with '--tls-key' " + pair.key() + ": " + e.getMessage());
        }
    }

    private SslContextBuilder builder(X509Certificate[] chain, PrivateKey key, List<String> protocols) {
        return SslContextBuilder.forServer(key, chain)
                .sslProvider(provider)
                .protocols("TLSv1.3", "TLSv1.2")
                .applicationProtocolConfig(new ApplicationProtocolConfig(ApplicationProtocolConfig.Protocol.ALPN,
                        ApplicationProtocolConfig.SelectorFailureBehavior.NO_ADVERTISE,
                        ApplicationProtocolConfig.SelectedListenerFailureBehavior.ACCEPT, protocols));
    }

    private SslContextBuilder withCiphers(SslContextBuilder builder) {
        if (ciphers == null) return builder;
        List<String> suites = new ArrayList<>();
        for (String cipher : ciphers.split("[:,]")) {
            if (!cipher.isBlank()) suites.add(cipher.trim());
        }
        if (suites.isEmpty()) throw new ConfigException("invalid value for option '--tls-ciphers': no cipher named");
        // The list is for TLS 1.2, as with OpenSSL; TLS 1.3 keeps its own suites.
        suites.addAll(TLS13_SUITES);
        return builder.ciphers(suites);
    }

    /** An unknown cipher name is dropped silently by the TLS libraries: refuse a list that leaves no TLS 1.2 cipher. */
    private void checkCiphers(SslContext context) {
        boolean tls12 = context.cipherSuites().stream().anyMatch(suite -> !TLS13_SUITES.contains(suite));
        if (!tls12) throw new ConfigException("invalid value for option '--tls-ciphers': '" + ciphers + "' names no cipher this TLS library knows");
    }

    private static X509Certificate[] readChain(Path file) {
        Collection<? extends Certificate> certificates;
        try (InputStream in = Files.newInputStream(file)) {
            certificates = CertificateFactory.getInstance("X.509").generateCertificates(in);
        } catch (NoSuchFileException e) {
            throw new ConfigException("option '--tls-cert': " + file + " does not exist");
        } catch (IOException e) {
            throw new ConfigException("option '--tls-cert': cannot read " + file + (e instanceof AccessDeniedException ? " (permission denied)" : ""));
        } catch (CertificateException e) {
            // The JDK's message names its own classes (a base64 decoder...), which tells a user nothing more.
            throw new ConfigException("option '--tls-cert': " + file + " holds no valid PEM certificate");
        }
        if (certificates.isEmpty()) throw new ConfigException("option '--tls-cert': " + file + " holds no PEM certificate");
        return certificates.stream().map(X509Certificate.class::cast).toArray(X509Certificate[]::new);
    }

    /**
     * Reads PKCS#8 and the traditional formats (PKCS#1 RSA, SEC1 EC) through Bouncy Castle's PEM parser:
     * the JDK reads PKCS#8 only, and OpenSSL writes the traditional formats by default in older versions.
     */
    private static PrivateKey readKey(Path file) {
        Object pem;
        try (Reader reader = Files.newBufferedReader(file, StandardCharsets.US_ASCII); PEMParser parser = new PEMParser(reader)) {
            pem = parser.readObject();
            while (pem != null && !(pem instanceof PEMKeyPair) && !(pem instanceof PrivateKeyInfo)) {
                pem = parser.readObject(); // e.g. "EC PARAMETERS" ahead of the key
            }
        } catch (NoSuchFileException e) {
            throw new ConfigException("option '--tls-key': " + file + " does not exist");
        } catch (IOException | RuntimeException e) {
            throw new ConfigException("option '--tls-key': " + file + " holds no readable PEM private key");
        }
        if (pem == null) {
            throw new ConfigException("option '--tls-key': " + file + " holds no unencrypted PEM private key");
        }
        try {
            JcaPEMKeyConverter converter = new JcaPEMKeyConverter();
            return pem instanceof PEMKeyPair pair ? converter.getKeyPair(pair).getPrivate() : converter.getPrivateKey((PrivateKeyInfo) pem);
        } catch (IOException e) {
            throw new ConfigException("option '--tls-key': " + file + " holds a private key of a kind that cannot be used");
        }
    }

    /** Signs with the key and verifies with the certificate: the one check that works for every key type. */
    private static void checkPair(X509Certificate certificate, PrivateKey key, CertificatePair pair) {
        String algorithm = switch (key.getAlgorithm()) {
            case "RSA" -> "SHA256withRSA";
            case "EC", "ECDSA" -> "SHA256withECDSA";
            // Ed25519 and RSA-PSS keys load, but the TLS handshake then fails inside netty-tcnative: refused here instead.
            default -> throw new ConfigException("option '--tls-key': " + pair.key() + " holds a " + key.getAlgorithm()
                    + " key; RSA and ECDSA keys are supported");
        };
        boolean matches;
        try {
            byte[] probe = "peregrine".getBytes(StandardCharsets.US_ASCII);
            Signature signer = Signature.getInstance(algorithm);
            signer.initSign(key);
            signer.update(probe);
            byte[] signature = signer.sign();
            Signature verifier = Signature.getInstance(algorithm);
            verifier.initVerify(certificate.getPublicKey());
            verifier.update(probe);
            matches = verifier.verify(signature);
        } catch (GeneralSecurityException e) {
            matches = false;
        }
        if (!matches) {
            throw new ConfigException("option '--tls-key': " + pair.key() + " is not the private key of the certificate in " + pair.certificate());
        }
    }

    /** The DNS names of the subjectAltName extension, or the subject's CN when there are none. */
    static Set<String> names(X509Certificate certificate) {
        Set<String> names = new LinkedHashSet<>();
        try {
            Collection<List<?>> alternatives = certificate.getSubjectAlternativeNames();
            if (alternatives != null) {
                for (List<?> entry : alternatives) {
                    if (entry.size() >= 2 && Integer.valueOf(2).equals(entry.get(0))) names.add(String.valueOf(entry.get(1)).toLowerCase(Locale.ROOT));
                }
            }
        } catch (CertificateParsingException ignored) {
            // An unreadable extension names nothing; the CN may still.
        }
        if (names.isEmpty()) {
            try {
                for (Rdn rdn : new LdapName(certificate.getSubjectX500Principal().getName()).getRdns()) {
                    if (rdn.getType().equalsIgnoreCase("CN")) names.add(String.valueOf(rdn.getValue()).toLowerCase(Locale.ROOT));
                }
            } catch (InvalidNameException ignored) {
                // No usable CN: the certificate is reachable as the default only.
            }
        }
        return names;
    }
}
