package dev.peregrine.config;

/** Sizes and timeouts every transport applies; 0 turns a timeout off. */
public record LimitSettings(
        long maxBody,
        int maxHeaderSize,
        long keepAliveMillis,
        long requestTimeoutMillis,
        long gracefulTimeoutMillis) {
}
