package dev.peregrine.websocket;

import dev.peregrine.cli.ServerSettings;

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

    /** Null when --no-websockets: upgrades are then answered 501. */
    public static WebSocketSettings from(ServerSettings s) {
        if (!s.websockets()) return null;
        return new WebSocketSettings(s.wsMaxMessage(), s.wsPingIntervalMillis(), s.wsPingTimeoutMillis(), s.wsMaxQueue(),
                s.wsMaxQueueBytes(), s.wsCompress());
    }
}
