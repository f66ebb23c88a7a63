package dev.peregrine.cli;

import dev.peregrine.config.ApplicationProtocol;
import dev.peregrine.config.ConfigException;
import dev.peregrine.config.LogLevel;
import dev.peregrine.config.RateLimitSettings;
import dev.peregrine.config.ServerSettings;
import dev.peregrine.config.TlsSettings;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;
import picocli.CommandLine;
import picocli.CommandLine.Model.OptionSpec;

import java.net.InetAddress;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.params.provider.Arguments.arguments;

class ServerSettingsTest {

    private static void assertDefaults(ServerSettings s) {
        assertAll(
                () -> assertEquals("main:app", s.app().target()),
                () -> assertEquals(8000, s.listen().port()),
                () -> assertEquals("127.0.0.1", s.listen().host()),
                () -> assertEquals(2048, s.listen().backlog()),
                () -> assertEquals(4096, s.listen().maxConnections()),
                () -> assertEquals(16L * 1024 * 1024, s.limits().maxBody()),
                () -> assertEquals(32 * 1024, s.limits().maxHeaderSize()),
                () -> assertEquals(5000, s.limits().keepAliveMillis()),
                () -> assertEquals(30_000, s.limits().requestTimeoutMillis()),
                () -> assertEquals(10_000, s.limits().gracefulTimeoutMillis()),
                () -> assertEquals(1, s.app().wsgiThreads()),
                () -> assertNull(s.listen().unix()),
                () -> assertEquals(ApplicationProtocol.auto, s.app().protocol()),
                () -> assertFalse(s.app().factory()),
                () -> assertEquals("", s.app().rootPath()),
                () -> assertEquals("http", s.app().scheme()),
                () -> assertTrue(s.app().lifespan()),
                () -> assertTrue(s.app().uvloop()),
                () -> assertNull(s.python().venv()),
                () -> assertTrue(s.python().autoVenv()),
                () -> assertEquals(List.of(), s.python().pythonPath()),
                () -> assertTrue(s.python().gcFreeze()),
                () -> assertTrue(s.webSocket() != null),
                () -> assertEquals(16 * 1024 * 1024, s.webSocket().maxMessage()),
                () -> assertEquals(20_000, s.webSocket().pingIntervalMillis()),
                () -> assertEquals(20_000, s.webSocket().pingTimeoutMillis()),
                () -> assertEquals(32, s.webSocket().maxQueue()),
                () -> assertEquals(4L * 1024 * 1024, s.webSocket().maxQueueBytes()),
                () -> assertFalse(s.webSocket().compress()),
                () -> assertFalse(s.operations().accessLog()),
                () -> assertEquals(LogLevel.info, s.operations().logLevel()),
                () -> assertNull(s.operations().metricsPort(), "metrics are off unless asked for"),
                () -> assertEquals("127.0.0.1", s.operations().metricsHost()),

                () -> assertFalse(s.operations().accessLogJson()),
                () -> assertFalse(s.operations().requestId()),
                () -> assertFalse(s.operations().requestStartHeader()),
                () -> assertFalse(s.operations().traceContext()),
                () -> assertTrue(s.operations().forwardedAllowIps().trusts(InetAddress.getByName("127.0.0.1"))),
                () -> assertTrue(s.operations().forwardedAllowIps().trusts(InetAddress.getByName("::1"))),
                () -> assertFalse(s.operations().forwardedAllowIps().trusts(InetAddress.getByName("10.0.0.1"))),
                () -> assertFalse(s.operations().forwardedAllowIps().trustsEveryone()));
    }

    // ---- 6. defaults

    @Test
    void defaultsWithNoOptions() {
        assertDefaults(Cli.settings("main:app"));
    }

    @Test
    void defaultsWithoutAnyConfigurationComeFromTheOptionDeclarations() {
        // A config with no application.properties and no PEREGRINE_* values: the options' own defaults are all there is.
        PeregrineCommand c = Cli.withConfig(Map.of(), Map.of(), false, () -> Cli.parse("main:app"));
        assertEquals(8000, c.port);
        assertEquals(16L * 1024 * 1024, c.maxBody);
        assertEquals("127.0.0.1", c.host);
        assertDefaults(CommandLineSettings.read(c));
    }

