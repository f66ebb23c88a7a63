package dev.peregrine.websocket;

import dev.peregrine.http.ResponseHead;
import io.netty.buffer.ByteBuf;

import java.net.InetSocketAddress;

/** The HTTP/1.1 connection an upgrade request came on, as the WebSocket side needs it. I/O thread only. */
public interface HttpUpgrade {
    /** Answers the upgrade request with a complete HTTP response (takes {@code body}, may be null) and closes the connection. */
    void respond(ResponseHead head, ByteBuf body);

    /**
     * Writes the 101 response and hands the connection over: the HTTP/1.1 handler leaves the pipeline.
     * Returns what the client sent after the request head (to be read as frames), possibly empty.
     */
    ByteBuf switchProtocols(ResponseHead head);

    /**
     * The server address the client came to, when the WebSocket's channel does not say it: a QUIC
     * stream's own address is the stream's, not a socket's. Null: the channel's.
     */
    default InetSocketAddress serverAddress() {
        return null;
    }
}
