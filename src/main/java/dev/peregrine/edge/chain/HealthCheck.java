package dev.peregrine.edge.chain;

import dev.peregrine.edge.EdgeStage;
import dev.peregrine.http.Application;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.ResponseHead;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The first stage of the edge chain: answers --health-check-path in the server, so that a probe neither
 * waits for nor loads the Python thread. A worker accepts connections only once its application is
 * imported and its lifespan startup is complete, so being answered at all means ready; from the
 * moment the worker starts to shut down (including --drain-delay) the answer is 503, so that load
 * balancers stop sending before connections are refused.
 */
final class HealthCheck implements EdgeStage {
    private static final byte[] OK = "OK\n".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] DRAINING = "draining\n".getBytes(StandardCharsets.US_ASCII);

    private final byte[] path;
    private volatile boolean failing;

    HealthCheck(String path) {
        this.path = path.getBytes(StandardCharsets.UTF_8);
    }

    /** From now on the check answers 503. */
    void fail() {
        failing = true;
    }

    @Override
    public void handle(HttpExchange exchange, Application next) {
        HttpRequestHead head = exchange.head();
        int start = head.pathStart();
        if (head.pathLength() != path.length || !Arrays.equals(head.bytes(), start, start + path.length, path, 0, path.length)) {
            next.dispatch(exchange);
            return;
        }
        boolean up = !failing;
        ResponseHead response = new ResponseHead(up ? 200 : 503);
        byte[] text = up ? OK : DRAINING;
        response.add("content-type", "text/plain; charset=utf-8");
        response.add("content-length", Integer.toString(text.length));
        response.add("cache-control", "no-store");
        ByteBuf body = head.method().equals("HEAD") ? null : Unpooled.wrappedBuffer(text);
        exchange.send(response, body, true);
    }
}
