package dev.peregrine.config;

/**
 * The application and how it is called. {@code scheme} is what the application sees when no trusted
 * proxy says otherwise.
 */
public record AppSettings(
        String target,
        ApplicationProtocol protocol,
        boolean factory,
        String rootPath,
        String scheme,
        int wsgiThreads,
        boolean lifespan,
        boolean uvloop) {
}
