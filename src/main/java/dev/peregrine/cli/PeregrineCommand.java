package dev.peregrine.cli;

import dev.peregrine.config.ApplicationProtocol;
import dev.peregrine.config.ConfigException;
import dev.peregrine.config.LogFormat;
import dev.peregrine.config.LogLevel;
import dev.peregrine.config.ServerSettings;
import io.quarkus.picocli.runtime.annotations.TopCommand;
import jakarta.inject.Inject;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;

/**
 * {@code peregrine [options] MODULE:ATTRIBUTE}: every option of the product, under the names users know
 * from uvicorn and gunicorn. Values come from the command line, else from {@link ConfigDefaults}
 * ({@code -D} properties, {@code PEREGRINE_*} variables, then {@code application.properties}), else from
 * the {@code defaultValue} declared here, the one place a default is written. This class only parses:
 * {@link CommandLineSettings} turns what it parsed into the configuration records, and the entry point
 * it is given starts the server.
 */
@TopCommand
@Command(name = "peregrine", mixinStandardHelpOptions = true, versionProvider = VersionProvider.class, sortOptions = false,
        usageHelpAutoWidth = true,
        description = "Serve a Python ASGI or WSGI application. The protocol is detected from the callable.")
public class PeregrineCommand implements Callable<Integer> {

    @Parameters(index = "0", paramLabel = "MODULE:ATTRIBUTE", arity = "0..1",
            description = "The application, e.g. main:app or myproject.wsgi:application.")
    public String target;

    // Network
    @Option(names = "--host", defaultValue = "127.0.0.1", paramLabel = "HOST", description = "Interface to bind (default ${DEFAULT-VALUE}).") public String host;
    @Option(names = "--port", defaultValue = "8000", paramLabel = "PORT", description = "Port to bind (default ${DEFAULT-VALUE}).") public Integer port;
    @Option(names = "--unix", paramLabel = "PATH", description = "Listen on a unix socket instead.") public Path unix;
    @Option(names = "--backlog", defaultValue = "2048", paramLabel = "N", description = "Listen backlog (default ${DEFAULT-VALUE}).") public Integer backlog;
    @Option(names = "--max-connections", defaultValue = "4096", paramLabel = "N", description = "Concurrent connections per worker (default ${DEFAULT-VALUE}); at the limit, the one waiting longest on its client makes room.") public Integer maxConnections;
    @Option(names = "--forwarded-allow-ips", defaultValue = "127.0.0.1,::1", paramLabel = "LIST", description = "Proxies whose X-Forwarded-*/Forwarded headers are trusted: addresses, CIDR blocks, unix, or * (default ${DEFAULT-VALUE}).") public String forwardedAllowIps;

    // Application
    @Option(names = "--protocol", defaultValue = "auto", paramLabel = "wsgi|asgi", description = "Force the application protocol (default: detect).") public ApplicationProtocol protocol;
    @Option(names = "--factory", description = "The target is a factory returning the application.") public Boolean factory;
    @Option(names = "--root-path", defaultValue = "", paramLabel = "PATH", description = "SCRIPT_NAME / ASGI root_path prefix.") public String rootPath;
    @Option(names = "--scheme", paramLabel = "http|https", description = "Scheme reported to the application.") public String scheme;
    @Option(names = "--wsgi-threads", defaultValue = "1", paramLabel = "N", description = "WSGI application threads per worker (default ${DEFAULT-VALUE}).") public Integer wsgiThreads;
    @Option(names = "--no-lifespan", description = "Skip the ASGI lifespan protocol.") public Boolean noLifespan;
    @Option(names = "--no-uvloop", description = "Do not use uvloop even when installed.") public Boolean noUvloop;

    // Python
    @Option(names = "--venv", paramLabel = "DIR", description = "Virtualenv whose packages the app should import.") public Path venv;
    @Option(names = "--no-auto-venv", description = "Ignore VIRTUAL_ENV from the environment.") public Boolean noAutoVenv;
    @Option(names = "--python-path", split = ",", splitSynopsisLabel = ",", paramLabel = "DIR", description = "Directory to prepend to sys.path (repeatable).") public List<Path> pythonPath = new ArrayList<>();
    @Option(names = "--python-home", paramLabel = "DIR", description = "PYTHONHOME of the embedded interpreter.") public Path pythonHome;
    @Option(names = "--no-gc-freeze", description = "Let Python's full garbage collections scan the objects made at start-up (default: frozen once the application has started).") public Boolean noGcFreeze;
    @Option(names = "--free-threaded", description = "Run the workers as threads of one process (free-threaded CPython).") public Boolean freeThreaded;
    @Option(names = "--lifespan-scope", paramLabel = "WHICH", description = "With --free-threaded: worker or process.") public String lifespanScope;

