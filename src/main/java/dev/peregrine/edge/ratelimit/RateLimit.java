package dev.peregrine.edge.ratelimit;

import dev.peregrine.config.RateLimitSettings;
import dev.peregrine.edge.EdgeStage;
import dev.peregrine.http.Application;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.Refusal;
import dev.peregrine.http.UpgradeGate;
import dev.peregrine.metrics.RequestMetrics;
import dev.peregrine.shared.SharedRegion;
import dev.peregrine.store.SharedStore;
import io.netty.buffer.Unpooled;

import java.net.InetSocketAddress;
import java.util.concurrent.CompletableFuture;

/**
 * {@code --rate-limit}: a client past its budget gets 429 from the I/O thread, and the application
 * never sees the request. The client is the exchange's remote address, which the request core has
 * already replaced with what a trusted proxy reported ({@code --forwarded-allow-ips}). WebSocket
 * handshakes, which leave the chain, are checked through {@link UpgradeGate}.
 *
 * <p>With {@code --shared-store}, a request's budget is spent in the store ({@link StoreBudget}), which
 * every replica shares, and the request waits on the I/O thread's side, never the application's, for
 * that one round trip. When the store fails or is slow, the request is charged to this host's own
 * table instead: the limit then holds per replica until the store answers again. WebSocket and
 * WebTransport handshakes are charged the same way, the transport waiting for the answer.
 *
 * <p>The 429 carries {@code Retry-After} (whole seconds, rounded up) and the fields of
 * draft-ietf-httpapi-ratelimit-headers: {@code RateLimit-Policy} states the burst as the quota and
 * the time to refill it as the window (rounded up to whole seconds, so a client keeping to it is never
 * refused), {@code RateLimit} that nothing remains and when the next request will be allowed.
 */
public final class RateLimit implements EdgeStage, UpgradeGate {
    private static final String POLICY_NAME = "\"peregrine\"";
    private static final long SECOND = 1_000_000_000L;

    private final ClientTable table;
    /** Null without --shared-store. */
    private final StoreBudget store;
    private final RequestMetrics metrics;
    private final String policy;

    /** @param store the shared store, or null: the budgets are then this host's alone */
    public RateLimit(RateLimitSettings settings, SharedRegion table, SharedStore store, RequestMetrics metrics) {
        this.table = new ClientTable(table, settings.intervalNanos(), settings.burst(), metrics);
        this.store = store == null ? null : new StoreBudget(store, settings);
        this.metrics = metrics;
        long window = ceilSeconds(settings.burst() * settings.intervalNanos());
        this.policy = POLICY_NAME + ";q=" + settings.burst() + ";w=" + Math.max(1, window);
    }

    @Override
    public void handle(HttpExchange exchange, Application next) {
        long key = ClientKey.of(exchange.remoteAddress());
        if (store == null) {
            decide(exchange, next, table.admit(key, System.nanoTime()));
            return;
        }
        store.admit(key).whenComplete((outcome, failure) -> {
            long decided = failure == null ? outcome : table.admit(key, System.nanoTime());
            exchange.runOnLoop(() -> decide(exchange, next, decided), 0, null);
        });
    }

    private void decide(HttpExchange exchange, Application next, long outcome) {
        Refusal refusal = refusal(outcome);
        if (refusal == null) {
            next.dispatch(exchange);
            return;
        }
        exchange.send(refusal.head(), exchange.head().method().equals("HEAD") ? null : Unpooled.wrappedBuffer(refusal.body()), true);
    }

    /** As {@link #handle}: through the store when there is one, else (or when it fails) this host's table. */
    @Override
    public CompletableFuture<Refusal> check(HttpRequestHead head, InetSocketAddress client) {
        long key = ClientKey.of(client);
        if (store == null) return CompletableFuture.completedFuture(refusal(table.admit(key, System.nanoTime())));
        return store.admit(key).handle((outcome, failure) -> refusal(failure == null ? outcome : table.admit(key, System.nanoTime())));
    }

    /** Null when {@code outcome} ({@link ClientTable#admit}) lets the request through. */
    private Refusal refusal(long outcome) {
        if (outcome >= 0) return null;
        metrics.rateLimited();
        long seconds = Math.max(1, ceilSeconds(-outcome));
        Refusal refusal = Refusal.of(429, "over the rate limit, retry in " + seconds + " s");
        refusal.head().add("retry-after", Long.toString(seconds));
        refusal.head().add("ratelimit-policy", policy);
        refusal.head().add("ratelimit", POLICY_NAME + ";r=0;t=" + seconds);
        refusal.head().add("cache-control", "no-store");
        return refusal;
    }

    private static long ceilSeconds(long nanos) {
        return (nanos + SECOND - 1) / SECOND;
    }
}
