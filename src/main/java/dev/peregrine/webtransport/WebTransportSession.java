package dev.peregrine.webtransport;

import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.http.WakeupBatch;
import io.netty.buffer.ByteBuf;

import java.net.InetSocketAddress;
import java.util.function.LongConsumer;

/**
 * One WebTransport session as its application adapter sees it, whatever carries it. The methods that
 * act ({@link #accept}, {@link #send}, ...) may be called on any thread: they hand the work to the
 * session's I/O thread, in {@code batch} when given.
 */
public interface WebTransportSession {
    HttpRequestHead head();
    String httpVersion();
    /** "https": WebTransport is always encrypted. */
    String scheme();
    InetSocketAddress remoteAddress();
    InetSocketAddress localAddress();

    /** Registers who hears about streams, datagrams and the close; on the I/O thread, during dispatch. */
    void start(WebTransportReceiver receiver);

    /** Accepts the session: {@code :status 200} with the application's extra headers (their status is ignored). */
    void accept(ResponseHead extraHeaders, WakeupBatch batch);

    /** Refuses the session with an HTTP status (not 2xx) and ends the CONNECT stream. */
    void refuse(int status, WakeupBatch batch);

    /** Sends on a stream; {@code end} finishes it (FIN). Takes ownership of {@code data}. */
    void send(long stream, ByteBuf data, boolean end, WakeupBatch batch);

    /**
     * Resets the server's side of a stream (RESET_STREAM) with a WebTransport error code (32 bits): what
     * it had not delivered is dropped, and nothing more is sent on it.
     */
    void resetStream(long stream, long code, WakeupBatch batch);

    /**
     * Asks the client to stop sending on a stream (STOP_SENDING) with a WebTransport error code (32
     * bits); nothing more of it reaches the application. A stream already gone is left alone.
     */
    void stopStream(long stream, long code, WakeupBatch batch);

    /**
     * Opens a stream from the server (draft-02's stream header is written first); {@code opened} gets its
     * ID on the I/O thread, or -1 when it cannot be opened (the session is over, or the client's limit of
     * streams is reached).
     */
    void openStream(boolean bidirectional, LongConsumer opened, WakeupBatch batch);

    /** Sends one datagram, dropped silently when it does not fit or the peer is slow: datagrams are unreliable. */
    void sendDatagram(ByteBuf data, WakeupBatch batch);

    /** Closes the session with the CLOSE_WEBTRANSPORT_SESSION capsule, then ends its streams. */
    void close(long code, String reason, WakeupBatch batch);

    /** The application ended: a session it accepted is closed (code 0, or an error when it failed), one it did not is answered 500. */
    void finish(boolean failed, WakeupBatch batch);

    /** Whether {@code stream} is one the application may send on now: open, and the server's to write. Any thread. */
    boolean sendable(long stream);

    /** Whether {@code stream} is one the server reads: one the client opened, or a bidirectional one. Any thread. */
    boolean receivable(long stream);

    /** The application received {@code bytes} of stream data: reading resumes as the session's buffer empties. Any thread. */
    void consumed(int bytes);

    /** The application received a datagram: one more may be queued for it. Any thread. */
    void datagramConsumed();

    /**
     * False while outgoing data is over its high-water mark, or {@code stream} takes no more (its flow
     * control window is closed). Any thread.
     */
    boolean writable(long stream);

    /**
     * Runs {@code task} on the I/O thread once {@code stream} takes more, or will never again (the client
     * stopped it, it or the session is gone). Other streams of the session do not hold it back.
     */
    void whenWritable(long stream, Runnable task);

    /** True once the session is over. Any thread. */
    boolean closed();
}