    // Limits and timeouts
    @Option(names = "--max-body", defaultValue = "16777216", paramLabel = "BYTES", description = "Largest accepted request body (default ${DEFAULT-VALUE}).") public Long maxBody;
    @Option(names = "--max-header-size", defaultValue = "32768", paramLabel = "BYTES", description = "Largest accepted request head (default ${DEFAULT-VALUE}).") public Integer maxHeaderSize;
    @Option(names = "--keep-alive", defaultValue = "5000", paramLabel = "MS", description = "Idle keep-alive timeout (default ${DEFAULT-VALUE}).") public Long keepAlive;
    @Option(names = "--request-timeout", defaultValue = "30000", paramLabel = "MS", description = "How long a request may stall mid-message (default ${DEFAULT-VALUE}).") public Long requestTimeout;

    // Workers and lifecycle
    @Option(names = "--workers", defaultValue = "1", paramLabel = "N", description = "Worker processes, 0 = one per CPU (default ${DEFAULT-VALUE}).") public Integer workers;
    @Option(names = "--graceful-timeout", defaultValue = "10000", paramLabel = "MS", description = "Time in-flight requests get on shutdown (default ${DEFAULT-VALUE}).") public Long gracefulTimeout;
    @Option(names = "--drain-delay", defaultValue = "0", paramLabel = "MS", description = "On SIGTERM, fail the health check and keep serving for MS first.") public Long drainDelay;
    @Option(names = "--reload", description = "Restart workers when source files change.") public Boolean reload;
    @Option(names = "--share-core", description = "With one worker and one application thread, hold the I/O thread and the application's thread to one core while they serve one or two connections: faster exchanges one at a time on virtual machines, but threads the application starts meanwhile keep that one core.") public Boolean shareCore;

    // Protocols
    @Option(names = "--no-http2", description = "Refuse HTTP/2 and answer HTTP/1.1 only.") public Boolean noHttp2;
    @Option(names = "--http2-only", description = "Serve only HTTP/2 (h2c), with no HTTP/1 fallback.") public Boolean http2Only;
    @Option(names = "--http3", description = "Also serve HTTP/3 over QUIC (needs TLS).") public Boolean http3;
    @Option(names = "--quic-port", paramLabel = "PORT", description = "UDP port for HTTP/3 (default: the TCP port).") public Integer quicPort;
    @Option(names = "--no-websockets", description = "Reject WebSocket upgrades with 501.") public Boolean noWebsockets;
    @Option(names = "--ws-max-message", defaultValue = "16777216", paramLabel = "BYTES", description = "Largest accepted WebSocket message.") public Long wsMaxMessage;
    @Option(names = "--ws-ping-interval", defaultValue = "20000", paramLabel = "MS", description = "Keepalive ping period, 0 to disable.") public Long wsPingInterval;
    @Option(names = "--ws-ping-timeout", defaultValue = "20000", paramLabel = "MS", description = "How long an unanswered ping may go.") public Long wsPingTimeout;
    @Option(names = "--ws-max-queue", defaultValue = "32", paramLabel = "N", description = "Messages buffered for a slow app.") public Integer wsMaxQueue;
    @Option(names = "--ws-max-queue-bytes", defaultValue = "4194304", paramLabel = "N", description = "Bytes buffered for a slow app.") public Long wsMaxQueueBytes;
    @Option(names = "--ws-compress", description = "permessage-deflate for clients that offer it.") public Boolean wsCompress;

    // TLS
    @Option(names = "--tls-cert", split = ",", splitSynopsisLabel = ",", paramLabel = "PATH", description = "PEM certificate chain; enables TLS (repeatable, SNI).") public List<Path> tlsCert = new ArrayList<>();
    @Option(names = "--tls-key", split = ",", splitSynopsisLabel = ",", paramLabel = "PATH", description = "PEM private key for the preceding --tls-cert.") public List<Path> tlsKey = new ArrayList<>();
    @Option(names = "--tls-ciphers", paramLabel = "LIST", description = "OpenSSL cipher list for TLS 1.2.") public String tlsCiphers;
    @Option(names = "--ktls", description = "Let the kernel encrypt TLS.") public Boolean ktls;
    @Option(names = "--acme-domain", split = ",", splitSynopsisLabel = ",", paramLabel = "NAME", description = "Get and renew a certificate by ACME (repeatable).") public List<String> acmeDomain = new ArrayList<>();
    @Option(names = "--acme-email", paramLabel = "ADDR", description = "Contact address for the ACME account.") public String acmeEmail;
    @Option(names = "--acme-cache", paramLabel = "DIR", description = "Account key and certificate directory (default ./acme).") public Path acmeCache;
    @Option(names = "--acme-staging", description = "Use Let's Encrypt's staging CA.") public Boolean acmeStaging;
    @Option(names = "--acme-directory", paramLabel = "URL", description = "Use another ACME CA.") public String acmeDirectory;
    @Option(names = "--acme-ca-bundle", paramLabel = "PATH", description = "Roots to trust for the CA's own HTTPS.") public Path acmeCaBundle;
    @Option(names = "--redirect-http", paramLabel = "PORT", description = "Answer plain HTTP on PORT with a redirect to https.") public Integer redirectHttp;
    @Option(names = "--hsts", paramLabel = "SECONDS", description = "Strict-Transport-Security on every TLS response.") public Long hsts;

