package dev.peregrine.testing;

import dev.peregrine.websocket.WebSocketApplication;
import dev.peregrine.websocket.WebSocketConnection;
import dev.peregrine.websocket.WebSocketReceiver;
import io.netty.buffer.ByteBuf;

/**
 * The WebSocket application the transport fuzz tests serve: accepts every handshake and sends each
 * message back. A WebSocket it accepted ends only when the transport ends it.
 */
public final class EchoingWebSockets implements WebSocketApplication {
    @Override
    public void dispatch(WebSocketConnection connection) {
        connection.start(new WebSocketReceiver() {
            @Override
            public void onMessage(ByteBuf data, boolean text) {
                connection.consumed(data.readableBytes());
                connection.send(data, text, null);
            }

            @Override
            public void onClose(int code, String reason) {
            }
        });
        connection.accept(null, null, null);
    }
}
