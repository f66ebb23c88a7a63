package dev.peregrine.http;

import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.util.AsciiString;
import io.netty.util.ReferenceCountUtil;

import java.net.InetSocketAddress;
import java.util.ArrayDeque;

/**
 * The exchange of one request on a multiplexed connection, an HTTP/2 or an HTTP/3 stream: what both
 * do alike. The request body is kept as the transport delivered it ({@code P}: a frame, or its bytes)
 * and handed to the application one piece per demand, so that the transport acknowledges it to the
 * client only as it is consumed. The response follows the same rules on both: no body for HEAD, 1xx,
 * 204 and 304, never more than the declared content-length, a reset when less came, and the count,
 * metrics and access log line once it is complete. A transport writes the frames and says how a
 * piece of body is taken, dropped, and asked for.
 */
public abstract class StreamExchange<P> extends LoopExchange {
    protected final HttpSettings settings;
    protected final Connections connections;
    private final HttpRequestHead head;
    /** The metrics' protocol (MetricsLayout.HTTP_2, HTTP_3). */
    private final int protocol;
    private final ArrayDeque<P> pending = new ArrayDeque<>(2);
    private boolean demanded;
    /** The client has sent the whole request. */
    protected boolean requestEnded;
    private boolean endDelivered;
    private long bodyReceived;
    /** The response is complete, or the exchange was cut: nothing more is written. */
    protected boolean done;
    protected boolean headSent;
    private boolean bodyless;
    private int status;
    private long bytesSent;
    /** Bytes of the declared content-length not yet sent, or -1. */
    private long lengthLeft = -1;
    /** When the client last sent body (or the stream began). */
    private long lastData = System.nanoTime();

    protected StreamExchange(Channel channel, InetSocketAddress client, RequestCore core, HttpRequestHead head, int protocol) {
        super(channel, client, core.settings().scheme(), System.nanoTime());
        this.settings = core.settings();
        this.connections = core.connections();
        this.head = head;
        this.protocol = protocol;
    }

    @Override
    public final HttpRequestHead head() {
        return head;
    }

    /** The X-Request-ID the response echoes, or null. */
    protected final AsciiString requestId() {
        if (requestIdHeader < 0) return null;
        return new AsciiString(head.bytes(), head.valueStart(requestIdHeader), head.valueLength(requestIdHeader), true);
    }

    // ---- the transport's part

    /** Takes a piece of body for the application, acknowledging it to the client; the bytes to hand over. */
    protected abstract ByteBuf take(P piece);

    /** Drops a piece nobody will read (acknowledging it, where the client waits for that). */
    protected abstract void discard(P piece);

    /** The application waits for body and none is held: ask the client's side for more. */
    protected void needBody() {
    }

    /** Called once a demand was served. */
    protected void afterDemand() {
    }

    /**
     * Writes the response head; returns true when that ended the stream ({@code endStream}: the
     * response has nothing more, and the transport can say so in the head).
     */
    protected abstract boolean writeHead(ResponseHead response, long completeSize, boolean endStream);

    /** Writes a piece of body; null: nothing more than what was written (a head alone) goes out now. */
    protected abstract void writeData(ByteBuf data);

    /** Writes the last piece (may be null) and ends the stream, or resets it when {@code complete} is false. */
    protected abstract void writeEnd(ByteBuf last, boolean complete);

    /** After a complete response, tells a client still sending a body nobody will read to stop. */
    protected abstract void stopBody();

    /** Sends the refusal as the whole response (nothing was answered yet), and records it ({@link RequestCore#refused}). */
    protected abstract void refuse(Refusal refusal);

    /**
     * Resets the stream of a response that cannot be completed: {@code refused}, the server refused the
     * request once its response had begun; otherwise the application broke off.
     */
    protected abstract void reset(boolean refused);

    /** The exchange is over, completed or cut: the connection stops tracking it. */
    protected abstract void released();

    // ---- the request body

    @Override
    public final void demand() {
        onLoop(() -> {
            if (disconnected()) return;
            demanded = true;
            pump();
            afterDemand();
        });
    }

