package dev.peregrine.cli;

import dev.peregrine.config.ServerSettings;

/**
 * What the command does once the settings are read: implemented by the entry point, which assembles a
 * worker or the supervisor, so that the command line depends on nothing it starts.
 */
public interface Launcher {
    /** Runs the server the settings describe; the process's exit status. */
    int launch(ServerSettings settings);
}
