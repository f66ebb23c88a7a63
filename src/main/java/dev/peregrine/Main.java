package dev.peregrine;

import dev.peregrine.cli.Launcher;
import dev.peregrine.cli.WorkerOptions;
import dev.peregrine.config.ConfigException;
import dev.peregrine.config.LogLevel;
import dev.peregrine.config.ServerSettings;
import dev.peregrine.server.WorkerServer;
import dev.peregrine.tls.TlsContexts;
import dev.peregrine.workers.Supervisor;
import dev.peregrine.workers.SupervisorLink;
import jakarta.enterprise.context.ApplicationScoped;

import java.util.List;
import java.util.Map;
import java.util.logging.Level;

/**
 * Where the process goes once the command line ({@code cli}) has been read into the configuration
 * records: a worker (the one process, or one started by a supervisor) or the supervisor is assembled
 * and run. The command line hands its settings to this bean; a supervised worker, which starts without
 * Quarkus ({@link EntryPoint}), comes to {@link #run} directly.
 */
@ApplicationScoped
public class Main implements Launcher {

    @Override
    public int launch(ServerSettings settings, String workerOptions) {
        return run(settings, workerOptions);
    }

    static int run(ServerSettings settings, String workerOptions) {
        applyLogLevel(settings.operations().logLevel());
        // Before either kind of process installs its handlers, which HotSpot skips for an ignored signal.
        List<String> unignored = SignalDispositions.resetIgnored();
        if (!unignored.isEmpty()) {
            org.jboss.logging.Logger.getLogger("peregrine").debugf("%s ignored when this process started (nohup?): handled all the same",
                    String.join(", ", unignored));
        }
        TlsContexts tls;
        try {
            // Read before anything starts, so that a bad certificate or key ends the start with status 2;
            // a supervisor checks them as well, before it starts any worker.
            tls = settings.tls().enabled() ? TlsContexts.load(settings) : null;
        } catch (ConfigException e) {
            System.err.println("peregrine: " + e.getMessage());
            return 2;
        }
        // A worker started by a supervisor has the same settings, and must not supervise in turn.
        if (settings.workers().supervised() && !SupervisorLink.supervised()) {
            return new Supervisor(settings, workerOptions == null ? Map.of() : Map.of(WorkerOptions.ENV, workerOptions)).run();
        }
        return new WorkerServer(settings, tls).run();
    }

    /** --log-level, for the server's own lines, in whichever process this is: a worker, or the supervisor. */
    private static void applyLogLevel(LogLevel logLevel) {
        Level level = switch (logLevel) {
            case debug -> Level.FINE;
            case info -> Level.INFO;
            case warning -> Level.WARNING;
            case error -> Level.SEVERE;
            case silent -> Level.OFF;
        };
        java.util.logging.Logger.getLogger("peregrine").setLevel(level);
    }
}
