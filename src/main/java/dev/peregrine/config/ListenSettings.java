package dev.peregrine.config;

import java.nio.file.Path;

/** Where the application is served: {@code unix} is null on TCP. */
public record ListenSettings(String host, int port, Path unix, int backlog, int maxConnections) {
}
