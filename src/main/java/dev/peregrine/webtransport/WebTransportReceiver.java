package dev.peregrine.webtransport;

import io.netty.buffer.ByteBuf;

/** What a WebTransport session tells its application adapter; called on the I/O thread, must not block. */
public interface WebTransportReceiver {
    /**
     * Bytes of a stream the client opened or the server opened bidirectionally, in order; {@code end}
     * when the client finished the stream ({@code data} may then be empty). Takes ownership of
     * {@code data}; the adapter calls {@link WebTransportSession#consumed} once the application has it.
     */
    void onStreamData(long stream, ByteBuf data, boolean end);

    /**
     * The client reset a stream (RESET_STREAM): {@code code} is the WebTransport application error code
     * it carried, or {@link StreamErrors#NONE} when it carried none (another HTTP/3 code, or the stream
     * went without a reset).
     */
    void onStreamReset(long stream, long code);

    /** One datagram of the session's; takes ownership of {@code data}. */
    void onDatagram(ByteBuf data);

    /** The session is over: the client's close code and reason, or 0 and "" when it went without a close capsule. Called once. */
    void onClose(long code, String reason);
}
