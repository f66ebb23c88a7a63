package dev.peregrine.config;

/**
 * Workers and their life cycle. {@code supervised}: a supervisor process runs the workers.
 * {@code freeThreaded}: the workers are threads of one worker process, on a free-threaded CPython, and
 * {@code processLifespan} says whether one ASGI lifespan serves them all (--lifespan-scope process)
 * rather than one per worker thread. {@code shareCore}: --share-core (server.CoreSharing).
 */
public record WorkerSettings(int workers, boolean supervised, long drainDelayMillis, boolean reload, boolean freeThreaded,
                             boolean processLifespan, boolean shareCore) {
    /** How many worker processes serve at once: one per worker, or the one whose threads the workers are. */
    public int processes() {
        return freeThreaded ? 1 : workers;
    }
}
