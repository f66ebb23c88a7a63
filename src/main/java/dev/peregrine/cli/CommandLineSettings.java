package dev.peregrine.cli;

import dev.peregrine.config.AcmeSettings;
import dev.peregrine.config.AppSettings;
import dev.peregrine.config.CacheSettings;
import dev.peregrine.config.CompressionSettings;
import dev.peregrine.config.ConfigException;
import dev.peregrine.config.EdgeSettings;
import dev.peregrine.config.EdgeSettings.StaticMount;
import dev.peregrine.config.LimitSettings;
import dev.peregrine.config.ListenSettings;
import dev.peregrine.config.LogFormat;
import dev.peregrine.config.OperationsSettings;
import dev.peregrine.config.ProtocolSettings;
import dev.peregrine.config.PythonSettings;
import dev.peregrine.config.RateLimitSettings;
import dev.peregrine.config.ServerSettings;
import dev.peregrine.config.SharedStoreSettings;
import dev.peregrine.config.TlsSettings;
import dev.peregrine.config.TlsSettings.CertificatePair;
import dev.peregrine.config.TrustedProxies;
import dev.peregrine.config.WebSocketSettings;
import dev.peregrine.config.WorkerSettings;

import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Turns a parsed command line into the configuration records, checking what no single option can:
 * ranges, options that need or exclude others, and the ones whose feature is not built. Every value is
 * present by now (the options declare their defaults), except the switches, which are null when off.
 */
public final class CommandLineSettings {
    private CommandLineSettings() {}

    public static ServerSettings read(PeregrineCommand c) {
        if (c.target == null || c.target.isBlank()) throw new ConfigException("missing MODULE:ATTRIBUTE, the application to serve (see --help)");
        if (!c.target.contains(":")) throw new ConfigException("the application must be given as MODULE:ATTRIBUTE, not '" + c.target + "'");
        refuseUnbuilt(c);
        ListenSettings listen = listen(c);
        TlsSettings tls = tls(c, listen);
        ProtocolSettings protocols = protocols(c, listen, tls);
        return new ServerSettings(
                listen,
                app(c, tls),
                new PythonSettings(c.venv, !on(c.noAutoVenv), List.copyOf(c.pythonPath), !on(c.noGcFreeze)),
                new LimitSettings(
                        range("--max-body", c.maxBody, 0, Long.MAX_VALUE),
                        range("--max-header-size", c.maxHeaderSize, 256, 16 * 1024 * 1024),
                        range("--keep-alive", c.keepAlive, 0, Long.MAX_VALUE),
                        range("--request-timeout", c.requestTimeout, 0, Long.MAX_VALUE),
                        range("--graceful-timeout", c.gracefulTimeout, 0, Long.MAX_VALUE)),
                workers(c),
                tls,
                protocols,
                webSocket(c),
                new EdgeSettings(healthCheckPath(c.healthCheckPath), rateLimit(c), staticMounts(c.staticDir), compressStatic(c),
                        compression(c), cache(c)),
                operations(c, listen),
                sharedStore(c, System.getenv(SHARED_STORE_PASSWORD)));
    }

    /** Where the shared store's password is read when its URL holds none: the environment, out of ps and shell history. */
    public static final String SHARED_STORE_PASSWORD = "PEREGRINE_SHARED_STORE_PASSWORD";

    /** Null without --shared-store. No message repeats the URL, which may hold the password. */
    static SharedStoreSettings sharedStore(PeregrineCommand c, String passwordFromEnv) {
        if (c.sharedStore == null) {
            if (c.sharedStoreCa != null) throw new ConfigException("option '--shared-store-ca' needs --shared-store");
            return null;
        }
        if (c.rateLimit == null && c.cacheSize == null && c.acmeDomain.isEmpty()) {
            throw new ConfigException("option '--shared-store' needs --rate-limit, --cache-size or --acme-domain: nothing else goes through it");
        }
        SharedStoreSettings store;
        try {
            store = SharedStoreSettings.parse(c.sharedStore, c.sharedStoreCa, passwordFromEnv,
                    range("--shared-store-timeout", c.sharedStoreTimeout, 1, 60_000));
        } catch (IllegalArgumentException e) {
            throw new ConfigException("invalid value for option '--shared-store': " + e.getMessage());
        }
        if (c.sharedStoreCa != null) {
            if (!store.tls()) throw new ConfigException("option '--shared-store-ca' needs a rediss:// --shared-store");
            if (!Files.isReadable(c.sharedStoreCa)) {
                throw new ConfigException("invalid value for option '--shared-store-ca': cannot read " + c.sharedStoreCa);
            }
        }
        return store;
    }

