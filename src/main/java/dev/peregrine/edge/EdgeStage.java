package dev.peregrine.edge;

import dev.peregrine.http.Application;
import dev.peregrine.http.HttpExchange;

/**
 * One feature the server runs in front of the application: the health check, the rate limit, static
 * files, compression, the response cache ({@code edge.chain.EdgeChain} puts them in that order). A
 * stage sees every request of every transport (HTTP/1.1, HTTP/2, HTTP/3) the same way, as an
 * {@link HttpExchange}.
 */
public interface EdgeStage {
    /**
     * Called on the connection's I/O thread once the request head is parsed and settled by the request
     * core; must not block. The stage either answers the request itself through
     * {@link HttpExchange#send} (the Python thread never sees it), or passes it on with
     * {@code next.dispatch(exchange)}, or passes on an {@link ExchangeWrapper} of its own whose
     * {@code send} transforms the response on its way out.
     */
    void handle(HttpExchange exchange, Application next);
}
