package dev.peregrine.websocket;

import io.netty.buffer.ByteBuf;

/** What a WebSocket connection tells its application adapter; called on the I/O thread, must not block. */
public interface WebSocketReceiver {
    /**
     * One complete message, reassembled, size-checked and (text) UTF-8 validated. Takes ownership of
     * {@code data}; the adapter calls {@link WebSocketConnection#consumed} once the application has it.
     */
    void onMessage(ByteBuf data, boolean text);

    /** The connection is over: the peer's close code (1005 when it gave none), or the server's reason (1006 when lost). Called once. */
    void onClose(int code, String reason);
}