    private static ListenSettings listen(PeregrineCommand c) {
        return new ListenSettings(c.host, range("--port", c.port, 0, 65535), c.unix,
                range("--backlog", c.backlog, 1, Integer.MAX_VALUE),
                range("--max-connections", c.maxConnections, 1, Integer.MAX_VALUE));
    }

    private static AppSettings app(PeregrineCommand c, TlsSettings tls) {
        String scheme = c.scheme;
        if (scheme != null && !scheme.equals("http") && !scheme.equals("https")) {
            throw new ConfigException("invalid value for option '--scheme': '" + scheme + "' is neither http nor https");
        }
        return new AppSettings(c.target, c.protocol, on(c.factory), normalizeRootPath(c.rootPath),
                scheme != null ? scheme : tls.enabled() ? "https" : "http",
                range("--wsgi-threads", c.wsgiThreads, 1, 1024), !on(c.noLifespan), !on(c.noUvloop));
    }

    private static TlsSettings tls(PeregrineCommand c, ListenSettings listen) {
        List<CertificatePair> certificates = certificatePairs(c);
        AcmeSettings acme = acme(c);
        boolean tls = !certificates.isEmpty() || acme != null;
        if (certificates.isEmpty() && c.tlsCiphers != null) throw new ConfigException("option '--tls-ciphers' needs --tls-cert and --tls-key");
        if (!tls && c.redirectHttp != null) throw new ConfigException("option '--redirect-http' needs TLS (--tls-cert and --tls-key, or --acme-domain)");
        if (!tls && c.hsts != null) throw new ConfigException("option '--hsts' needs TLS (--tls-cert and --tls-key, or --acme-domain)");
        if (c.redirectHttp != null && listen.unix() == null && c.redirectHttp == listen.port()) {
            throw new ConfigException("invalid value for option '--redirect-http': " + c.redirectHttp + " is the TLS --port");
        }
        return new TlsSettings(certificates, c.tlsCiphers,
                c.redirectHttp == null ? null : range("--redirect-http", c.redirectHttp, 1, 65535),
                c.hsts == null ? -1 : range("--hsts", c.hsts, 0, Long.MAX_VALUE),
                acme);
    }

    /** Null without --acme-domain; the other --acme-* options are refused without it, as they would do nothing. */
    private static AcmeSettings acme(PeregrineCommand c) {
        if (c.acmeDomain.isEmpty()) {
            Map<String, Boolean> given = new LinkedHashMap<>();
            given.put("--acme-email", c.acmeEmail != null);
            given.put("--acme-cache", c.acmeCache != null);
            given.put("--acme-staging", on(c.acmeStaging));
            given.put("--acme-directory", c.acmeDirectory != null);
            given.put("--acme-ca-bundle", c.acmeCaBundle != null);
            for (Map.Entry<String, Boolean> option : given.entrySet()) {
                if (option.getValue()) throw new ConfigException("option '" + option.getKey() + "' needs --acme-domain");
            }
            return null;
        }
        List<String> domains = new ArrayList<>();
        for (String domain : c.acmeDomain) {
            String name = AcmeNames.check(domain);
            if (!domains.contains(name)) domains.add(name);
        }
        if (c.acmeEmail != null && !c.acmeEmail.matches("[^@\\s]+@[^@\\s]+")) {
            throw new ConfigException("invalid value for option '--acme-email': '" + c.acmeEmail + "' is not an e-mail address");
        }
        if (on(c.acmeStaging) && c.acmeDirectory != null) throw new ConfigException("options '--acme-staging' and '--acme-directory' exclude each other");
        URI directory = on(c.acmeStaging) ? AcmeSettings.LETS_ENCRYPT_STAGING
                : c.acmeDirectory != null ? acmeDirectory(c.acmeDirectory) : AcmeSettings.LETS_ENCRYPT;
        if (c.acmeCaBundle != null && !Files.isReadable(c.acmeCaBundle)) {
            throw new ConfigException("option '--acme-ca-bundle': cannot read " + c.acmeCaBundle);
        }
        Path cache = c.acmeCache != null ? c.acmeCache : AcmeSettings.DEFAULT_CACHE;
        checkCacheDirectory(cache);
        return new AcmeSettings(List.copyOf(domains), c.acmeEmail, cache, directory, c.acmeCaBundle);
    }

