package dev.peregrine.http;

import dev.peregrine.cli.ServerSettings;
import dev.peregrine.ops.AccessLog;
import dev.peregrine.proxy.TrustedProxies;
import dev.peregrine.websocket.WebSocketSettings;

/**
 * What an HTTP connection (HTTP/1.1 or HTTP/2) needs to know of the server's configuration. {@code accessLog}
 * is null when requests are not logged, {@code webSocket} when upgrades are refused (--no-websockets),
 * {@code hsts} (the Strict-Transport-Security value) when none is added.
 */
public record HttpSettings(
        int maxHeadSize,
        long maxBody,
        long keepAliveMillis,
        long requestTimeoutMillis,
        String scheme,
        AccessLog accessLog,
        TrustedProxies trustedProxies,
        boolean requestId,
        boolean requestStartHeader,
        WebSocketSettings webSocket,
        String hsts,
        long gracefulTimeoutMillis) {

    public static HttpSettings from(ServerSettings s) {
        AccessLog accessLog = s.accessLog() ? new AccessLog(s.accessLogJson(), s.requestId(), s.traceContext()) : null;
        return new HttpSettings(s.maxHeaderSize(), s.maxBody(), s.keepAliveMillis(), s.requestTimeoutMillis(), s.scheme(),
                accessLog, s.forwardedAllowIps(), s.requestId(), s.requestStartHeader(),
                WebSocketSettings.from(s), s.hstsSeconds() >= 0 ? "max-age=" + s.hstsSeconds() : null,
                s.gracefulTimeoutMillis());
    }
}
