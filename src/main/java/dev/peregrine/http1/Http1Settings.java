package dev.peregrine.http1;

import dev.peregrine.cli.ServerSettings;
import dev.peregrine.ops.AccessLog;
import dev.peregrine.proxy.TrustedProxies;
import dev.peregrine.websocket.WebSocketSettings;

/**
 * What an HTTP/1.1 connection needs to know of the server's configuration. {@code accessLog} is null when
 * requests are not logged, {@code webSocket} when upgrades are refused (--no-websockets).
 */
public record Http1Settings(
        int maxHeadSize,
        long maxBody,
        long keepAliveMillis,
        long requestTimeoutMillis,
        String scheme,
        AccessLog accessLog,
        TrustedProxies trustedProxies,
        boolean requestId,
        boolean requestStartHeader,
        WebSocketSettings webSocket) {

    public static Http1Settings from(ServerSettings s) {
        AccessLog accessLog = s.accessLog() ? new AccessLog(s.accessLogJson(), s.requestId(), s.traceContext()) : null;
        return new Http1Settings(s.maxHeaderSize(), s.maxBody(), s.keepAliveMillis(), s.requestTimeoutMillis(), s.scheme(),
                accessLog, s.forwardedAllowIps(), s.requestId(), s.requestStartHeader(),
                WebSocketSettings.from(s));
    }
}