    @Test
    void optionsAreCarriedThrough() {
        ServerSettings s = Cli.settings("--host", "0.0.0.0", "--port", "0", "--unix", "/tmp/p.sock", "--backlog", "10",
                "--max-connections", "7", "--protocol", "wsgi", "--factory", "--root-path", "/api", "--scheme", "https",
                "--wsgi-threads", "8", "--no-lifespan", "--no-uvloop", "--no-gc-freeze", "--share-core", "--venv", "/v", "--no-auto-venv",
                "--python-path", "/a", "--python-path", "/b", "--max-body", "0", "--max-header-size", "256",
                "--keep-alive", "0", "--request-timeout", "1", "--graceful-timeout", "2", "--no-websockets",
                "--access-log", "--log-level", "debug", "project.wsgi:application");
        assertAll(
                () -> assertEquals("project.wsgi:application", s.app().target()),
                () -> assertEquals("0.0.0.0", s.listen().host()),
                () -> assertEquals(0, s.listen().port()),
                () -> assertEquals(Path.of("/tmp/p.sock"), s.listen().unix()),
                () -> assertEquals(10, s.listen().backlog()),
                () -> assertEquals(7, s.listen().maxConnections()),
                () -> assertEquals(ApplicationProtocol.wsgi, s.app().protocol()),
                () -> assertTrue(s.app().factory()),
                () -> assertEquals("/api", s.app().rootPath()),
                () -> assertEquals("https", s.app().scheme()),
                () -> assertEquals(8, s.app().wsgiThreads()),
                () -> assertFalse(s.app().lifespan()),
                () -> assertFalse(s.app().uvloop()),
                () -> assertEquals(Path.of("/v"), s.python().venv()),
                () -> assertFalse(s.python().autoVenv()),
                () -> assertEquals(List.of(Path.of("/a"), Path.of("/b")), s.python().pythonPath()),
                () -> assertFalse(s.python().gcFreeze()),
                () -> assertTrue(s.workers().shareCore()),
                () -> assertEquals(0, s.limits().maxBody()),
                () -> assertEquals(256, s.limits().maxHeaderSize()),
                () -> assertEquals(0, s.limits().keepAliveMillis()),
                () -> assertEquals(1, s.limits().requestTimeoutMillis()),
                () -> assertEquals(2, s.limits().gracefulTimeoutMillis()),
                () -> assertFalse(s.webSocket() != null),
                () -> assertTrue(s.operations().accessLog()),
                () -> assertEquals(LogLevel.debug, s.operations().logLevel()));
    }

