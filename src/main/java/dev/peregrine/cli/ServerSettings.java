package dev.peregrine.cli;

import dev.peregrine.cli.PeregrineCommand.LogFormat;
import dev.peregrine.cli.PeregrineCommand.LogLevel;
import dev.peregrine.cli.PeregrineCommand.Protocol;
import dev.peregrine.proxy.TrustedProxies;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Everything the server needs to know, resolved and checked once from the command line and configuration. */
public record ServerSettings(
        String target,
        String host,
        int port,
        Path unix,
        int backlog,
        int maxConnections,
        Protocol protocol,
        boolean factory,
        String rootPath,
        String scheme,
        int wsgiThreads,
        boolean lifespan,
        boolean uvloop,
        Path venv,
        boolean autoVenv,
        List<Path> pythonPath,
        long maxBody,
        int maxHeaderSize,
        long keepAliveMillis,
        long requestTimeoutMillis,
        long gracefulTimeoutMillis,
        boolean websockets,
        boolean accessLog,
        LogLevel logLevel,
        int workers,
        boolean supervised,
        long drainDelayMillis,
        boolean reload,
        String healthCheckPath,
        Integer metricsPort,
        String metricsHost,
        boolean accessLogJson,
        TrustedProxies forwardedAllowIps,
        boolean requestId,
        boolean requestStartHeader,
        boolean traceContext,
        int wsMaxMessage,
        long wsPingIntervalMillis,
        long wsPingTimeoutMillis,
        int wsMaxQueue,
        long wsMaxQueueBytes,
        boolean wsCompress,
        /** Empty when TLS is off; the first pair is the default certificate, the others are chosen by SNI. */
        List<CertificatePair> tlsCertificates,
        String tlsCiphers,
        boolean http2,
        boolean http2Only,
        Integer redirectHttpPort,
        /** -1 when no Strict-Transport-Security header is added. */
        long hstsSeconds,
        boolean http3,
        /** The UDP port of HTTP/3 when it is on. */
        int quicPort) {

    /** One --tls-cert and the --tls-key given with it. */
    public record CertificatePair(Path certificate, Path key) {}

    public boolean tls() {
        return !tlsCertificates.isEmpty();
    }

    public static ServerSettings from(PeregrineCommand c) {
        if (c.target == null || c.target.isBlank()) throw new UsageException("missing MODULE:ATTRIBUTE, the application to serve (see --help)");
        if (!c.target.contains(":")) throw new UsageException("the application must be given as MODULE:ATTRIBUTE, not '" + c.target + "'");
        refuseUnbuilt(c);
        List<CertificatePair> certificates = certificatePairs(c);
        boolean tls = !certificates.isEmpty();
        if (!tls && c.tlsCiphers != null) throw new UsageException("option '--tls-ciphers' needs --tls-cert and --tls-key");
        if (!tls && c.redirectHttp != null) throw new UsageException("option '--redirect-http' needs TLS (--tls-cert and --tls-key)");
        if (!tls && c.hsts != null) throw new UsageException("option '--hsts' needs TLS (--tls-cert and --tls-key)");
        boolean http3 = value(c.http3, false);
        if (http3 && !tls) throw new UsageException("option '--http3' needs TLS (--tls-cert and --tls-key): QUIC is always encrypted");
        if (!http3 && c.quicPort != null) throw new UsageException("option '--quic-port' needs --http3");
        if (http3 && c.quicPort == null && (c.unix != null || value(c.port, 8000) == 0)) {
            throw new UsageException("option '--http3' needs --quic-port when " + (c.unix != null ? "listening on --unix" : "--port is 0"));
        }
        if (Boolean.TRUE.equals(c.noHttp2) && Boolean.TRUE.equals(c.http2Only)) {
            throw new UsageException("options '--no-http2' and '--http2-only' exclude each other");
        }
        if (c.redirectHttp != null && c.unix == null && c.redirectHttp.equals(value(c.port, 8000))) {
            throw new UsageException("invalid value for option '--redirect-http': " + c.redirectHttp + " is the TLS --port");
        }
        String scheme = c.scheme;
        if (scheme != null && !scheme.equals("http") && !scheme.equals("https")) {
            throw new UsageException("invalid value for option '--scheme': '" + scheme + "' is neither http nor https");
        }
        String host = value(c.host, "127.0.0.1");
        int port = range("--port", value(c.port, 8000), 0, 65535);
        Integer metricsPort = c.metricsPort == null ? null : range("--metrics-port", c.metricsPort, 0, 65535);
        String metricsHost = value(c.metricsHost, host);
        if (metricsPort != null && metricsPort != 0 && c.unix == null && metricsPort == port && metricsHost.equals(host)) {
            throw new UsageException("invalid value for option '--metrics-port': " + metricsPort + " is the application's --port");
        }
        return new ServerSettings(
                c.target,
                host,
                port,
                c.unix,
                range("--backlog", value(c.backlog, 2048), 1, Integer.MAX_VALUE),
                range("--max-connections", value(c.maxConnections, 4096), 1, Integer.MAX_VALUE),
                value(c.protocol, Protocol.auto),
                value(c.factory, false),
                normalizeRootPath(value(c.rootPath, "")),
                value(scheme, tls ? "https" : "http"),
                range("--wsgi-threads", value(c.wsgiThreads, 1), 1, 1024),
                !value(c.noLifespan, false),
                !value(c.noUvloop, false),
                c.venv,
                !value(c.noAutoVenv, false),
                List.copyOf(c.pythonPath),
                range("--max-body", value(c.maxBody, 16L * 1024 * 1024), 0, Long.MAX_VALUE),
                range("--max-header-size", value(c.maxHeaderSize, 32 * 1024), 256, 16 * 1024 * 1024),
                range("--keep-alive", value(c.keepAlive, 5000L), 0, Long.MAX_VALUE),
                range("--request-timeout", value(c.requestTimeout, 30_000L), 0, Long.MAX_VALUE),
                range("--graceful-timeout", value(c.gracefulTimeout, 10_000L), 0, Long.MAX_VALUE),
                !value(c.noWebsockets, false),
                value(c.accessLog, false) || c.accessLogFormat != null,
                value(c.logLevel, LogLevel.info),
                workerCount(range("--workers", value(c.workers, 1), 0, 1024)),
                // --workers 0 asks for a supervisor even on a machine with one CPU, so that SIGHUP works there too.
                value(c.workers, 1) != 1 || value(c.reload, false),
                range("--drain-delay", value(c.drainDelay, 0L), 0, Long.MAX_VALUE),
                value(c.reload, false),
                healthCheckPath(c.healthCheckPath),
                metricsPort,
                metricsHost,
                c.accessLogFormat == LogFormat.json,
                trustedProxies(value(c.forwardedAllowIps, TrustedProxies.DEFAULT)),
                value(c.requestId, false),
                value(c.requestStartHeader, false),
                value(c.traceContext, false),
                (int) range("--ws-max-message", value(c.wsMaxMessage, 16L * 1024 * 1024), 1, Integer.MAX_VALUE - 8),
                range("--ws-ping-interval", value(c.wsPingInterval, 20_000L), 0, Long.MAX_VALUE),
                range("--ws-ping-timeout", value(c.wsPingTimeout, 20_000L), 0, Long.MAX_VALUE),
                range("--ws-max-queue", value(c.wsMaxQueue, 32), 1, Integer.MAX_VALUE),
                range("--ws-max-queue-bytes", value(c.wsMaxQueueBytes, 4L * 1024 * 1024), 1, Long.MAX_VALUE),
                value(c.wsCompress, false),
                certificates,
                c.tlsCiphers,
                !value(c.noHttp2, false),
                value(c.http2Only, false),
                c.redirectHttp == null ? null : range("--redirect-http", c.redirectHttp, 1, 65535),
                c.hsts == null ? -1 : range("--hsts", c.hsts, 0, Long.MAX_VALUE),
                http3,
                http3 ? range("--quic-port", value(c.quicPort, port), 1, 65535) : 0);
    }

    private static List<CertificatePair> certificatePairs(PeregrineCommand c) {
        if (c.tlsCert.size() != c.tlsKey.size()) {
            throw new UsageException(c.tlsCert.size() > c.tlsKey.size()
                    ? "option '--tls-cert' needs a --tls-key for each certificate (" + c.tlsCert.size() + " certificates, " + c.tlsKey.size() + " keys)"
                    : "option '--tls-key' needs a --tls-cert for each key (" + c.tlsKey.size() + " keys, " + c.tlsCert.size() + " certificates)");
        }
        List<CertificatePair> pairs = new java.util.ArrayList<>();
        for (int i = 0; i < c.tlsCert.size(); i++) pairs.add(new CertificatePair(c.tlsCert.get(i), c.tlsKey.get(i)));
        return List.copyOf(pairs);
    }

    /** 0 means one per CPU, as gunicorn users write $(nproc). */
    private static int workerCount(int asked) {
        return asked == 0 ? Runtime.getRuntime().availableProcessors() : asked;
    }

    private static String healthCheckPath(String path) {
        if (path == null) return null;
        if (!path.startsWith("/") || path.chars().anyMatch(ch -> ch <= ' ' || ch == '?' || ch == '#' || ch >= 0x7f)) {
            throw new UsageException("invalid value for option '--health-check-path': '" + path + "' is not an absolute path without query");
        }
        return path;
    }

    private static TrustedProxies trustedProxies(String list) {
        try {
            return TrustedProxies.parse(list);
        } catch (IllegalArgumentException e) {
            throw new UsageException("invalid value for option '--forwarded-allow-ips': " + e.getMessage());
        }
    }

    /**
     * Options whose feature is not built yet are refused by name rather than silently ignored: a user
     * who asks for HTTP/3 and gets HTTP/1.1 without a word would be misled.
     */
    private static void refuseUnbuilt(PeregrineCommand c) {
        if (Boolean.TRUE.equals(c.ktls)) {
            // Kernel TLS needs the TLS library to hand its session keys to the socket (setsockopt TLS_TX);
            // neither the JDK's TLS nor the BoringSSL of netty-tcnative can do that.
            throw new UsageException("option '--ktls' is not available: neither the JDK's TLS nor BoringSSL (netty-tcnative) "
                    + "can hand the session keys to the kernel; TLS is encrypted in the server instead");
        }
        Map<String, Boolean> asked = new LinkedHashMap<>();
        asked.put("--free-threaded", Boolean.TRUE.equals(c.freeThreaded));
        asked.put("--lifespan-scope", c.lifespanScope != null);
        asked.put("--python-home", c.pythonHome != null);
        asked.put("--acme-domain", !c.acmeDomain.isEmpty());
        asked.put("--acme-email", c.acmeEmail != null);
        asked.put("--acme-cache", c.acmeCache != null);
        asked.put("--acme-staging", Boolean.TRUE.equals(c.acmeStaging));
        asked.put("--acme-directory", c.acmeDirectory != null);
        asked.put("--acme-ca-bundle", c.acmeCaBundle != null);
        asked.put("--static-dir", !c.staticDir.isEmpty());
        asked.put("--rate-limit", c.rateLimit != null);
        asked.put("--rate-limit-burst", c.rateLimitBurst != null);
        asked.put("--cache-size", c.cacheSize != null);
        asked.put("--cache-max-object", c.cacheMaxObject != null);
        asked.put("--cache-ttl-max", c.cacheTtlMax != null);
        asked.put("--compress", Boolean.TRUE.equals(c.compress));
        asked.put("--compress-min-size", c.compressMinSize != null);
        asked.put("--compress-static", Boolean.TRUE.equals(c.compressStatic));
        for (Map.Entry<String, Boolean> option : asked.entrySet()) {
            if (option.getValue()) throw new UsageException(option.getKey() + " is not supported yet");
        }
    }

    private static <T> T value(T given, T fallback) {
        return given != null ? given : fallback;
    }

    private static int range(String option, int value, int min, int max) {
        if (value < min || value > max) throw new UsageException("invalid value for option '" + option + "': " + value + " is outside " + min + ".." + max);
        return value;
    }

    private static long range(String option, long value, long min, long max) {
        if (value < min || value > max) throw new UsageException("invalid value for option '" + option + "': " + value + " is outside " + min + ".." + max);
        return value;
    }

    private static String normalizeRootPath(String rootPath) {
        String p = rootPath.startsWith("/") ? rootPath : "/" + rootPath;
        while (p.endsWith("/")) p = p.substring(0, p.length() - 1);
        return p;
    }
}
