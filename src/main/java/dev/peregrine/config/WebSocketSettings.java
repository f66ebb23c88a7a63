package dev.peregrine.config;

/**
 * The WebSocket options of the server. {@code pingIntervalMillis} or {@code pingTimeoutMillis} 0 turn
 * that part of the keepalive off.
 */
public record WebSocketSettings(
        int maxMessage,
        long pingIntervalMillis,
        long pingTimeoutMillis,
        int maxQueue,
        long maxQueueBytes,
        boolean compress) {

}