    @ParameterizedTest
    @CsvSource({
            "--port, -1", "--port, 65536", "--backlog, 0", "--max-connections, 0", "--wsgi-threads, 0",
            "--wsgi-threads, 1025", "--max-body, -1", "--max-header-size, 255", "--max-header-size, 16777217",
            "--keep-alive, -1", "--request-timeout, -5", "--graceful-timeout, -1", "--workers, -1", "--workers, 1025",
            "--drain-delay, -1", "--metrics-port, -1", "--metrics-port, 65536",
    })
    void outOfRangeValuesAreRefusedNamingTheOption(String option, String value) {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings(option, value, "main:app"));
        assertTrue(e.getMessage().contains("'" + option + "'") && e.getMessage().contains(value), e.getMessage());
    }

    // ---- 7. options whose feature is not built yet

    /** Each option of ServerSettings.refuseUnbuilt, with arguments that ask for it. */
    static Stream<Arguments> unbuilt() {
        return Stream.of(
                arguments("--python-home", "--python-home /opt/python"));
    }

    @ParameterizedTest(name = "{1}")
    @MethodSource("unbuilt")
    void notYetBuiltOptionIsRefusedByName(String option, String argLine) {
        List<String> args = new ArrayList<>(List.of(Cli.args(argLine)));
        args.add("main:app");
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings(args.toArray(String[]::new)));
        assertEquals(option + " is not supported yet", e.getMessage());
    }

    @Test
    void freeThreadedWorkersAreThreadsOfOneSupervisedProcess() {
        ServerSettings s = Cli.settings("--free-threaded", "--workers", "4", "main:app");
        assertTrue(s.workers().freeThreaded());
        assertEquals(4, s.workers().workers());
        assertEquals(1, s.workers().processes());
        assertTrue(s.workers().supervised());
        assertFalse(s.workers().processLifespan());
        assertEquals(4, Cli.settings("--workers", "4", "main:app").workers().processes());
        assertFalse(Cli.settings("--free-threaded", "main:app").workers().supervised());
        assertTrue(Cli.settings("--free-threaded", "--reload", "main:app").workers().supervised());
        assertTrue(Cli.settings("--free-threaded", "--lifespan-scope", "process", "main:app").workers().processLifespan());
        assertFalse(Cli.settings("--free-threaded", "--lifespan-scope", "worker", "main:app").workers().processLifespan());
    }

    @ParameterizedTest
    @CsvSource({
            "'--lifespan-scope process', --free-threaded",
            "'--free-threaded --lifespan-scope thread', '--lifespan-scope'",
    })
    void lifespanScopeRefusedWhereItCannotHold(String argLine, String named) {
        List<String> args = new ArrayList<>(List.of(Cli.args(argLine)));
        args.add("main:app");
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings(args.toArray(String[]::new)));
        assertTrue(e.getMessage().contains(named), e.getMessage());
    }

    @ParameterizedTest
    @CsvSource({"'--workers 2'", "'--workers 0'", "'--free-threaded --workers 4'"})
    void shareCoreNeedsASingleWorker(String argLine) {
        assertFalse(Cli.settings("main:app").workers().shareCore());
        assertTrue(Cli.settings("--share-core", "--reload", "main:app").workers().shareCore());
        List<String> args = new ArrayList<>(List.of(Cli.args(argLine)));
        args.addAll(List.of("--share-core", "main:app"));
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings(args.toArray(String[]::new)));
        assertTrue(e.getMessage().contains("--share-core"), e.getMessage());
    }

    // ---- 8. TLS and HTTP/2 options

    @Test
    void tlsPairsAreKeptInOrderAndTurnTheSchemeToHttps() {
        ServerSettings s = Cli.settings("--tls-cert", "a.pem", "--tls-key", "a.key", "--tls-cert", "b.pem", "--tls-key", "b.key", "main:app");
        assertEquals(List.of(new TlsSettings.CertificatePair(java.nio.file.Path.of("a.pem"), java.nio.file.Path.of("a.key")),
                new TlsSettings.CertificatePair(java.nio.file.Path.of("b.pem"), java.nio.file.Path.of("b.key"))), s.tls().certificates());
        assertEquals("https", s.app().scheme());
        assertEquals("http", Cli.settings("--tls-cert", "a.pem", "--tls-key", "a.key", "--scheme", "http", "main:app").app().scheme());
        assertEquals("http", Cli.settings("main:app").app().scheme());
    }

    @ParameterizedTest
    @ValueSource(strings = {"--tls-cert a.pem", "--tls-key a.key", "--tls-cert a.pem --tls-key a.key --tls-cert b.pem"})
    void certificatesAndKeysComeInPairs(String argLine) {
        List<String> args = new ArrayList<>(List.of(Cli.args(argLine)));
        args.add("main:app");
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings(args.toArray(String[]::new)));
        assertTrue(e.getMessage().contains(argLine.endsWith("a.key") ? "'--tls-key'" : "'--tls-cert'"), e.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"--redirect-http 8080", "--hsts 60", "--tls-ciphers HIGH", "--http3"})
    void tlsOnlyOptionsNeedTls(String argLine) {
        List<String> args = new ArrayList<>(List.of(Cli.args(argLine)));
        args.add("main:app");
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings(args.toArray(String[]::new)));
        assertTrue(e.getMessage().startsWith("option '" + argLine.split(" ")[0] + "' needs"), e.getMessage());
    }

    @Test
    void ktlsIsRefusedWithTheReason() {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--ktls", "main:app"));
        assertTrue(e.getMessage().startsWith("option '--ktls' is not available: "), e.getMessage());
    }

    @Test
    void http2OptionsExcludeEachOther() {
        assertTrue(Cli.settings("main:app").protocols().http2());
        assertFalse(Cli.settings("--no-http2", "main:app").protocols().http2());
        assertTrue(Cli.settings("--http2-only", "main:app").protocols().http2Only());
        assertThrows(ConfigException.class, () -> Cli.settings("--no-http2", "--http2-only", "main:app"));
    }

    @Test
    void hstsAndRedirectValues() {
        ServerSettings s = Cli.settings("--tls-cert", "a.pem", "--tls-key", "a.key", "--hsts", "600", "--redirect-http", "8080", "main:app");
        assertEquals(600, s.tls().hstsSeconds());
        assertEquals(8080, s.tls().redirectHttpPort());
        assertEquals(-1, Cli.settings("main:app").tls().hstsSeconds());
        assertThrows(ConfigException.class, () -> Cli.settings("--tls-cert", "a.pem", "--tls-key", "a.key", "--redirect-http", "8000", "main:app"));
        assertThrows(ConfigException.class, () -> Cli.settings("--tls-cert", "a.pem", "--tls-key", "a.key", "--hsts", "-1", "main:app"));
    }

    @Test
    void http3PortIsTheTcpPortUnlessGiven() {
        String tls = "--tls-cert a.pem --tls-key a.key ";
        ServerSettings s = Cli.settings(Cli.args(tls + "--http3 --port 8443 main:app"));
        assertTrue(s.protocols().http3());
        assertEquals(8443, s.protocols().quicPort());
        assertEquals(9443, Cli.settings(Cli.args(tls + "--http3 --port 8443 --quic-port 9443 main:app")).protocols().quicPort());
        assertFalse(Cli.settings(Cli.args(tls + "main:app")).protocols().http3());
        ConfigException orphan = assertThrows(ConfigException.class, () -> Cli.settings(Cli.args(tls + "--quic-port 9443 main:app")));
        assertEquals("option '--quic-port' needs --http3", orphan.getMessage());
        ConfigException zero = assertThrows(ConfigException.class, () -> Cli.settings(Cli.args(tls + "--http3 --port 0 main:app")));
        assertTrue(zero.getMessage().startsWith("option '--http3' needs --quic-port"), zero.getMessage());
        ConfigException range = assertThrows(ConfigException.class, () -> Cli.settings(Cli.args(tls + "--http3 --quic-port 70000 main:app")));
        assertTrue(range.getMessage().startsWith("invalid value for option '--quic-port'"), range.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"--workers 1", "--no-http2", "--no-websockets", "--drain-delay 0", "--workers 1 --no-http2 --no-websockets"})
    void builtOrHarmlessValuesAreAccepted(String argLine) {
        List<String> args = new ArrayList<>(List.of(Cli.args(argLine)));
        args.add("main:app");
        ServerSettings s = Cli.settings(args.toArray(String[]::new));
        assertEquals(!argLine.contains("--no-websockets"), s.webSocket() != null);
    }

    /** Options the server implements (or accepts as a no-op): every other option must be refused, never ignored. */
    private static final Set<String> BUILT = Set.of(
            "--host", "--port", "--unix", "--backlog", "--max-connections", "--protocol", "--factory", "--root-path",
            "--scheme", "--wsgi-threads", "--no-lifespan", "--no-uvloop", "--no-gc-freeze", "--venv", "--no-auto-venv", "--python-path",
            "--max-body", "--max-header-size", "--keep-alive", "--request-timeout", "--graceful-timeout", "--no-http2",
            "--no-websockets", "--access-log", "--log-level", "--help", "--version", "--metrics-port", "--metrics-host",
            "--forwarded-allow-ips", "--access-log-format", "--request-id", "--request-start-header", "--trace-context",
            "--workers", "--free-threaded", "--lifespan-scope", "--drain-delay", "--reload", "--share-core", "--health-check-path", "--ws-max-message", "--ws-ping-interval",
            "--ws-ping-timeout", "--ws-max-queue", "--ws-max-queue-bytes", "--ws-compress",
            "--tls-cert", "--tls-key", "--tls-ciphers", "--http2-only", "--redirect-http", "--hsts", "--http3", "--quic-port",
            "--static-dir", "--compress-static", "--compress", "--compress-min-size", "--rate-limit", "--rate-limit-burst", "--cache-size", "--cache-max-object", "--cache-ttl-max", "--acme-domain", "--acme-email", "--acme-cache", "--acme-staging", "--acme-directory", "--acme-ca-bundle",
            // Refused with its own reason (ktlsIsRefusedWithTheReason).
            "--ktls", "--shared-store", "--shared-store-timeout", "--shared-store-ca");

    @Test
    void webSocketOptionsAreCarriedThroughAndChecked() {
        ServerSettings s = Cli.settings("--ws-max-message", "1000", "--ws-ping-interval", "0", "--ws-ping-timeout", "5",
                "--ws-max-queue", "4", "--ws-max-queue-bytes", "65536", "--ws-compress", "main:app");
        assertEquals(1000, s.webSocket().maxMessage());
        assertEquals(0, s.webSocket().pingIntervalMillis());
        assertEquals(5, s.webSocket().pingTimeoutMillis());
        assertEquals(4, s.webSocket().maxQueue());
        assertEquals(65536, s.webSocket().maxQueueBytes());
        assertTrue(s.webSocket().compress());
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--ws-max-queue", "0", "main:app"));
        assertTrue(e.getMessage().contains("--ws-max-queue"), e.getMessage());
        e = assertThrows(ConfigException.class, () -> Cli.settings("--ws-max-message", "3000000000", "main:app"));
        assertTrue(e.getMessage().contains("--ws-max-message"), e.getMessage());
    }

    @Test
    void everyOptionIsEitherBuiltOrRefused() {
        CommandLine cl = CommandLineSetup.configure(new CommandLine(Cli.command()));
        Set<String> refused = new TreeSet<>();
        unbuilt().forEach(a -> refused.add((String) a.get()[0]));
        List<String> unaccounted = cl.getCommandSpec().options().stream().map(OptionSpec::longestName)
                .filter(name -> !BUILT.contains(name) && !refused.contains(name)).sorted().toList();
        assertTrue(unaccounted.isEmpty(), () -> "options neither built nor refused (would be silently ignored): " + unaccounted);
    }

    @Test
    void workersZeroMeansOnePerCpuAndOnlyOneWorkerWithoutReloadRunsUnsupervised() {
        assertEquals(Runtime.getRuntime().availableProcessors(), Cli.settings("--workers", "0", "main:app").workers().workers());
        assertFalse(Cli.settings("main:app").workers().supervised());
        assertTrue(Cli.settings("--workers", "2", "main:app").workers().supervised());
        assertTrue(Cli.settings("--reload", "main:app").workers().supervised());
        assertTrue(Cli.settings("--workers", "0", "main:app").workers().supervised(), "0 asks for a supervisor even with one CPU");
    }

    @ParameterizedTest
    @ValueSource(strings = {"healthz", "/health?x=1", "/a b", "/x#y"})
    void healthCheckPathMustBeAnAbsolutePathWithoutQuery(String path) {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--health-check-path", path, "main:app"));
        assertTrue(e.getMessage().contains("--health-check-path"), e.getMessage());
    }

    @Test
    void repeatableOptionsTakeCommaSeparatedValuesFromTheEnvironmentAndTheCommandLine() {
        ServerSettings fromEnv = Cli.withConfig(Map.of(), Map.of("PEREGRINE_PYTHON_PATH", "src,lib"), true,
                () -> Cli.settings("main:app"));
        assertEquals(List.of(Path.of("src"), Path.of("lib")), fromEnv.python().pythonPath());
        assertEquals(List.of(Path.of("a"), Path.of("b"), Path.of("c")),
                Cli.settings("--python-path", "a,b", "--python-path", "c", "main:app").python().pythonPath());
    }

    // ---- rate limit

    @Test
    void rateLimitTakesARatePerSecondMinuteOrHourAndABurst() {
        assertNull(Cli.settings("main:app").edge().rateLimit());
        RateLimitSettings perSecond = Cli.settings("--rate-limit", "100/s", "main:app").edge().rateLimit();
        assertEquals(100, perSecond.requests());
        assertEquals(1, perSecond.periodSeconds());
        assertEquals(100, perSecond.burst(), "the default burst is one second's worth");
        assertEquals(10_000_000, perSecond.intervalNanos());
        RateLimitSettings perMinute = Cli.settings("--rate-limit", "600/m", "--rate-limit-burst", "3", "main:app").edge().rateLimit();
        assertEquals(600, perMinute.requests());
        assertEquals(60, perMinute.periodSeconds());
        assertEquals(3, perMinute.burst());
        assertEquals(10, Cli.settings("--rate-limit", "600/m", "main:app").edge().rateLimit().burst());
        RateLimitSettings perHour = Cli.settings("--rate-limit", "30/h", "main:app").edge().rateLimit();
        assertEquals(3600, perHour.periodSeconds());
        assertEquals(1, perHour.burst(), "less than one a second rounds up to a burst of one");
        assertEquals(120_000_000_000L, perHour.intervalNanos());
    }

    @Test
    void rateLimitComesFromTheEnvironmentToo() {
        ServerSettings s = Cli.withConfig(Map.of(), Map.of("PEREGRINE_RATE_LIMIT", "5/s", "PEREGRINE_RATE_LIMIT_BURST", "7"), true,
                () -> Cli.settings("main:app"));
        assertEquals(5, s.edge().rateLimit().requests());
        assertEquals(7, s.edge().rateLimit().burst());
    }

    @ParameterizedTest
    @ValueSource(strings = {"100", "100/d", "/s", "0/s", "-1/s", "1.5/s", "ten/s", "100/sec", "100 /s", "2000000000/s", "99999999999/h"})
    void badRatesAreRefusedNamingTheOption(String rate) {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--rate-limit", rate, "main:app"));
        assertTrue(e.getMessage().contains("'--rate-limit'") && !e.getMessage().contains("\n"), e.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"0", "-3", "1000001"})
    void badBurstsAreRefusedNamingTheOption(String burst) {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--rate-limit", "1/s", "--rate-limit-burst", burst, "main:app"));
        assertTrue(e.getMessage().contains("'--rate-limit-burst'"), e.getMessage());
    }

    @Test
    void aBurstWithoutARateIsRefused() {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--rate-limit-burst", "5", "main:app"));
        assertEquals("option '--rate-limit-burst' needs --rate-limit", e.getMessage());
    }

    // ---- metrics

    @Test
    void metricsHostDefaultsToHost() {
        ServerSettings s = Cli.settings("--host", "0.0.0.0", "--metrics-port", "9100", "main:app");
        assertEquals(9100, s.operations().metricsPort());
        assertEquals("0.0.0.0", s.operations().metricsHost());
        assertEquals("::1", Cli.settings("--metrics-port", "9100", "--metrics-host", "::1", "main:app").operations().metricsHost());
    }

    @Test
    void metricsPortMustNotBeTheApplicationPort() {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--port", "9100", "--metrics-port", "9100", "main:app"));
        assertTrue(e.getMessage().contains("'--metrics-port'") && e.getMessage().contains("--port"), e.getMessage());
        assertEquals(9100, Cli.settings("--unix", "/tmp/p.sock", "--port", "9100", "--metrics-port", "9100", "main:app").operations().metricsPort());
        assertEquals(0, Cli.settings("--port", "0", "--metrics-port", "0", "main:app").operations().metricsPort());
    }

    // ---- 7b. proxies, request id, access log format

    @Test
    void operationsOptionsAreCarriedThrough() throws Exception {
        ServerSettings s = Cli.settings("--forwarded-allow-ips", "10.0.0.0/8, unix", "--access-log-format", "json",
                "--request-id", "--request-start-header", "--trace-context", "main:app");
        assertTrue(s.operations().accessLog(), "--access-log-format implies --access-log");
        assertTrue(s.operations().accessLogJson());
        assertTrue(s.operations().requestId());
        assertTrue(s.operations().requestStartHeader());
        assertTrue(s.operations().traceContext());
        assertTrue(s.operations().forwardedAllowIps().trusts(InetAddress.getByName("10.200.3.4")));
        assertFalse(s.operations().forwardedAllowIps().trusts(InetAddress.getByName("127.0.0.1")), "the list replaces the default");
    }

    @Test
    void textAccessLogFormatAlsoImpliesTheAccessLog() {
        ServerSettings s = Cli.settings("--access-log-format", "text", "main:app");
        assertTrue(s.operations().accessLog());
        assertFalse(s.operations().accessLogJson());
    }

    @ParameterizedTest
    @ValueSource(strings = {"localhost", "10.0.0.0/33", "10.0.0.1/x", "::1/129", "1.2.3", "10.0.0.1,example.com", "unix:/tmp/s"})
    void badForwardedAllowIpsIsOneUsageErrorNamingTheOption(String value) {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--forwarded-allow-ips", value, "main:app"));
        assertTrue(e.getMessage().startsWith("invalid value for option '--forwarded-allow-ips': "), e.getMessage());
        assertFalse(e.getMessage().contains("\n"), e.getMessage());
    }

    // ---- 8. target, scheme, root path

    @Test
    void missingTargetIsAClearUsageError() {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings());
        assertTrue(e.getMessage().contains("MODULE:ATTRIBUTE"), e.getMessage());
        assertTrue(e.getMessage().toLowerCase().contains("missing"), e.getMessage());
        ConfigException blank = assertThrows(ConfigException.class, () -> Cli.settings("  "));
        assertTrue(blank.getMessage().contains("MODULE:ATTRIBUTE"), blank.getMessage());
    }

    @Test
    void targetWithoutColonIsAClearUsageError() {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("main"));
        assertTrue(e.getMessage().contains("MODULE:ATTRIBUTE"), e.getMessage());
        assertTrue(e.getMessage().contains("'main'"), () -> "quotes what was given: " + e.getMessage());
    }

    @Test
    void targetIsCheckedBeforeUnbuiltOptions() {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--compress-static"));
        assertTrue(e.getMessage().contains("MODULE:ATTRIBUTE"), e.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"ftp", "HTTP", "ws", "https:", ""})
    void schemeOtherThanHttpOrHttpsIsRefused(String scheme) {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--scheme", scheme, "main:app"));
        assertTrue(e.getMessage().contains("--scheme"), e.getMessage());
        assertTrue(e.getMessage().contains("'" + scheme + "'"), e.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"http", "https"})
    void httpAndHttpsSchemesAreAccepted(String scheme) {
        assertEquals(scheme, Cli.settings("--scheme", scheme, "main:app").app().scheme());
    }

    @ParameterizedTest
    @CsvSource(value = {
            "api/      | /api",
            "/         | ''",
            "/api      | /api",
            "api       | /api",
            "/api/     | /api",
            "/a/b/     | /a/b",
            "''        | ''",
    }, delimiter = '|')
    void rootPathIsNormalised(String given, String expected) {
        assertEquals(expected, Cli.settings("--root-path", given, "main:app").app().rootPath());
    }

    @Test
    void rootPathFromConfigurationIsNormalisedToo() {
        assertEquals("/api", Cli.withSystemProperties(Map.of("peregrine.root-path", "api/"), () -> Cli.settings("main:app")).app().rootPath());
    }
}
