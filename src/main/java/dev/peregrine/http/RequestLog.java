package dev.peregrine.http;

import java.net.InetSocketAddress;

/**
 * Where a transport reports each answered request, once its response is complete: the access log
 * ({@code ops}) implements it, so that the request core does not depend on how lines are written.
 */
public interface RequestLog {
    /** {@code startNanos}: when the head began to arrive ({@link System#nanoTime}). */
    void log(HttpRequestHead head, String httpVersion, InetSocketAddress client, int status, long bytes, long startNanos);

    default void log(HttpExchange exchange, int status, long bytes, long startNanos) {
        log(exchange.head(), exchange.httpVersion(), exchange.remoteAddress(), status, bytes, startNanos);
    }
}
