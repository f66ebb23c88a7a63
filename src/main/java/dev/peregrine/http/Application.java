package dev.peregrine.http;

/** Where transports hand each parsed request: the ASGI or the WSGI adapter. */
public interface Application {
    /** Called on the connection's I/O thread once the head is parsed; must not block. */
    void dispatch(HttpExchange exchange);

    /** Where WebSocket upgrades go, or null when the application cannot take them (they get 501). */
    default dev.peregrine.websocket.WebSocketApplication webSockets() {
        return null;
    }
}
