package dev.peregrine;

import io.quarkus.bootstrap.logging.InitialConfigurator;
import org.jboss.logmanager.formatters.PatternFormatter;
import org.jboss.logmanager.handlers.ConsoleHandler;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Properties;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The log handlers of a worker that starts without Quarkus ({@link EntryPoint}), set up as Quarkus sets
 * them up in every other process, from the same lines of {@code application.properties}: the server's
 * lines on stderr, the access log alone on stdout. A record logged before this runs waits in the handler
 * that Quarkus's log-context initialiser put on the root logger at the JVM's start, which passes it on
 * once it is given the handlers.
 */
final class WorkerLogging {
    static final String CONSOLE_FORMAT = "quarkus.log.console.format";
    static final String ACCESS_FORMAT = "quarkus.log.handler.console.\"ACCESS\".format";
    static final String ACCESS_LOGGER = "peregrine.access";

    private WorkerLogging() {}

    static void install() {
        Properties properties = new Properties();
        try (InputStream in = WorkerLogging.class.getClassLoader().getResourceAsStream("application.properties")) {
            if (in == null) throw new IllegalStateException("application.properties is missing from the server's jar");
            properties.load(in);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        ConsoleHandler console = new ConsoleHandler(ConsoleHandler.Target.SYSTEM_ERR, new PatternFormatter(properties.getProperty(CONSOLE_FORMAT)));
        ConsoleHandler access = new ConsoleHandler(ConsoleHandler.Target.SYSTEM_OUT, new PatternFormatter(properties.getProperty(ACCESS_FORMAT)));
        Logger accessLogger = Logger.getLogger(ACCESS_LOGGER);
        accessLogger.setUseParentHandlers(false);
        accessLogger.addHandler(access);
        Logger.getLogger("").setLevel(Level.INFO);
        InitialConfigurator.DELAYED_HANDLER.setHandlers(new Handler[] {console});
    }
}
