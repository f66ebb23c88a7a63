package dev.peregrine.http;

import dev.peregrine.config.TrustedProxies;
import dev.peregrine.config.WebSocketSettings;

/**
 * What an HTTP connection (HTTP/1.1, HTTP/2 or HTTP/3) needs to know of the server's configuration. {@code accessLog}
 * is null when requests are not logged, {@code webSocket} when upgrades are refused (--no-websockets),
 * {@code tlsHeaders} when no response gets Strict-Transport-Security or Alt-Svc.
 */
public record HttpSettings(
        int maxHeadSize,
        long maxBody,
        long keepAliveMillis,
        long requestTimeoutMillis,
        String scheme,
        RequestLog accessLog,
        TrustedProxies trustedProxies,
        boolean requestId,
        boolean requestStartHeader,
        WebSocketSettings webSocket,
        TlsResponseHeaders tlsHeaders,
        long gracefulTimeoutMillis) {

    /**
     * How often a multiplexed connection (HTTP/2, HTTP/3) checks its timeouts with one timer: twice per
     * the shorter of --keep-alive and --request-timeout, once a second when both are off.
     */
    public long timeoutCheckMillis() {
        long keepAlive = keepAliveMillis > 0 ? keepAliveMillis : Long.MAX_VALUE;
        long request = requestTimeoutMillis > 0 ? requestTimeoutMillis : Long.MAX_VALUE;
        long tick = Math.min(keepAlive, request);
        return tick == Long.MAX_VALUE ? 1000 : Math.max(10, tick / 2);
    }
}
