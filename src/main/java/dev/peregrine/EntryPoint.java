package dev.peregrine;

import dev.peregrine.cli.CommandLineSetup;
import dev.peregrine.cli.PeregrineCommand;
import dev.peregrine.cli.WorkerOptions;
import dev.peregrine.config.ConfigException;
import dev.peregrine.config.ServerSettings;
import dev.peregrine.workers.SupervisorLink;
import io.quarkus.picocli.runtime.annotations.TopCommand;
import io.quarkus.runtime.Quarkus;
import io.quarkus.runtime.QuarkusApplication;
import io.quarkus.runtime.annotations.QuarkusMain;
import jakarta.inject.Inject;
import picocli.CommandLine;

/**
 * The process's {@code main}. A worker that a supervisor started finds the supervisor's resolved
 * options in its environment ({@link WorkerOptions}) and starts its server at once, without Quarkus:
 * booting Quarkus, SmallRye Config and picocli again in every worker was most of the CPU its start
 * took, and a killed worker's successor and every SIGHUP wait for that start. Every other process
 * (the one process, the supervisor, {@code --help}) runs the command line under Quarkus.
 */
@QuarkusMain
public class EntryPoint implements QuarkusApplication {
    private final PeregrineCommand command;

    @Inject
    public EntryPoint(@TopCommand PeregrineCommand command) {
        this.command = command;
    }

    public static void main(String... args) {
        String workerOptions = System.getenv(WorkerOptions.ENV);
        if (workerOptions != null && SupervisorLink.supervised()) System.exit(runWorker(workerOptions));
        Quarkus.run(EntryPoint.class, args);
    }

    @Override
    public int run(String... args) {
        return CommandLineSetup.configure(new CommandLine(command)).execute(args);
    }

    private static int runWorker(String workerOptions) {
        WorkerLogging.install();
        ServerSettings settings;
        try {
            settings = WorkerOptions.settings(workerOptions);
        } catch (ConfigException e) {
            // The supervisor read the same options without fault; only a changed file (a --tls-cert gone) gets here.
            System.err.println("peregrine: " + e.getMessage());
            return 2;
        }
        return Main.run(settings, null);
    }
}