    // Edge
    @Option(names = "--static-dir", split = ",", splitSynopsisLabel = ",", paramLabel = "P=DIR", description = "Serve URL prefix P from DIR (repeatable).") public List<String> staticDir = new ArrayList<>();
    @Option(names = "--rate-limit", paramLabel = "RATE", description = "429 past RATE requests per client (100/s, 600/m).") public String rateLimit;
    @Option(names = "--rate-limit-burst", paramLabel = "N", description = "Requests allowed at once before RATE applies (default: one second's worth of RATE, at least 1).") public Integer rateLimitBurst;
    @Option(names = "--cache-size", paramLabel = "MIB", description = "Shared response cache size.") public Integer cacheSize;
    @Option(names = "--cache-max-object", defaultValue = "1024", paramLabel = "KIB", description = "Largest body the cache keeps (default ${DEFAULT-VALUE}).") public Integer cacheMaxObject;
    @Option(names = "--cache-ttl-max", defaultValue = "300", paramLabel = "SECONDS", description = "Longest a response is kept (default ${DEFAULT-VALUE}).") public Integer cacheTtlMax;
    @Option(names = "--compress", description = "Compress text-like responses with br, zstd or gzip.") public Boolean compress;
    @Option(names = "--compress-min-size", defaultValue = "1024", paramLabel = "N", description = "Leave bodies declared smaller than N bytes alone (default ${DEFAULT-VALUE}).") public Integer compressMinSize;
    @Option(names = "--compress-static", description = "Serve precompressed FILE.br/.zst/.gz beside static files.") public Boolean compressStatic;
    @Option(names = "--shared-store", paramLabel = "URL", description = "Share the rate limit and the response cache with the other replicas through Redis or Valkey: redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss:// for TLS (the password is better given in PEREGRINE_SHARED_STORE_PASSWORD).") public String sharedStore;
    @Option(names = "--shared-store-timeout", defaultValue = "50", paramLabel = "MS", description = "How long a request waits for the store before it is served without it (default ${DEFAULT-VALUE}).") public Long sharedStoreTimeout;
    @Option(names = "--shared-store-ca", paramLabel = "PATH", description = "PEM roots to trust for a rediss:// store (default: the JDK's).") public Path sharedStoreCa;

    // Operations
    @Option(names = "--health-check-path", paramLabel = "P", description = "Answer P with 200 in the server, e.g. /healthz.") public String healthCheckPath;
    @Option(names = "--metrics-port", paramLabel = "PORT", description = "Serve Prometheus metrics on this port.") public Integer metricsPort;
    @Option(names = "--metrics-host", paramLabel = "HOST", description = "What the metrics port binds (default --host).") public String metricsHost;
    @Option(names = "--access-log", description = "Log one line per request.") public Boolean accessLog;
    @Option(names = "--access-log-format", paramLabel = "F", description = "text (default) or json, one object per line on stdout; implies --access-log.") public LogFormat accessLogFormat;
    @Option(names = "--request-id", description = "An X-Request-ID per request, for the app, the response and the access log.") public Boolean requestId;
    @Option(names = "--request-start-header", description = "Hand the app X-Request-Start for queue-time APMs.") public Boolean requestStartHeader;
    @Option(names = "--trace-context", description = "Log a request's W3C trace and parent span IDs (traceparent) on the access log.") public Boolean traceContext;
    @Option(names = "--log-level", defaultValue = "info", paramLabel = "LEVEL", description = "debug, info, warning, error, silent (default ${DEFAULT-VALUE}).") public LogLevel logLevel;

    private final Launcher launcher;

    @Inject
    public PeregrineCommand(Launcher launcher) {
        this.launcher = launcher;
    }

    @Override
    public Integer call() {
        ServerSettings settings;
        try {
            settings = CommandLineSettings.read(this);
        } catch (ConfigException e) {
            System.err.println("peregrine: " + e.getMessage());
            return 2;
        }
        return launcher.launch(settings, settings.workers().supervised() ? WorkerOptions.encode(this) : null);
    }
}
