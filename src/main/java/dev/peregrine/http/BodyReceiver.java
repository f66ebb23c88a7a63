package dev.peregrine.http;

import io.netty.buffer.ByteBuf;

/** Receives a request body as the transport reads it; every method runs on the connection's I/O thread. */
public interface BodyReceiver {
    /** A piece of the body; the receiver owns (and must release) the buffer. */
    void onBody(ByteBuf data);

    /** The body is complete. */
    void onBodyEnd();

    /** The client went away, or the exchange was cut; no more body will come. */
    void onDisconnect();
}