    /** A piece of body of {@code bytes} bytes arrived. */
    public final void onBody(P piece, int bytes) {
        lastData = System.nanoTime();
        bodyReceived += bytes;
        if (bodyReceived > settings.maxBody()) {
            discard(piece);
            refuseBody(413, "request body larger than --max-body");
            return;
        }
        if (done) {
            discard(piece);
            return;
        }
        pending.add(piece);
        pump();
    }

    /** The client has sent the whole request. */
    public final void onRequestEnd() {
        requestEnded = true;
        if (!done) pump();
    }

    /** Hands the application one piece of body per demand. */
    private void pump() {
        while (demanded && receiver() != null && !disconnected()) {
            P piece = pending.poll();
            if (piece != null) {
                ByteBuf data = take(piece);
                if (!data.isReadable()) {
                    data.release();
                    continue;
                }
                demanded = false;
                receiver().onBody(data);
            } else if (requestEnded) {
                if (!endDelivered) {
                    endDelivered = true;
                    demanded = false;
                    receiver().onBodyEnd();
                }
                return;
            } else {
                needBody();
                return;
            }
        }
    }

    /** The application waits for body that the client does not send. */
    public final boolean waitingForClient() {
        return demanded && !requestEnded && pending.isEmpty() && !done;
    }

    /** Cuts a request whose body stalled for {@code limit} nanoseconds while the application waits: 408. */
    public final void checkStall(long now, long limit) {
        if (waitingForClient() && now - lastData >= limit) refuseBody(408, "request timed out");
    }

    /** The body broke a limit: the server answers {@code status} if nothing was answered yet, and the stream ends either way. */
    private void refuseBody(int status, String reason) {
        boolean answered = headSent;
        cutByServer();
        if (answered) reset(true);
        else refuse(Refusal.of(status, reason));
    }

    // ---- the response

    @Override
    public final void abort() {
        onLoop(() -> {
            if (disconnected()) return;
            boolean answering = !done;
            cut();
            if (answering) reset(false);
        });
    }

    @Override
    protected final void write(ResponseHead responseHead, ByteBuf body, boolean last, int size) {
        if (disconnected() || done) {
            if (body != null) body.release();
            return;
        }
        if (responseHead != null) {
            status = responseHead.status();
            headSent = true;
            bodyless = head.method().equals("HEAD") || status < 200 || status == 204 || status == 304;
            lengthLeft = responseHead.contentLength();
            boolean endStream = last && (bodyless || (size == 0 && lengthLeft <= 0));
            if (writeHead(responseHead, last && !bodyless ? size : -1, endStream)) {
                if (body != null) body.release();
                finish();
                return;
            }
        }
        if (bodyless || body == null || size == 0) {
            if (body != null) body.release();
            if (last) end(null);
            else writeData(null);
            return;
        }
        if (lengthLeft >= 0) {
            if (size > lengthLeft) body.writerIndex(body.readerIndex() + (int) lengthLeft); // never more than declared
            lengthLeft -= body.readableBytes();
        }
        bytesSent += body.readableBytes();
        if (last) end(body);
        else writeData(body);
    }

    private void end(ByteBuf last) {
        writeEnd(last, lengthLeft <= 0 || bodyless);
        finish();
    }

    /** The response is complete: count and log it, and tell the client to stop sending a body nobody reads. */
    private void finish() {
        done = true;
        connections.requestEnded();
        connections.metrics().requestFinished(head.method(), protocol, status, startNanos(), bodyReceived, bytesSent);
        if (settings.accessLog() != null) settings.accessLog().log(this, status, bytesSent, startNanos());
        P piece;
        while ((piece = pending.poll()) != null) discard(piece);
        if (!requestEnded) stopBody();
        released();
    }

    /** The stream was reset or the connection is gone: nothing more is written. */
    @Override
    protected final void onCut() {
        if (!done) {
            done = true;
            connections.requestEnded();
        }
        P piece;
        while ((piece = pending.poll()) != null) ReferenceCountUtil.release(piece);
        released();
    }
}
