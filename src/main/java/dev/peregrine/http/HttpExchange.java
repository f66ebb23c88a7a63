package dev.peregrine.http;

import io.netty.buffer.ByteBuf;

import java.net.InetSocketAddress;

/**
 * One request and its response, as seen by the edge stages and the application adapters; each transport
 * (HTTP/1.1, HTTP/2, HTTP/3) implements it. Response methods may be called from the Python thread: implementations hand
 * the work to the connection's I/O thread.
 */
public interface HttpExchange {
    HttpRequestHead head();

    /** "1.0", "1.1", "2" or "3". */
    String httpVersion();

    /** "http" or "https" as the application should see it. */
    String scheme();

    /** The peer, or null on a unix socket. */
    InetSocketAddress remoteAddress();

    /** The listening address, or null on a unix socket. */
    InetSocketAddress localAddress();

    /** Starts delivering the body to {@code receiver}; call once, on the I/O thread, before {@link #demand}. */
    void receiveBody(BodyReceiver receiver);

    /** Asks for more body: the transport reads from the socket only as far as the application asked. Any thread. */
    void demand();

    /**
     * Sends the response head (when {@code head} is not null: the first call must carry it), then
     * {@code body} (may be null), and finishes the response when {@code last}. Takes ownership of body.
     */
    void send(ResponseHead head, ByteBuf body, boolean last);

    /**
     * Like {@link #send(ResponseHead, ByteBuf, boolean)}, but the I/O thread is not woken for it:
     * it is queued in {@code batch}, whose flush the caller guarantees soon.
     */
    void send(ResponseHead head, ByteBuf body, boolean last, WakeupBatch batch);

    /**
     * Sends a complete response whose body is read from a file: {@code head} must declare the body's
     * Content-Length. Takes ownership of body (its file is closed once sent). Any thread; the file is
     * read on the connection's I/O thread. A transport that can have the kernel copy the file to the
     * socket overrides this.
     */
    default void sendFile(ResponseHead head, FileBody body) {
        FileSender.send(this, head, body);
    }

    /**
     * Runs {@code task} on the connection's I/O thread (now if already there, else queued in {@code batch}
     * when given), with {@code bytes} counted as handed over, against {@link #writable}, until it runs:
     * how a stage that transforms the response moves its work off the application's thread.
     */
    void runOnLoop(Runnable task, int bytes, WakeupBatch batch);

    /** Ends the exchange without a complete response: the connection is closed. Any thread. */
    void abort();

    /** False while the connection's send buffer is over its high-water mark. Any thread. */
    boolean writable();

    /**
     * Runs {@code task} on the I/O thread once the connection is writable again, or at once if it
     * is (or if the connection is gone). Any thread.
     */
    void whenWritable(Runnable task);

    /** True once the client is gone or the exchange was cut. */
    boolean disconnected();

    /**
     * True when the server itself ended the request (a body past --max-body, a body that stopped
     * coming): what the application then raises about the lost request is not its own error.
     */
    default boolean endedByServer() { return false; }
}
