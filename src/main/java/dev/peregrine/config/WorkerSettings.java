package dev.peregrine.config;

/**
 * Workers and their life cycle. {@code supervised}: a supervisor process runs the workers.
 * {@code freeThreaded}: the workers are threads of this one process, on a free-threaded CPython, and
 * {@code processLifespan} says whether one ASGI lifespan serves them all (--lifespan-scope process)
 * rather than one per worker thread.
 */
public record WorkerSettings(int workers, boolean supervised, long drainDelayMillis, boolean reload, boolean freeThreaded,
                             boolean processLifespan) {
}
