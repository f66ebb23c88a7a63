package dev.peregrine.app;

import dev.peregrine.http.Application;
import dev.peregrine.websocket.WebSocketApplication;
import dev.peregrine.webtransport.WebTransportApplication;

/** An application adapter (ASGI or WSGI) with the life cycle the server drives. */
public interface ServedApplication extends Application {
    /** With the GIL held, after {@code peregrine._native} is published: import what the adapter needs. */
    void prepare();

    /** Starts the Python thread(s); returns once requests can be served, with a word for the startup line. */
    String start();

    /** Where WebSocket upgrades go, or null when the application cannot take them (they get 501). */
    default WebSocketApplication webSockets() {
        return null;
    }

    /** Where WebTransport sessions go, or null when the application cannot take them (they get 501). */
    default WebTransportApplication webTransport() {
        return null;
    }

    /**
     * Whether every thread that runs the application is taken (queued requests count): a new
     * connection accepted now would wait. Only WSGI, whose threads block, can be; ASGI never is.
     */
    default boolean saturated() {
        return false;
    }

    /** Runs {@code change} (on whichever thread) each time {@link #saturated()} may have changed. */
    default void onSaturationChange(Runnable change) {
    }

    /** After the last request: stops the Python thread(s) (ASGI runs its lifespan shutdown). */
    void stop(long timeoutMillis) throws InterruptedException;
}
