package dev.peregrine.http;

import java.net.InetSocketAddress;
import java.util.concurrent.CompletableFuture;

/**
 * What an edge stage says about a WebSocket or WebTransport handshake, which leaves the edge chain (it
 * becomes a connection or session of its own rather than an exchange) but must still pass the checks
 * that apply to every request, such as the rate limit.
 */
public interface UpgradeGate {
    CompletableFuture<Refusal> PROCEED = CompletableFuture.completedFuture(null);

    /** Lets every handshake through. */
    UpgradeGate OPEN = (head, client) -> PROCEED;

    /**
     * The answer for a handshake that may not proceed, or null; {@code client} is null on a unix socket.
     * Asked on the I/O thread; completed at once, or later (on any thread) when the answer needs a round
     * trip to --shared-store.
     */
    CompletableFuture<Refusal> check(HttpRequestHead head, InetSocketAddress client);
}
