package dev.peregrine.cli;

import dev.peregrine.config.ServerSettings;

/**
 * What the command does once the settings are read: implemented by the entry point, which assembles a
 * worker or the supervisor, so that the command line depends on nothing it starts.
 */
public interface Launcher {
    /**
     * Runs the server the settings describe; the process's exit status. {@code workerOptions} is what a
     * supervisor hands its workers ({@link WorkerOptions}), null when this process supervises none.
     */
    int launch(ServerSettings settings, String workerOptions);
}
