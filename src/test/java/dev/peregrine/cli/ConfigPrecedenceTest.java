package dev.peregrine.cli;

import dev.peregrine.config.ConfigException;
import dev.peregrine.config.ServerSettings;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.ParameterException;

import java.io.IOException;
import java.io.InputStream;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Command line, then {@code -D}/system properties, then {@code PEREGRINE_*} environment variables, then
 * application.properties. System properties are set on the real (cached, live-reading) SmallRye config;
 * environment variables cannot be set from Java, so those cases use {@link Cli#withConfig}.
 */
class ConfigPrecedenceTest {

    @Test
    void systemPropertyIsUsedWhenTheCommandLineLacksTheOption() {
        ServerSettings s = Cli.withSystemProperties(Map.of("peregrine.port", "9001", "peregrine.max-body", "1024"),
                () -> Cli.settings("main:app"));
        assertEquals(9001, s.listen().port());
        assertEquals(1024, s.limits().maxBody());
    }

    @Test
    void commandLineWinsOverSystemProperty() {
        ServerSettings s = Cli.withSystemProperties(Map.of("peregrine.port", "9001", "peregrine.host", "0.0.0.0"),
                () -> Cli.settings("--port", "9002", "main:app"));
        assertEquals(9002, s.listen().port());
        assertEquals("0.0.0.0", s.listen().host(), "an option absent from the command line still comes from configuration");
        assertEquals(8000, Cli.settings("main:app").listen().port(), "the system property was cleared again");
    }

    @Test
    void commandLineWinsEvenOverABadConfiguredValue() {
        ServerSettings s = Cli.withSystemProperties(Map.of("peregrine.port", "abc"), () -> Cli.settings("--port", "9003", "main:app"));
        assertEquals(9003, s.listen().port());
    }

    @Test
    void badConfiguredValueAloneIsExitTwoNamingOptionEnvironmentVariableAndKey() {
        // The parse fails on the configured default, before call(); execute() is given no target anyway, so even
        // if that changed no server could start (call() would stop at the missing target).
        Cli.Run run = Cli.withSystemProperties(Map.of("peregrine.port", "abc"), () -> {
            try {
                Cli.parse("main:app");
            } catch (ParameterException expected) {
                return Cli.execute();
            }
            throw new AssertionError("a bad configured port was accepted by the parser");
        });
        assertEquals(2, run.exitCode());
        List<String> lines = run.errLines();
        assertEquals(1, lines.size(), () -> "one line: " + lines);
        String line = lines.getFirst();
        assertTrue(line.startsWith("peregrine: "), line);
        assertTrue(line.contains("--port"), () -> "names the option: " + line);
        assertTrue(line.contains("'abc'"), () -> "quotes the value: " + line);
        assertTrue(line.contains("PEREGRINE_PORT"), () -> "names the environment variable: " + line);
        assertTrue(line.contains("peregrine.port"), () -> "names the config key: " + line);
    }

    @Test
    void environmentVariableIsUsedAndSystemPropertyWinsOverIt() {
        ServerSettings fromEnv = Cli.withConfig(Map.of(), Map.of("PEREGRINE_MAX_BODY", "2048", "PEREGRINE_PORT", "9100"), true,
                () -> Cli.settings("main:app"));
        assertEquals(2048, fromEnv.limits().maxBody());
        assertEquals(9100, fromEnv.listen().port());
        assertEquals(2048, fromEnv.listen().backlog(), "the option's own default still supplies the rest");

        ServerSettings both = Cli.withConfig(Map.of("peregrine.port", "9200"), Map.of("PEREGRINE_PORT", "9100"), true,
                () -> Cli.settings("main:app"));
        assertEquals(9200, both.listen().port());

        ServerSettings cli = Cli.withConfig(Map.of("peregrine.port", "9200"), Map.of("PEREGRINE_PORT", "9100"), true,
                () -> Cli.settings("--port", "9300", "main:app"));
        assertEquals(9300, cli.listen().port());
    }

    @Test
    void badEnvironmentValueNamesTheVariable() {
        Cli.Run run = Cli.withConfig(Map.of(), Map.of("PEREGRINE_MAX_BODY", "lots"), true, () -> {
            assertThrows(ParameterException.class, () -> Cli.parse("main:app"), "a bad PEREGRINE_MAX_BODY must fail the parse");
            return Cli.execute();
        });
        assertEquals(2, run.exitCode());
        String line = run.errLines().getFirst();
        assertEquals(1, run.errLines().size(), run.err());
        assertTrue(line.contains("--max-body") && line.contains("PEREGRINE_MAX_BODY") && line.contains("peregrine.max-body"), line);
    }

    @Test
    void environmentAndKeyNamesFollowTheOption() {
        CommandLine cl = CommandLineSetup.configure(new CommandLine(Cli.command()));
        OptionSpec maxBody = cl.getCommandSpec().findOption("--max-body");
        assertEquals("peregrine.max-body", ConfigDefaults.key(maxBody));
        assertEquals("PEREGRINE_MAX_BODY", ConfigDefaults.environmentName(maxBody));
        OptionSpec wsQueueBytes = cl.getCommandSpec().findOption("--ws-max-queue-bytes");
        assertEquals("PEREGRINE_WS_MAX_QUEUE_BYTES", ConfigDefaults.environmentName(wsQueueBytes));
    }

    @Test
    void helpAndVersionAreNotConfigurable() {
        CommandLine cl = CommandLineSetup.configure(new CommandLine(Cli.command()));
        ConfigDefaults defaults = new ConfigDefaults();
        Cli.withSystemProperties(Map.of("peregrine.help", "true", "peregrine.version", "true"), () -> {
            assertNull(defaults.defaultValue(cl.getCommandSpec().findOption("--help")));
            assertNull(defaults.defaultValue(cl.getCommandSpec().findOption("--version")));
        });
    }

    @Test
    void applicationPropertiesIsVisibleInPlainJUnitAndSuppliesTheDefaults() {
        PeregrineCommand c = Cli.parse("main:app");
        // Non-null fields prove the value came from configuration, not from ServerSettings' fallbacks.
        assertEquals(8000, c.port);
        assertEquals("127.0.0.1", c.host);
        assertEquals(16L * 1024 * 1024, c.maxBody);
        assertEquals(dev.peregrine.config.LogLevel.info, c.logLevel);
        assertEquals(1, c.workers);
    }

    @Test
    void everyKeyOfApplicationPropertiesNamesAnOption() throws IOException {
        Properties p = new Properties();
        try (InputStream in = ConfigPrecedenceTest.class.getClassLoader().getResourceAsStream("application.properties")) {
            assertNotNull(in, "application.properties on the classpath");
            p.load(in);
        }
        CommandLine cl = CommandLineSetup.configure(new CommandLine(Cli.command()));
        List<String> orphans = p.stringPropertyNames().stream()
                .filter(k -> k.startsWith("peregrine."))
                .filter(k -> cl.getCommandSpec().findOption("--" + k.substring("peregrine.".length())) == null)
                .sorted().toList();
        assertTrue(orphans.isEmpty(), () -> "keys naming no option (typos are silently ignored): " + orphans);
    }

    @Test
    void notYetBuiltOptionFromConfigurationIsRefusedToo() {
        ConfigException e = Cli.withSystemProperties(Map.of("peregrine.python-home", "/opt/python"),
                () -> assertThrows(ConfigException.class, () -> Cli.settings("main:app")));
        assertEquals("--python-home is not supported yet", e.getMessage());
        ConfigException r = Cli.withSystemProperties(Map.of("peregrine.static-dir", "/a=b"),
                () -> assertThrows(ConfigException.class, () -> Cli.settings("main:app")));
        assertEquals("invalid value for option '--static-dir': 'b' is not a directory", r.getMessage()); // checked as if typed
        assertTrue(Cli.withSystemProperties(Map.of("peregrine.compress", "false"), () -> Cli.settings("main:app")).app().lifespan());
    }
}
