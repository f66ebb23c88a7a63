package dev.peregrine.webtransport;

/** An application adapter that serves WebTransport sessions (ASGI does; WSGI has no way to). */
public interface WebTransportApplication {
    /**
     * Called on the session's I/O thread once an extended CONNECT for WebTransport arrived; the
     * application decides to accept or refuse it. Must call {@link WebTransportSession#start} before returning.
     */
    void dispatch(WebTransportSession session);
}
