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

    /** Runs {@code hook} first thing on each thread that will run the application; called before {@link #start()}. */
    default void onApplicationThreadStart(Runnable hook) {
    }

    /** Where WebSocket upgrades go, or null when the application cannot take them (they get 501). */
    default WebSocketApplication webSockets() {
        return null;
    }

    /** Where WebTransport sessions go, or null when the application cannot take them (they get 501). */
    default WebTransportApplication webTransport() {
        return null;
    }

    /**
     * Whether a new connection accepted now would wait for the application: every WSGI thread is taken
     * (queued requests count), or the ASGI loop is blocked with requests waiting. The worker asks when
     * told of a change and at a steady pace, since a blocked loop cannot tell.
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
