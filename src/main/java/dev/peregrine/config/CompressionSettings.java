package dev.peregrine.config;

/** --compress: application responses whose body is declared smaller than {@code minSize} bytes are sent as they are. */
public record CompressionSettings(int minSize) {
}
