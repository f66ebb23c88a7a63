package dev.peregrine.cli;

import dev.peregrine.config.ServerSettings;
import io.smallrye.config.EnvConfigSource;
import io.smallrye.config.PropertiesConfigSource;
import io.smallrye.config.SmallRyeConfig;
import io.smallrye.config.SmallRyeConfigBuilder;
import org.eclipse.microprofile.config.spi.ConfigProviderResolver;
import org.eclipse.microprofile.config.spi.ConfigSource;
import picocli.CommandLine;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.net.URL;
import java.net.URLClassLoader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * Test support: the command line built as production builds it ({@link CommandLineSetup#configure}), with
 * its output captured, and ways to control the configuration {@link ConfigDefaults} sees.
 *
 * <p>In plain JUnit, {@code ConfigProvider.getConfig()} is SmallRye's per-classloader cached config made
 * of system properties (ordinal 400, read live, so setting one after the config was built is seen),
 * environment variables (300) and {@code target/classes/application.properties} (250, found by
 * quarkus-core's discovered config source provider). {@link #withSystemProperties} uses that real config.
 * {@link #withConfig} instead registers a config built for the test under a fresh context classloader,
 * for what system properties cannot do: fake environment variables, or hide application.properties.
 */
final class Cli {
    private Cli() {}

    /** The outcome of {@code execute}: exit code and what went to the command line's out and err writers. */
    record Run(int exitCode, String out, String err) {
        List<String> errLines() {
            return err.lines().toList();
        }
    }

    static CommandLine commandLine(PeregrineCommand command, StringWriter out, StringWriter err) {
        CommandLine cl = CommandLineSetup.configure(new CommandLine(command));
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        return cl;
    }

    /** Only for arguments that stop before {@code call()} (bad options, --help, --version): a valid target would start a server. */
    static Run execute(String... args) {
        StringWriter out = new StringWriter(), err = new StringWriter();
        CommandLine cl = commandLine(command(), out, err);
        int code = cl.execute(args);
        cl.getOut().flush();
        cl.getErr().flush();
        return new Run(code, out.toString(), err.toString());
    }

    /** Parses (applying configuration defaults) without running; throws picocli's ParameterException on bad input. */
    static PeregrineCommand parse(String... args) {
        PeregrineCommand command = command();
        commandLine(command, new StringWriter(), new StringWriter()).parseArgs(args);
        return command;
    }

    /** The command as production builds it, with an entry point that refuses to start anything. */
    static PeregrineCommand command() {
        return new PeregrineCommand((settings, workerOptions) -> {
            throw new AssertionError("the test would have started a server");
        });
    }

    static ServerSettings settings(String... args) {
        return CommandLineSettings.read(parse(args));
    }

    /** Runs {@code body} with the given system properties set, restoring the previous values afterwards. */
    static <T> T withSystemProperties(Map<String, String> properties, Supplier<T> body) {
        Map<String, String> previous = new java.util.HashMap<>();
        for (String key : properties.keySet()) previous.put(key, System.getProperty(key));
        try {
            properties.forEach(System::setProperty);
            return body.get();
        } finally {
            previous.forEach((key, value) -> {
                if (value == null) System.clearProperty(key);
                else System.setProperty(key, value);
            });
        }
    }

    static void withSystemProperties(Map<String, String> properties, Runnable body) {
        withSystemProperties(properties, () -> {
            body.run();
            return null;
        });
    }

    /**
     * Runs {@code body} with a config of the test's own: {@code systemProperties} at the system-property
     * ordinal, {@code environment} through SmallRye's real environment source (so {@code PEREGRINE_MAX_BODY}
     * is looked up as {@code peregrine.max-body} is in production), and application.properties only if asked.
     * The config is registered for a fresh classloader made the thread's context classloader, so the cached
     * global config is neither used nor disturbed; both are undone afterwards.
     */
    static <T> T withConfig(Map<String, String> systemProperties, Map<String, String> environment,
                            boolean applicationProperties, Supplier<T> body) {
        List<ConfigSource> sources = new ArrayList<>();
        sources.add(new PropertiesConfigSource(systemProperties, "test system properties", 400));
        sources.add(new EnvConfigSource(environment, 300));
        if (applicationProperties) {
            URL url = Cli.class.getClassLoader().getResource("application.properties");
            if (url == null) throw new IllegalStateException("application.properties is not on the test classpath");
            try {
                sources.add(new PropertiesConfigSource(url, 250));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        SmallRyeConfig config = new SmallRyeConfigBuilder().withSources(sources.toArray(ConfigSource[]::new)).build();
        Thread thread = Thread.currentThread();
        ClassLoader previous = thread.getContextClassLoader();
        URLClassLoader loader = new URLClassLoader("peregrine-test-config", new URL[0], previous);
        ConfigProviderResolver resolver = ConfigProviderResolver.instance();
        resolver.registerConfig(config, loader);
        thread.setContextClassLoader(loader);
        try {
            return body.get();
        } finally {
            thread.setContextClassLoader(previous);
            resolver.releaseConfig(config);
            try {
                loader.close();
            } catch (IOException ignored) {
                // nothing was opened
            }
        }
    }

    static String[] args(String line) {
        return line.isBlank() ? new String[0] : Arrays.stream(line.trim().split(" +")).toArray(String[]::new);
    }
}