    private static URI acmeDirectory(String url) {
        try {
            URI uri = new URI(url);
            if ("https".equalsIgnoreCase(uri.getScheme()) && uri.getHost() != null) return uri;
        } catch (URISyntaxException ignored) {
            // Refused below with the value.
        }
        throw new ConfigException("invalid value for option '--acme-directory': '" + url + "' is not an https URL");
    }

    /** The directory may not exist yet (it is created at startup), but then a parent must let us create it. */
    private static void checkCacheDirectory(Path cache) {
        if (Files.exists(cache)) {
            if (!Files.isDirectory(cache)) throw new ConfigException("option '--acme-cache': " + cache + " is not a directory");
            if (!Files.isReadable(cache) || !Files.isWritable(cache) || !Files.isExecutable(cache)) {
                throw new ConfigException("option '--acme-cache': cannot read and write " + cache + " (permission denied)");
            }
            return;
        }
        Path parent = cache.toAbsolutePath().getParent();
        while (parent != null && !Files.exists(parent)) parent = parent.getParent();
        if (parent == null || !Files.isDirectory(parent) || !Files.isWritable(parent)) {
            throw new ConfigException("option '--acme-cache': cannot create " + cache + (parent == null ? "" : " in " + parent) + " (permission denied)");
        }
    }

    private static ProtocolSettings protocols(PeregrineCommand c, ListenSettings listen, TlsSettings tls) {
        boolean http3 = on(c.http3);
        if (http3 && !tls.enabled()) throw new ConfigException("option '--http3' needs TLS (--tls-cert and --tls-key, or --acme-domain): QUIC is always encrypted");
        if (!http3 && c.quicPort != null) throw new ConfigException("option '--quic-port' needs --http3");
        if (http3 && c.quicPort == null && (listen.unix() != null || listen.port() == 0)) {
            throw new ConfigException("option '--http3' needs --quic-port when " + (listen.unix() != null ? "listening on --unix" : "--port is 0"));
        }
        if (on(c.noHttp2) && on(c.http2Only)) throw new ConfigException("options '--no-http2' and '--http2-only' exclude each other");
        return new ProtocolSettings(!on(c.noHttp2), on(c.http2Only), http3,
                http3 ? range("--quic-port", c.quicPort != null ? c.quicPort : listen.port(), 1, 65535) : 0);
    }

    /** Null when --no-websockets: upgrades are then answered 501. */
    private static WebSocketSettings webSocket(PeregrineCommand c) {
        WebSocketSettings settings = new WebSocketSettings(
                (int) range("--ws-max-message", c.wsMaxMessage, 1, Integer.MAX_VALUE - 8),
                range("--ws-ping-interval", c.wsPingInterval, 0, Long.MAX_VALUE),
                range("--ws-ping-timeout", c.wsPingTimeout, 0, Long.MAX_VALUE),
                range("--ws-max-queue", c.wsMaxQueue, 1, Integer.MAX_VALUE),
                range("--ws-max-queue-bytes", c.wsMaxQueueBytes, 1, Long.MAX_VALUE),
                on(c.wsCompress));
        return on(c.noWebsockets) ? null : settings;
    }

    private static OperationsSettings operations(PeregrineCommand c, ListenSettings listen) {
        Integer metricsPort = c.metricsPort == null ? null : range("--metrics-port", c.metricsPort, 0, 65535);
        String metricsHost = c.metricsHost != null ? c.metricsHost : listen.host();
        if (metricsPort != null && metricsPort != 0 && listen.unix() == null && metricsPort == listen.port() && metricsHost.equals(listen.host())) {
            throw new ConfigException("invalid value for option '--metrics-port': " + metricsPort + " is the application's --port");
        }
        return new OperationsSettings(metricsPort, metricsHost,
                on(c.accessLog) || c.accessLogFormat != null,
                c.accessLogFormat == LogFormat.json,
                on(c.requestId), on(c.requestStartHeader), on(c.traceContext),
                c.logLevel,
                trustedProxies(c.forwardedAllowIps));
    }

