package dev.peregrine.http;

/**
 * Where the request core hands each request: the edge chain, whose last link is the application
 * adapter (ASGI or WSGI).
 */
public interface Application {
    /** Called on the connection's I/O thread once the head is parsed; must not block. */
    void dispatch(HttpExchange exchange);
}
