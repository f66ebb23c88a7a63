package dev.peregrine.config;

/**
 * The stages the server runs in front of the application. {@code healthCheckPath} is null when the
 * server answers no health check, {@code compression} when it compresses no response (--compress).
 */
public record EdgeSettings(String healthCheckPath, CompressionSettings compression) {
}
