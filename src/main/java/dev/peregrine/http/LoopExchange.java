package dev.peregrine.http;

import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;

import java.net.InetSocketAddress;

/**
 * What every transport's exchange shares: responses handed from the application's thread to the
 * connection's I/O thread (at once, or batched), the count of bytes handed over but not yet written,
 * the tasks that wait for the connection to take more, the body receiver, and the end of an exchange
 * that was cut. A transport writes in {@link #write}, on the I/O thread, says in {@link #acceptsMore}
 * when a waiting task may run, and settles its own state in {@link #onCut}.
 */
public abstract class LoopExchange implements HttpExchange {
    private final Channel channel;
    private final WriteQueue queue;
    private volatile boolean cut;
    private volatile boolean endedByServer;
    /** Null until the adapter asks for the body. */
    private BodyReceiver receiver;
    /** The client and scheme as the application sees them: the connection's, or what a trusted proxy said. */
    private InetSocketAddress client;
    private String scheme;
    /** When the request's head began to arrive ({@link System#nanoTime}): what its duration is measured from. */
    private final long startNanos;
    /** Index in the head of the X-Request-ID header the response echoes (--request-id), or -1. */
    protected int requestIdHeader = -1;

    protected LoopExchange(Channel channel, InetSocketAddress client, String scheme, long startNanos) {
        this.channel = channel;
        this.queue = new WriteQueue(channel.eventLoop());
        this.client = client;
        this.scheme = scheme;
        this.startNanos = startNanos;
    }

    public final long startNanos() {
        return startNanos;
    }

    /** The response carries the value of the request's header {@code header} as its X-Request-ID. */
    public final void echoRequestId(int header) {
        requestIdHeader = header;
    }

    @Override
    public InetSocketAddress localAddress() {
        return channel.localAddress() instanceof InetSocketAddress local ? local : null;
    }

    @Override
    public final boolean disconnected() {
        return cut;
    }

    @Override
    public final boolean endedByServer() {
        return endedByServer;
    }

    /** {@link #cut} because the server refused the rest of the request, not because the client left. */
    public final void cutByServer() {
        endedByServer = true;
        cut();
    }

    @Override
    public final void receiveBody(BodyReceiver receiver) {
        this.receiver = receiver;
        if (cut) receiver.onDisconnect();
    }

    /** Where body goes, or null before {@link #receiveBody}. */
    protected final BodyReceiver receiver() {
        return receiver;
    }

    /**
     * The client is gone or the exchange was cut; on the I/O thread. The transport settles its state
     * ({@link #onCut}), then the application learns it, and tasks waiting to write run (and find it cut).
     */
    public final void cut() {
        if (cut) return;
        cut = true;
        onCut();
        if (receiver != null) receiver.onDisconnect();
        runWritableTasks();
    }

    /** The transport's part of {@link #cut}: count the request as ended, drop what it buffered. */
    protected abstract void onCut();

    @Override
    public final InetSocketAddress remoteAddress() {
        return client;
    }

    @Override
    public final String scheme() {
        return scheme;
    }

    /** What a trusted proxy's forwarding headers said; either may be null (then the connection's stands). */
    public final void forwardedAs(InetSocketAddress client, String scheme) {
        if (client != null) this.client = client;
        if (scheme != null) this.scheme = scheme;
    }

    /** Writes what {@link #send} was given; on the I/O thread. {@code size}: the body's bytes when it was sent. */
    protected abstract void write(ResponseHead head, ByteBuf body, boolean last, int size);

    /** Whether the connection (or stream) takes more now, or the exchange is over; on the I/O thread. */
    protected abstract boolean acceptsMore();

    @Override
    public final void send(ResponseHead head, ByteBuf body, boolean last) {
        send(head, body, last, null);
    }

    @Override
    public final void send(ResponseHead head, ByteBuf body, boolean last, WakeupBatch batch) {
        int size = body == null ? 0 : body.readableBytes();
        runOnLoop(() -> write(head, body, last, size), size, batch);
    }

    @Override
    public final void runOnLoop(Runnable task, int bytes, WakeupBatch batch) {
        queue.queued(bytes);
        queue.run(() -> {
            queue.written(bytes);
            task.run();
        }, bytes, batch);
    }

    /** Whether the response data handed to {@link #send} and not yet written is under the high-water mark; any thread. */
    protected final boolean fewQueued() {
        return queue.fewQueued();
    }

    /** Runs {@code task} on the connection's I/O thread: now if already there. */
    protected final void onLoop(Runnable task) {
        queue.run(task, null);
    }

    @Override
    public final void whenWritable(Runnable task) {
        queue.whenWritable(task, this::acceptsMore);
    }

    /** Runs the tasks waiting for the connection to take more; when it does, or when the exchange ends. */
    protected final void runWritableTasks() {
        queue.runWritableTasks();
    }
}
