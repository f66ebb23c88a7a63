package dev.peregrine.ops;

import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.HttpRequestHead;
import org.jboss.logging.Logger;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;

/** One line per finished request: client, method, target, protocol, status, bytes, duration. */
public final class AccessLog {
    private static final Logger LOG = Logger.getLogger("peregrine.access");

    private AccessLog() {}

    public static void log(HttpExchange exchange, int status, long bytes, long startNanos) {
        HttpRequestHead head = exchange.head();
        InetSocketAddress client = exchange.remoteAddress();
        String path = new String(head.bytes(), head.pathStart(), head.pathLength(), StandardCharsets.ISO_8859_1);
        if (head.queryLength() > 0) {
            path += "?" + new String(head.bytes(), head.queryStart(), head.queryLength(), StandardCharsets.ISO_8859_1);
        }
        double millis = (System.nanoTime() - startNanos) / 1e6;
        LOG.infof("%s - \"%s %s HTTP/%s\" %d %d %.3fms",
                client == null ? "unix" : client.getAddress().getHostAddress() + ":" + client.getPort(),
                head.method(), path, exchange.httpVersion(), status, bytes, millis);
    }
}
