package dev.peregrine.config;

/** Processes and their life cycle. {@code supervised}: a supervisor process runs the workers. */
public record WorkerSettings(int workers, boolean supervised, long drainDelayMillis, boolean reload) {
}
