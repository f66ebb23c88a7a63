package dev.peregrine.websocket;

/** An application adapter that serves WebSocket connections (ASGI does; WSGI has no way to). */
public interface WebSocketApplication {
    /**
     * Called on the connection's I/O thread once an upgrade request passed the handshake checks; the
     * application decides to accept or deny it. Must call {@link WebSocketConnection#start} before returning.
     */
    void dispatch(WebSocketConnection connection);
}
