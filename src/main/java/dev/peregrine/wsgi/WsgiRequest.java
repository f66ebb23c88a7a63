package dev.peregrine.wsgi;

import dev.peregrine.http.BodyReceiver;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.http.WakeupBatch;
import dev.peregrine.python.Py;
import dev.peregrine.python.PythonInterpreter;
import dev.peregrine.python.PythonRaise;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.PooledByteBufAllocator;
import org.jboss.logging.Logger;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.concurrent.CountDownLatch;
import java.util.function.Consumer;

/**
 * One WSGI request. Its body is read ahead on the I/O thread up to {@link #READ_AHEAD} before the
 * application is called, so that a slow upload holds a connection rather than a WSGI thread; the rest
 * of a larger body is read as {@code wsgi.input} asks for it, the WSGI thread waiting without the GIL.
 * A body without Content-Length (HTTP/1.1 chunked, HTTP/2 or HTTP/3 without content-length) is read
 * whole before the application is called, so that the environ can carry its length and frameworks that
 * read only CONTENT_LENGTH bytes (Django) see it all: in memory up to {@link #UNSIZED_READ_AHEAD}, past
 * that in a {@link SpooledBody}.
 */
final class WsgiRequest implements BodyReceiver {
    static final int READ_AHEAD = 64 * 1024;
    /** Bounded so that many slow chunked uploads cannot make the server hold --max-body each in memory. */
    static final int UNSIZED_READ_AHEAD = 1024 * 1024;
    private static final Logger LOG = Logger.getLogger("peregrine");

    private final HttpExchange exchange;
    private final Consumer<WsgiRequest> ready;
    private final ArrayDeque<ByteBuf> body = new ArrayDeque<>(2);
    private final boolean unsized;
    private int buffered;
    /** Where an unsized body past UNSIZED_READ_AHEAD goes; all of it is there once it exists. */
    private SpooledBody spool;
    private boolean bodyEnded;
    private boolean disconnected;
    private boolean dispatched;
    private boolean demanding;

    /** When the request was queued for a WSGI thread (for the metrics; 0 when they are off). */
    long readyNanos;

    // The response, touched only by the WSGI thread that runs the request.
    ResponseHead head;
    boolean headSent;
    boolean complete;
    /** Body bytes handed to the exchange so far. */
    private long sent;
    /** The running WSGI thread's batch: the response's end goes to the I/O thread without waking it. */
    WakeupBatch batch;

    WsgiRequest(HttpExchange exchange, Consumer<WsgiRequest> ready) {
        this.exchange = exchange;
        this.ready = ready;
        this.unsized = exchange != null && exchange.head().contentLength() < 0; // null: a queue marker
    }

    HttpExchange exchange() { return exchange; }

    // ---- I/O thread ----

    void readAhead() {
        synchronized (this) {
            demanding = true;
        }
        exchange.demand();
    }

    @Override
    public void onBody(ByteBuf data) {
        boolean dispatchNow = false, demandMore = false, spoolFailed = false;
        synchronized (this) {
            demanding = false;
            body.add(data);
            buffered += data.readableBytes();
            if (!dispatched) {
                if (unsized && (spool != null || buffered >= UNSIZED_READ_AHEAD)) {
                    spoolFailed = !spoolBuffered();
                    demandMore = demanding = !spoolFailed;
                } else if (!unsized && buffered >= READ_AHEAD) {
                    dispatchNow = dispatched = true;
                } else {
                    demandMore = demanding = true;
                }
            }
            notifyAll();
        }
        if (spoolFailed) {
            exchange.send(ResponseHead.internalError(), ResponseHead.internalErrorBody(PooledByteBufAllocator.DEFAULT), true);
            return;
        }
        if (demandMore) exchange.demand();
        if (dispatchNow) ready.accept(this);
    }

    /** Moves what is buffered to the spool, opening it the first time; false when the disk refused. */
    private boolean spoolBuffered() {
        try {
            if (spool == null) spool = SpooledBody.create();
            for (ByteBuf piece; (piece = body.poll()) != null; ) spool.append(piece);
            buffered = 0;
            return true;
        } catch (IOException e) {
            // Lost bytes cannot be handed on: the client is told, and the application never sees a part of it.
            LOG.errorf("Could not keep a request body without Content-Length in a temporary file (%s): answering 500", e.toString());
            dispatched = true;
            releaseBody();
            return false;
        }
    }

