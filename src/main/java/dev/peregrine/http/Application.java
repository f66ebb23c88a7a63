package dev.peregrine.http;

/** Where transports hand each parsed request: the ASGI or the WSGI adapter. */
public interface Application {
    /** Called on the connection's I/O thread once the head is parsed; must not block. */
    void dispatch(HttpExchange exchange);
}