    private static List<CertificatePair> certificatePairs(PeregrineCommand c) {
        if (c.tlsCert.size() != c.tlsKey.size()) {
            throw new ConfigException(c.tlsCert.size() > c.tlsKey.size()
                    ? "option '--tls-cert' needs a --tls-key for each certificate (" + c.tlsCert.size() + " certificates, " + c.tlsKey.size() + " keys)"
                    : "option '--tls-key' needs a --tls-cert for each key (" + c.tlsKey.size() + " keys, " + c.tlsCert.size() + " certificates)");
        }
        List<CertificatePair> pairs = new ArrayList<>();
        for (int i = 0; i < c.tlsCert.size(); i++) pairs.add(new CertificatePair(c.tlsCert.get(i), c.tlsKey.get(i)));
        return List.copyOf(pairs);
    }

    /** 0 means one per CPU, as gunicorn users write $(nproc). */
    private static WorkerSettings workers(PeregrineCommand c) {
        int count = workerCount(range("--workers", c.workers, 0, 1024));
        boolean freeThreaded = on(c.freeThreaded);
        boolean processLifespan = false;
        if (c.lifespanScope != null) {
            switch (c.lifespanScope) {
                case "worker" -> { }
                case "process" -> {
                    // Worker processes cannot share one lifespan's state; threads of one process can.
                    if (!freeThreaded) throw new ConfigException("--lifespan-scope process needs --free-threaded: worker processes cannot share one lifespan's state");
                    processLifespan = true;
                }
                default -> throw new ConfigException("invalid value for option '--lifespan-scope': '" + c.lifespanScope + "' (expected worker or process)");
            }
        }
        // Each worker process would hold its threads to the core its I/O thread happens to be on, and two could pick one.
        if (on(c.shareCore) && c.workers != 1) throw new ConfigException("--share-core needs a single worker (--workers 1)");
        return new WorkerSettings(count,
                // --workers 0 asks for a supervisor even on a machine with one CPU, so that SIGHUP works there too.
                // Free-threaded workers get one too, for the same reasons: a module cannot be imported afresh
                // in a running interpreter, so a SIGHUP or a source change needs a new process, and the
                // supervisor keeps the PID the init system knows while one process takes over from another.
                c.workers != 1 || on(c.reload),
                range("--drain-delay", c.drainDelay, 0, Long.MAX_VALUE),
                on(c.reload), freeThreaded, processLifespan, on(c.shareCore));
    }

    private static int workerCount(int asked) {
        return asked == 0 ? Runtime.getRuntime().availableProcessors() : asked;
    }

    private static RateLimitSettings rateLimit(PeregrineCommand c) {
        if (c.rateLimit == null) {
            if (c.rateLimitBurst != null) throw new ConfigException("option '--rate-limit-burst' needs --rate-limit");
            return null;
        }
        if (c.rateLimitBurst != null && (c.rateLimitBurst < 1 || c.rateLimitBurst > RateLimitSettings.MAX_BURST)) {
            throw new ConfigException("invalid value for option '--rate-limit-burst': " + c.rateLimitBurst + " is not 1 to " + RateLimitSettings.MAX_BURST);
        }
        try {
            return RateLimitSettings.parse(c.rateLimit, c.rateLimitBurst);
        } catch (IllegalArgumentException e) {
            throw new ConfigException("invalid value for option '--rate-limit': " + e.getMessage());
        }
    }

    /** Null without --cache-size; --cache-max-object and --cache-ttl-max have defaults and are checked even then. */
    private static CacheSettings cache(PeregrineCommand c) {
        int ttl = range("--cache-ttl-max", c.cacheTtlMax, 1, 365 * 24 * 3600);
        int maxObjectKib = range("--cache-max-object", c.cacheMaxObject, 1, CacheSettings.MAX_SIZE_MIB * 1024 / CacheSettings.OBJECT_SHARE);
        if (c.cacheSize == null) return null;
        long bytes = (long) range("--cache-size", c.cacheSize, 1, CacheSettings.MAX_SIZE_MIB) * 1024 * 1024;
        if ((long) maxObjectKib * 1024 > bytes / CacheSettings.OBJECT_SHARE) {
            throw new ConfigException("invalid value for option '--cache-max-object': " + maxObjectKib + " KiB is more than a "
                    + CacheSettings.OBJECT_SHARE + "th of --cache-size " + c.cacheSize + " MiB");
        }
        return new CacheSettings(bytes, maxObjectKib * 1024, ttl);
    }

