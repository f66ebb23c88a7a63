package dev.peregrine.cli;

import dev.peregrine.cli.PeregrineCommand.LogLevel;
import dev.peregrine.cli.PeregrineCommand.Protocol;
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
                () -> assertEquals("main:app", s.target()),
                () -> assertEquals(8000, s.port()),
                () -> assertEquals("127.0.0.1", s.host()),
                () -> assertEquals(2048, s.backlog()),
                () -> assertEquals(4096, s.maxConnections()),
                () -> assertEquals(16L * 1024 * 1024, s.maxBody()),
                () -> assertEquals(32 * 1024, s.maxHeaderSize()),
                () -> assertEquals(5000, s.keepAliveMillis()),
                () -> assertEquals(30_000, s.requestTimeoutMillis()),
                () -> assertEquals(10_000, s.gracefulTimeoutMillis()),
                () -> assertEquals(1, s.wsgiThreads()),
                () -> assertNull(s.unix()),
                () -> assertEquals(Protocol.auto, s.protocol()),
                () -> assertFalse(s.factory()),
                () -> assertEquals("", s.rootPath()),
                () -> assertEquals("http", s.scheme()),
                () -> assertTrue(s.lifespan()),
                () -> assertTrue(s.uvloop()),
                () -> assertNull(s.venv()),
                () -> assertTrue(s.autoVenv()),
                () -> assertEquals(List.of(), s.pythonPath()),
                () -> assertTrue(s.websockets()),
                () -> assertEquals(16 * 1024 * 1024, s.wsMaxMessage()),
                () -> assertEquals(20_000, s.wsPingIntervalMillis()),
                () -> assertEquals(20_000, s.wsPingTimeoutMillis()),
                () -> assertEquals(32, s.wsMaxQueue()),
                () -> assertEquals(4L * 1024 * 1024, s.wsMaxQueueBytes()),
                () -> assertFalse(s.wsCompress()),
                () -> assertFalse(s.accessLog()),
                () -> assertEquals(LogLevel.info, s.logLevel()),
                () -> assertNull(s.metricsPort(), "metrics are off unless asked for"),
                () -> assertEquals("127.0.0.1", s.metricsHost()),

                () -> assertFalse(s.accessLogJson()),
                () -> assertFalse(s.requestId()),
                () -> assertFalse(s.requestStartHeader()),
                () -> assertFalse(s.traceContext()),
                () -> assertTrue(s.forwardedAllowIps().trusts(InetAddress.getByName("127.0.0.1"))),
                () -> assertTrue(s.forwardedAllowIps().trusts(InetAddress.getByName("::1"))),
                () -> assertFalse(s.forwardedAllowIps().trusts(InetAddress.getByName("10.0.0.1"))),
                () -> assertFalse(s.forwardedAllowIps().trustsEveryone()));
    }

    // ---- 6. defaults

    @Test
    void defaultsWithNoOptionsComeFromApplicationProperties() {
        assertDefaults(Cli.settings("main:app"));
    }

    @Test
    void defaultsWithoutAnyConfigurationComeFromServerSettingsFallbacks() {
        // A config with no application.properties and no PEREGRINE_* values: every field stays null after parsing.
        PeregrineCommand c = Cli.withConfig(Map.of(), Map.of(), false, () -> Cli.parse("main:app"));
        assertNull(c.port, "nothing should have supplied --port");
        assertNull(c.maxBody, "nothing should have supplied --max-body");
        assertNull(c.host, "nothing should have supplied --host");
        assertDefaults(ServerSettings.from(c));
    }

    @Test
    void optionsAreCarriedThrough() {
        ServerSettings s = Cli.settings("--host", "0.0.0.0", "--port", "0", "--unix", "/tmp/p.sock", "--backlog", "10",
                "--max-connections", "7", "--protocol", "wsgi", "--factory", "--root-path", "/api", "--scheme", "https",
                "--wsgi-threads", "8", "--no-lifespan", "--no-uvloop", "--venv", "/v", "--no-auto-venv",
                "--python-path", "/a", "--python-path", "/b", "--max-body", "0", "--max-header-size", "256",
                "--keep-alive", "0", "--request-timeout", "1", "--graceful-timeout", "2", "--no-websockets",
                "--access-log", "--log-level", "debug", "project.wsgi:application");
        assertAll(
                () -> assertEquals("project.wsgi:application", s.target()),
                () -> assertEquals("0.0.0.0", s.host()),
                () -> assertEquals(0, s.port()),
                () -> assertEquals(Path.of("/tmp/p.sock"), s.unix()),
                () -> assertEquals(10, s.backlog()),
                () -> assertEquals(7, s.maxConnections()),
                () -> assertEquals(Protocol.wsgi, s.protocol()),
                () -> assertTrue(s.factory()),
                () -> assertEquals("/api", s.rootPath()),
                () -> assertEquals("https", s.scheme()),
                () -> assertEquals(8, s.wsgiThreads()),
                () -> assertFalse(s.lifespan()),
                () -> assertFalse(s.uvloop()),
                () -> assertEquals(Path.of("/v"), s.venv()),
                () -> assertFalse(s.autoVenv()),
                () -> assertEquals(List.of(Path.of("/a"), Path.of("/b")), s.pythonPath()),
                () -> assertEquals(0, s.maxBody()),
                () -> assertEquals(256, s.maxHeaderSize()),
                () -> assertEquals(0, s.keepAliveMillis()),
                () -> assertEquals(1, s.requestTimeoutMillis()),
                () -> assertEquals(2, s.gracefulTimeoutMillis()),
                () -> assertFalse(s.websockets()),
                () -> assertTrue(s.accessLog()),
                () -> assertEquals(LogLevel.debug, s.logLevel()));
    }

    @ParameterizedTest
    @CsvSource({
            "--port, -1", "--port, 65536", "--backlog, 0", "--max-connections, 0", "--wsgi-threads, 0",
            "--wsgi-threads, 1025", "--max-body, -1", "--max-header-size, 255", "--max-header-size, 16777217",
            "--keep-alive, -1", "--request-timeout, -5", "--graceful-timeout, -1", "--workers, -1", "--workers, 1025",
            "--drain-delay, -1", "--metrics-port, -1", "--metrics-port, 65536",
    })
    void outOfRangeValuesAreRefusedNamingTheOption(String option, String value) {
        UsageException e = assertThrows(UsageException.class, () -> Cli.settings(option, value, "main:app"));
        assertTrue(e.getMessage().contains("'" + option + "'") && e.getMessage().contains(value), e.getMessage());
    }

    // ---- 7. options whose feature is not built yet

    /** Each option of ServerSettings.refuseUnbuilt, with arguments that ask for it. */
    static Stream<Arguments> unbuilt() {
        return Stream.of(
                arguments("--free-threaded", "--free-threaded"),
                arguments("--lifespan-scope", "--lifespan-scope worker"),
                arguments("--python-home", "--python-home /opt/python"),
                arguments("--acme-domain", "--acme-domain example.com"),
                arguments("--acme-email", "--acme-email a@example.com"),
                arguments("--acme-cache", "--acme-cache ./acme"),
                arguments("--acme-staging", "--acme-staging"),
                arguments("--acme-directory", "--acme-directory https://acme.example/dir"),
                arguments("--acme-ca-bundle", "--acme-ca-bundle ca.pem"),
                arguments("--static-dir", "--static-dir /a=b"),
                arguments("--rate-limit", "--rate-limit 100/s"),
                arguments("--rate-limit-burst", "--rate-limit-burst 10"),
                arguments("--cache-size", "--cache-size 64"),
                arguments("--cache-max-object", "--cache-max-object 1024"),
                arguments("--cache-ttl-max", "--cache-ttl-max 300"),
                arguments("--compress", "--compress"),
                arguments("--compress-min-size", "--compress-min-size 1024"),
                arguments("--compress-static", "--compress-static"));
    }

    @ParameterizedTest(name = "{1}")
    @MethodSource("unbuilt")
    void notYetBuiltOptionIsRefusedByName(String option, String argLine) {
        List<String> args = new ArrayList<>(List.of(Cli.args(argLine)));
        args.add("main:app");
        UsageException e = assertThrows(UsageException.class, () -> Cli.settings(args.toArray(String[]::new)));
        assertEquals(option + " is not supported yet", e.getMessage());
    }

    // ---- 8. TLS and HTTP/2 options

    @Test
    void tlsPairsAreKeptInOrderAndTurnTheSchemeToHttps() {
        ServerSettings s = Cli.settings("--tls-cert", "a.pem", "--tls-key", "a.key", "--tls-cert", "b.pem", "--tls-key", "b.key", "main:app");
        assertEquals(List.of(new ServerSettings.CertificatePair(java.nio.file.Path.of("a.pem"), java.nio.file.Path.of("a.key")),
                new ServerSettings.CertificatePair(java.nio.file.Path.of("b.pem"), java.nio.file.Path.of("b.key"))), s.tlsCertificates());
        assertEquals("https", s.scheme());
        assertEquals("http", Cli.settings("--tls-cert", "a.pem", "--tls-key", "a.key", "--scheme", "http", "main:app").scheme());
        assertEquals("http", Cli.settings("main:app").scheme());
    }

    @ParameterizedTest
    @ValueSource(strings = {"--tls-cert a.pem", "--tls-key a.key", "--tls-cert a.pem --tls-key a.key --tls-cert b.pem"})
    void certificatesAndKeysComeInPairs(String argLine) {
        List<String> args = new ArrayList<>(List.of(Cli.args(argLine)));
        args.add("main:app");
        UsageException e = assertThrows(UsageException.class, () -> Cli.settings(args.toArray(String[]::new)));
        assertTrue(e.getMessage().contains(argLine.endsWith("a.key") ? "'--tls-key'" : "'--tls-cert'"), e.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"--redirect-http 8080", "--hsts 60", "--tls-ciphers HIGH", "--http3"})
    void tlsOnlyOptionsNeedTls(String argLine) {
        List<String> args = new ArrayList<>(List.of(Cli.args(argLine)));
        args.add("main:app");
        UsageException e = assertThrows(UsageException.class, () -> Cli.settings(args.toArray(String[]::new)));
        assertTrue(e.getMessage().startsWith("option '" + argLine.split(" ")[0] + "' needs"), e.getMessage());
    }

    @Test
    void ktlsIsRefusedWithTheReason() {
        UsageException e = assertThrows(UsageException.class, () -> Cli.settings("--ktls", "main:app"));
        assertTrue(e.getMessage().startsWith("option '--ktls' is not available: "), e.getMessage());
    }

    @Test
    void http2OptionsExcludeEachOther() {
        assertTrue(Cli.settings("main:app").http2());
        assertFalse(Cli.settings("--no-http2", "main:app").http2());
        assertTrue(Cli.settings("--http2-only", "main:app").http2Only());
        assertThrows(UsageException.class, () -> Cli.settings("--no-http2", "--http2-only", "main:app"));
    }

    @Test
    void hstsAndRedirectValues() {
        ServerSettings s = Cli.settings("--tls-cert", "a.pem", "--tls-key", "a.key", "--hsts", "600", "--redirect-http", "8080", "main:app");
        assertEquals(600, s.hstsSeconds());
        assertEquals(8080, s.redirectHttpPort());
        assertEquals(-1, Cli.settings("main:app").hstsSeconds());
        assertThrows(UsageException.class, () -> Cli.settings("--tls-cert", "a.pem", "--tls-key", "a.key", "--redirect-http", "8000", "main:app"));
        assertThrows(UsageException.class, () -> Cli.settings("--tls-cert", "a.pem", "--tls-key", "a.key", "--hsts", "-1", "main:app"));
    }

    @Test
    void http3PortIsTheTcpPortUnlessGiven() {
        String tls = "--tls-cert a.pem --tls-key a.key ";
        ServerSettings s = Cli.settings(Cli.args(tls + "--http3 --port 8443 main:app"));
        assertTrue(s.http3());
        assertEquals(8443, s.quicPort());
        assertEquals(9443, Cli.settings(Cli.args(tls + "--http3 --port 8443 --quic-port 9443 main:app")).quicPort());
        assertFalse(Cli.settings(Cli.args(tls + "main:app")).http3());
        UsageException orphan = assertThrows(UsageException.class, () -> Cli.settings(Cli.args(tls + "--quic-port 9443 main:app")));
        assertEquals("option '--quic-port' needs --http3", orphan.getMessage());
        UsageException zero = assertThrows(UsageException.class, () -> Cli.settings(Cli.args(tls + "--http3 --port 0 main:app")));
        assertTrue(zero.getMessage().startsWith("option '--http3' needs --quic-port"), zero.getMessage());
        UsageException range = assertThrows(UsageException.class, () -> Cli.settings(Cli.args(tls + "--http3 --quic-port 70000 main:app")));
        assertTrue(range.getMessage().startsWith("invalid value for option '--quic-port'"), range.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"--workers 1", "--no-http2", "--no-websockets", "--drain-delay 0", "--workers 1 --no-http2 --no-websockets"})
    void builtOrHarmlessValuesAreAccepted(String argLine) {
        List<String> args = new ArrayList<>(List.of(Cli.args(argLine)));
        args.add("main:app");
        ServerSettings s = Cli.settings(args.toArray(String[]::new));
        assertEquals(!argLine.contains("--no-websockets"), s.websockets());
    }

    /** Options the server implements (or accepts as a no-op): every other option must be refused, never ignored. */
    private static final Set<String> BUILT = Set.of(
            "--host", "--port", "--unix", "--backlog", "--max-connections", "--protocol", "--factory", "--root-path",
            "--scheme", "--wsgi-threads", "--no-lifespan", "--no-uvloop", "--venv", "--no-auto-venv", "--python-path",
            "--max-body", "--max-header-size", "--keep-alive", "--request-timeout", "--graceful-timeout", "--no-http2",
            "--no-websockets", "--access-log", "--log-level", "--help", "--version", "--metrics-port", "--metrics-host",
            "--forwarded-allow-ips", "--access-log-format", "--request-id", "--request-start-header", "--trace-context",
            "--workers", "--drain-delay", "--reload", "--health-check-path", "--ws-max-message", "--ws-ping-interval",
            "--ws-ping-timeout", "--ws-max-queue", "--ws-max-queue-bytes", "--ws-compress",
            "--tls-cert", "--tls-key", "--tls-ciphers", "--http2-only", "--redirect-http", "--hsts", "--http3", "--quic-port",
            // Refused with its own reason (ktlsIsRefusedWithTheReason).
            "--ktls");

    @Test
    void webSocketOptionsAreCarriedThroughAndChecked() {
        ServerSettings s = Cli.settings("--ws-max-message", "1000", "--ws-ping-interval", "0", "--ws-ping-timeout", "5",
                "--ws-max-queue", "4", "--ws-max-queue-bytes", "65536", "--ws-compress", "main:app");
        assertEquals(1000, s.wsMaxMessage());
        assertEquals(0, s.wsPingIntervalMillis());
        assertEquals(5, s.wsPingTimeoutMillis());
        assertEquals(4, s.wsMaxQueue());
        assertEquals(65536, s.wsMaxQueueBytes());
        assertTrue(s.wsCompress());
        UsageException e = assertThrows(UsageException.class, () -> Cli.settings("--ws-max-queue", "0", "main:app"));
        assertTrue(e.getMessage().contains("--ws-max-queue"), e.getMessage());
        e = assertThrows(UsageException.class, () -> Cli.settings("--ws-max-message", "3000000000", "main:app"));
        assertTrue(e.getMessage().contains("--ws-max-message"), e.getMessage());
    }

    @Test
    void everyOptionIsEitherBuiltOrRefused() {
        CommandLine cl = CommandLineSetup.configure(new CommandLine(new PeregrineCommand()));
        Set<String> refused = new TreeSet<>();
        unbuilt().forEach(a -> refused.add((String) a.get()[0]));
        List<String> unaccounted = cl.getCommandSpec().options().stream().map(OptionSpec::longestName)
                .filter(name -> !BUILT.contains(name) && !refused.contains(name)).sorted().toList();
        assertTrue(unaccounted.isEmpty(), () -> "options neither built nor refused (would be silently ignored): " + unaccounted);
    }

    @Test
    void workersZeroMeansOnePerCpuAndOnlyOneWorkerWithoutReloadRunsUnsupervised() {
        assertEquals(Runtime.getRuntime().availableProcessors(), Cli.settings("--workers", "0", "main:app").workers());
        assertFalse(Cli.settings("main:app").supervised());
        assertTrue(Cli.settings("--workers", "2", "main:app").supervised());
        assertTrue(Cli.settings("--reload", "main:app").supervised());
        assertTrue(Cli.settings("--workers", "0", "main:app").supervised(), "0 asks for a supervisor even with one CPU");
    }

    @ParameterizedTest
    @ValueSource(strings = {"healthz", "/health?x=1", "/a b", "/x#y"})
    void healthCheckPathMustBeAnAbsolutePathWithoutQuery(String path) {
        UsageException e = assertThrows(UsageException.class, () -> Cli.settings("--health-check-path", path, "main:app"));
        assertTrue(e.getMessage().contains("--health-check-path"), e.getMessage());
    }

    @Test
    void repeatableOptionsTakeCommaSeparatedValuesFromTheEnvironmentAndTheCommandLine() {
        ServerSettings fromEnv = Cli.withConfig(Map.of(), Map.of("PEREGRINE_PYTHON_PATH", "src,lib"), true,
                () -> Cli.settings("main:app"));
        assertEquals(List.of(Path.of("src"), Path.of("lib")), fromEnv.pythonPath());
        assertEquals(List.of(Path.of("a"), Path.of("b"), Path.of("c")),
                Cli.settings("--python-path", "a,b", "--python-path", "c", "main:app").pythonPath());
    }

    // ---- metrics

    @Test
    void metricsHostDefaultsToHost() {
        ServerSettings s = Cli.settings("--host", "0.0.0.0", "--metrics-port", "9100", "main:app");
        assertEquals(9100, s.metricsPort());
        assertEquals("0.0.0.0", s.metricsHost());
        assertEquals("::1", Cli.settings("--metrics-port", "9100", "--metrics-host", "::1", "main:app").metricsHost());
    }

    @Test
    void metricsPortMustNotBeTheApplicationPort() {
        UsageException e = assertThrows(UsageException.class, () -> Cli.settings("--port", "9100", "--metrics-port", "9100", "main:app"));
        assertTrue(e.getMessage().contains("'--metrics-port'") && e.getMessage().contains("--port"), e.getMessage());
        assertEquals(9100, Cli.settings("--unix", "/tmp/p.sock", "--port", "9100", "--metrics-port", "9100", "main:app").metricsPort());
        assertEquals(0, Cli.settings("--port", "0", "--metrics-port", "0", "main:app").metricsPort());
    }

    // ---- 7b. proxies, request id, access log format

    @Test
    void operationsOptionsAreCarriedThrough() throws Exception {
        ServerSettings s = Cli.settings("--forwarded-allow-ips", "10.0.0.0/8, unix", "--access-log-format", "json",
                "--request-id", "--request-start-header", "--trace-context", "main:app");
        assertTrue(s.accessLog(), "--access-log-format implies --access-log");
        assertTrue(s.accessLogJson());
        assertTrue(s.requestId());
        assertTrue(s.requestStartHeader());
        assertTrue(s.traceContext());
        assertTrue(s.forwardedAllowIps().trusts(InetAddress.getByName("10.200.3.4")));
        assertFalse(s.forwardedAllowIps().trusts(InetAddress.getByName("127.0.0.1")), "the list replaces the default");
    }

    @Test
    void textAccessLogFormatAlsoImpliesTheAccessLog() {
        ServerSettings s = Cli.settings("--access-log-format", "text", "main:app");
        assertTrue(s.accessLog());
        assertFalse(s.accessLogJson());
    }

    @ParameterizedTest
    @ValueSource(strings = {"localhost", "10.0.0.0/33", "10.0.0.1/x", "::1/129", "1.2.3", "10.0.0.1,example.com", "unix:/tmp/s"})
    void badForwardedAllowIpsIsOneUsageErrorNamingTheOption(String value) {
        UsageException e = assertThrows(UsageException.class, () -> Cli.settings("--forwarded-allow-ips", value, "main:app"));
        assertTrue(e.getMessage().startsWith("invalid value for option '--forwarded-allow-ips': "), e.getMessage());
        assertFalse(e.getMessage().contains("\n"), e.getMessage());
    }

    // ---- 8. target, scheme, root path

    @Test
    void missingTargetIsAClearUsageError() {
        UsageException e = assertThrows(UsageException.class, () -> Cli.settings());
        assertTrue(e.getMessage().contains("MODULE:ATTRIBUTE"), e.getMessage());
        assertTrue(e.getMessage().toLowerCase().contains("missing"), e.getMessage());
        UsageException blank = assertThrows(UsageException.class, () -> Cli.settings("  "));
        assertTrue(blank.getMessage().contains("MODULE:ATTRIBUTE"), blank.getMessage());
    }

    @Test
    void targetWithoutColonIsAClearUsageError() {
        UsageException e = assertThrows(UsageException.class, () -> Cli.settings("main"));
        assertTrue(e.getMessage().contains("MODULE:ATTRIBUTE"), e.getMessage());
        assertTrue(e.getMessage().contains("'main'"), () -> "quotes what was given: " + e.getMessage());
    }

    @Test
    void targetIsCheckedBeforeUnbuiltOptions() {
        UsageException e = assertThrows(UsageException.class, () -> Cli.settings("--compress"));
        assertTrue(e.getMessage().contains("MODULE:ATTRIBUTE"), e.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"ftp", "HTTP", "ws", "https:", ""})
    void schemeOtherThanHttpOrHttpsIsRefused(String scheme) {
        UsageException e = assertThrows(UsageException.class, () -> Cli.settings("--scheme", scheme, "main:app"));
        assertTrue(e.getMessage().contains("--scheme"), e.getMessage());
        assertTrue(e.getMessage().contains("'" + scheme + "'"), e.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"http", "https"})
    void httpAndHttpsSchemesAreAccepted(String scheme) {
        assertEquals(scheme, Cli.settings("--scheme", scheme, "main:app").scheme());
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
        assertEquals(expected, Cli.settings("--root-path", given, "main:app").rootPath());
    }

    @Test
    void rootPathFromConfigurationIsNormalisedToo() {
        assertEquals("/api", Cli.withSystemProperties(Map.of("peregrine.root-path", "api/"), () -> Cli.settings("main:app")).rootPath());
    }
}
