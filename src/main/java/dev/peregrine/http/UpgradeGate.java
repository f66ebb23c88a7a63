package dev.peregrine.http;

import java.net.InetSocketAddress;

/**
 * What an edge stage says about a WebSocket handshake, which leaves the edge chain (it becomes a
 * connection of its own rather than an exchange) but must still pass the checks that apply to every
 * request, such as the rate limit.
 */
public interface UpgradeGate {
    /** Lets every handshake through. */
    UpgradeGate OPEN = (head, client) -> null;

    /** The answer for a handshake that may not proceed, or null; {@code client} is null on a unix socket. I/O thread. */
    Refusal check(HttpRequestHead head, InetSocketAddress client);
}