    private static String healthCheckPath(String path) {
        if (path == null) return null;
        if (!path.startsWith("/") || path.chars().anyMatch(ch -> ch <= ' ' || ch == '?' || ch == '#' || ch >= 0x7f)) {
            throw new ConfigException("invalid value for option '--health-check-path': '" + path + "' is not an absolute path without query");
        }
        return path;
    }

    /**
     * Each --static-dir PREFIX=DIR. The prefix is kept without a trailing slash, so that "/static" and
     * "/static/" mount the same; the directory must exist when the server starts.
     */
    private static List<StaticMount> staticMounts(List<String> pairs) {
        List<StaticMount> mounts = new ArrayList<>();
        for (String pair : pairs) {
            int eq = pair.indexOf('=');
            if (eq < 0) throw new ConfigException("invalid value for option '--static-dir': '" + pair + "' is not PREFIX=DIR");
            String prefix = pair.substring(0, eq), dir = pair.substring(eq + 1);
            if (!prefix.startsWith("/") || prefix.chars().anyMatch(ch -> ch <= ' ' || ch == '?' || ch == '#' || ch == '%' || ch >= 0x7f)) {
                throw new ConfigException("invalid value for option '--static-dir': the prefix '" + prefix + "' is not an absolute path (it must start with /)");
            }
            while (prefix.length() > 1 && prefix.endsWith("/")) prefix = prefix.substring(0, prefix.length() - 1);
            if (dir.isEmpty() || !Files.isDirectory(Path.of(dir))) {
                throw new ConfigException("invalid value for option '--static-dir': '" + dir + "' is not a directory");
            }
            mounts.add(new StaticMount(prefix, Path.of(dir).toAbsolutePath()));
        }
        return List.copyOf(mounts);
    }

    /** Null without --compress; --compress-min-size alone changes nothing. */
    private static CompressionSettings compression(PeregrineCommand c) {
        int minSize = range("--compress-min-size", c.compressMinSize, 0, Integer.MAX_VALUE);
        return on(c.compress) ? new CompressionSettings(minSize) : null;
    }

    private static boolean compressStatic(PeregrineCommand c) {
        if (on(c.compressStatic) && c.staticDir.isEmpty()) throw new ConfigException("option '--compress-static' needs --static-dir");
        return on(c.compressStatic);
    }

    private static TrustedProxies trustedProxies(String list) {
        try {
            return TrustedProxies.parse(list);
        } catch (IllegalArgumentException e) {
            throw new ConfigException("invalid value for option '--forwarded-allow-ips': " + e.getMessage());
        }
    }

    /**
     * Options whose feature is not built yet are refused by name rather than silently ignored: a user
     * who asks for a cache and gets none without a word would be misled.
     */
    private static void refuseUnbuilt(PeregrineCommand c) {
        if (on(c.ktls)) {
            // Kernel TLS needs the TLS library to hand its session keys to the socket (setsockopt TLS_TX);
            // neither the JDK's TLS nor the BoringSSL of netty-tcnative can do that.
            throw new ConfigException("option '--ktls' is not available: neither the JDK's TLS nor BoringSSL (netty-tcnative) "
                    + "can hand the session keys to the kernel; TLS is encrypted in the server instead");
        }
        Map<String, Boolean> asked = new LinkedHashMap<>();
        asked.put("--python-home", c.pythonHome != null);
        for (Map.Entry<String, Boolean> option : asked.entrySet()) {
            if (option.getValue()) throw new ConfigException(option.getKey() + " is not supported yet");
        }
    }

    /** A switch: null when not given anywhere. */
    private static boolean on(Boolean option) {
        return Boolean.TRUE.equals(option);
    }

    private static int range(String option, int value, int min, int max) {
        if (value < min || value > max) throw new ConfigException("invalid value for option '" + option + "': " + value + " is outside " + min + ".." + max);
        return value;
    }

    private static long range(String option, long value, long min, long max) {
        if (value < min || value > max) throw new ConfigException("invalid value for option '" + option + "': " + value + " is outside " + min + ".." + max);
        return value;
    }

    private static String normalizeRootPath(String rootPath) {
        String p = rootPath.startsWith("/") ? rootPath : "/" + rootPath;
        while (p.endsWith("/")) p = p.substring(0, p.length() - 1);
        return p;
    }
}