    @Override
    public void onBodyEnd() {
        boolean dispatchNow;
        synchronized (this) {
            bodyEnded = true;
            dispatchNow = !dispatched;
            dispatched = true;
            notifyAll();
        }
        if (dispatchNow) ready.accept(this);
    }

    @Override
    public void onDisconnect() {
        synchronized (this) {
            disconnected = true;
            if (!dispatched && spool != null) releaseBody(); // no WSGI thread will, as the request is never run
            dispatched = true; // a request whose client left before it was dispatched is not run
            notifyAll();
        }
    }

    // ---- WSGI thread ----

    /**
     * The whole body when it was read ahead completely into memory, else null (then wsgi.input streams
     * it, from the client or from the spool).
     */
    synchronized ByteBuf[] completeBody() {
        if (!bodyEnded || spool != null) return null;
        ByteBuf[] pieces = body.toArray(new ByteBuf[0]);
        body.clear();
        buffered = 0;
        return pieces;
    }

    /**
     * Up to {@code max} bytes of body (all of it when max is negative), waiting for the client with
     * the GIL released; an empty result is the end of the body.
     */
    /** The length of a body that was spooled whole, else -1. */
    synchronized long spooledLength() {
        return spool == null ? -1 : spool.length();
    }

    ByteBuf read(int max, ByteBufAllocator alloc) {
        SpooledBody spooled;
        synchronized (this) {
            spooled = spool;
        }
        if (spooled != null) {
            try {
                return spooled.read(max, alloc);
            } catch (IOException e) {
                throw new PythonRaise(Py.ExcOSError, "reading the request body back from its temporary file: " + e);
            }
        }
        ByteBuf out = alloc.heapBuffer();
        MemorySegment released = null;
        try {
            synchronized (this) {
                while (max < 0 || out.readableBytes() < max) {
                    ByteBuf piece = body.peek();
                    if (piece != null) {
                        int want = max < 0 ? piece.readableBytes() : Math.min(piece.readableBytes(), max - out.readableBytes());
                        out.writeBytes(piece, want);
                        buffered -= want;
                        if (!piece.isReadable()) body.poll().release();
                        if (max >= 0) break;
                        continue;
                    }
                    if (bodyEnded || disconnected) break;
                    if (out.isReadable() && max >= 0) break;
                    if (!demanding) {
                        demanding = true;
                        exchange.demand();
                    }
                    if (released == null) {
                        batch.flush();
                        released = PythonInterpreter.saveThread();
                    }
                    try {
                        wait();
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        break;
                    }
                }
            }
        } finally {
            if (released != null) PythonInterpreter.restoreThread(released);
        }
        return out;
    }

    /**
     * Whether {@code size} more bytes reach the Content-Length the application declared: then that block
     * is the body's last, and goes to the I/O thread together with the end of the response (one hand-over
     * and at most one wake-up instead of two, which is what a framework's one-block iterator costs).
     */
    boolean completesDeclaredLength(long size) {
        long declared = head == null ? -1 : head.contentLength();
        return declared >= 0 && sent + size >= declared;
    }

    /** Sends the head (first time) and a block; waits without the GIL while the client is not reading. */
    void send(ByteBuf data, boolean last) {
        ResponseHead toSend = headSent ? null : head;
        headSent = true;
        if (data != null) sent += data.readableBytes();
        if (last) complete = true;
        // Only the end waits in the batch: a block of a streamed response goes out as it is made.
        if (last) {
            exchange.send(toSend, data, true, batch);
            return;
        }
        exchange.send(toSend, data, false, batch);
        batch.flush();
        if (!exchange.writable()) {
            CountDownLatch writable = new CountDownLatch(1);
            exchange.whenWritable(writable::countDown);
            MemorySegment released = PythonInterpreter.saveThread();
            try {
                writable.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                PythonInterpreter.restoreThread(released);
            }
        }
    }

    boolean clientGone() {
        return exchange.disconnected();
    }

    synchronized void releaseBody() {
        for (ByteBuf piece : body) piece.release();
        body.clear();
        if (spool != null) {
            spool.close();
            spool = null;
        }
    }
}
