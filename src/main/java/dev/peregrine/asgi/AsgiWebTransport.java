package dev.peregrine.asgi;

import dev.peregrine.http.ResponseHead;
import dev.peregrine.python.NativeBuffers;
import dev.peregrine.python.Py;
import dev.peregrine.python.PythonRaise;
import dev.peregrine.webtransport.Capsules;
import dev.peregrine.webtransport.StreamErrors;
import dev.peregrine.webtransport.WebTransportReceiver;
import dev.peregrine.webtransport.WebTransportSession;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.Unpooled;
import org.jboss.logging.Logger;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.function.Supplier;

/**
 * One ASGI WebTransport session (Peregrine's extension, docs/WEBTRANSPORT.md): what the client sent that
 * the application has not received yet, and where the application is in the protocol. The
 * {@link WebTransportReceiver} methods run on the I/O thread and only post; everything else runs on the
 * Python thread. Each message crossing to Python is one stream read, one datagram or the end: the
 * framing stays on the I/O thread.
 */
final class AsgiWebTransport extends AsgiCall implements WebTransportReceiver {
    private static final Logger LOG = Logger.getLogger("peregrine");
    /** The largest close code draft-02's capsule carries: 32 bits. */
    private static final long MAX_CLOSE_CODE = 0xffffffffL;

    private enum State { CONNECTING, ACCEPTED, CLOSED }

    private sealed interface Incoming permits StreamData, StreamReset, Datagram {}
    private record StreamData(long stream, ByteBuf data, boolean end) implements Incoming {}
    private record StreamReset(long stream, long code) implements Incoming {}
    private record Datagram(ByteBuf data) implements Incoming {}

    private final WebTransportSession session;
    private final ArrayDeque<Incoming> incoming = new ArrayDeque<>(4);
    /**
     * The futures the I/O thread answers that the application awaits, our references to them: stream
     * openings, and sends waiting for their stream to take more. Several may wait at once, one per task
     * of the application sending on a stream of its own.
     */
    private final ArrayList<MemorySegment> awaited = new ArrayList<>(1);
    private State state = State.CONNECTING;
    private boolean connectReceived;
    /** The close code once the session is over, else -1. */
    private long closeCode = -1;
    private String closeReason = "";

    AsgiWebTransport(AsgiLoop loop, AsgiMessages messages, WebTransportSession session) {
        super(loop, messages);
        this.session = session;
    }

    @Override
    MemorySegment scope(ScopeBuilder scopes) {
        return scopes.buildWebTransport(session);
    }

    // ---- I/O thread ----

    @Override
    public void onStreamData(long stream, ByteBuf data, boolean end) {
        arrive(new StreamData(stream, data, end));
    }

    @Override
    public void onStreamReset(long stream, long code) {
        arrive(new StreamReset(stream, code));
    }

    @Override
    public void onDatagram(ByteBuf data) {
        arrive(new Datagram(data));
    }

    private void arrive(Incoming event) {
        loop.post(() -> {
            if (ended) {
                release(event);
                return;
            }
            incoming.add(event);
            wakeReceiver();
        });
    }

    @Override
    public void onClose(long code, String reason) {
        loop.post(() -> {
            closeCode = code;
            closeReason = reason == null ? "" : reason;
            wakeReceiver();
        });
    }

    // ---- Python thread ----

    @Override
    MemorySegment nextMessage() {
        AsgiMessages m = messages;
        if (!connectReceived) {
            connectReceived = true;
            return m.ofType(m.wtConnect);
        }
        Incoming next = incoming.poll();
        if (next != null) {
            int size = next instanceof StreamData d ? d.data().readableBytes() : 0;
            try {
                return switch (next) {
                    case StreamData d -> m.webTransportStream(d.stream(), NativeBuffers.toBytes(d.data()), d.end());
                    case StreamReset r -> m.webTransportReset(r.stream(), r.code());
                    case Datagram g -> m.webTransportDatagram(NativeBuffers.toBytes(g.data()));
                };
            } finally {
                release(next);
                if (next instanceof StreamData) session.consumed(size);
                if (next instanceof Datagram) session.datagramConsumed();
            }
        }
        if (closeCode >= 0) return m.webTransportDisconnect(closeCode, closeReason);
        return null;
    }

    private static void release(Incoming event) {
        switch (event) {
            case StreamData d -> d.data().release();
            case Datagram g -> g.data().release();
            case StreamReset r -> { }
        }
    }

    @Override
    MemorySegment send(MemorySegment message) {
        AsgiMessages m = messages;
        MemorySegment type = m.typeOf(message);
        if (AsgiMessages.is(type, AsgiMessages.WT_STREAM_SEND)) return sendOnStream(message, m);
        if (AsgiMessages.is(type, AsgiMessages.WT_DATAGRAM_SEND)) return sendDatagram(message, m);
        if (AsgiMessages.is(type, AsgiMessages.WT_STREAM_OPEN)) return openStream(message, m);
        if (AsgiMessages.is(type, AsgiMessages.WT_STREAM_RESET)) return abortStream(message, m, true);
        if (AsgiMessages.is(type, AsgiMessages.WT_STREAM_STOP)) return abortStream(message, m, false);
        if (AsgiMessages.is(type, AsgiMessages.WT_ACCEPT)) return accept(message, m);
        if (AsgiMessages.is(type, AsgiMessages.WT_CLOSE)) return close(message, m);
        throw new PythonRaise(Py.ExcRuntimeError, "unexpected ASGI message type '"
                + new String(type.toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8) + "' on a WebTransport session");
    }

    private void expect(State expected, String type) {
        if (state == expected) return;
        String where = switch (state) {
            case CONNECTING -> "before the session was accepted";
            case ACCEPTED -> "after the session was accepted";
            case CLOSED -> "after the session was closed";
        };
        throw new PythonRaise(Py.ExcRuntimeError, "unexpected ASGI message '" + type + "' " + where);
    }

    private MemorySegment accept(MemorySegment message, AsgiMessages m) {
        expect(State.CONNECTING, "webtransport.accept");
        if (closeCode >= 0) throw closed();
        // The status is a placeholder: only the headers are taken, checked as any response's are.
        ResponseHead extra = new ResponseHead(200);
        AsgiRequest.addHeaders(extra, Py.dictGet(message, m.headers));
        state = State.ACCEPTED;
        session.accept(extra, loop.batch());
        return loop.completed();
    }

    private MemorySegment sendOnStream(MemorySegment message, AsgiMessages m) {
        expect(State.ACCEPTED, "webtransport.stream.send");
        if (closeCode >= 0) throw closed();
        long stream = integer(message, m.stream, "webtransport.stream.send", "stream", -1);
        if (!session.sendable(stream)) {
            throw new PythonRaise(Py.ExcValueError, "stream " + stream + " is not open for the server to send on");
        }
        ByteBuf data = bytes(message, m.data, "webtransport.stream.send");
        MemorySegment endObject = Py.dictGet(message, m.endStream);
        session.send(stream, data, endObject != null && Py.isTrue(endObject), loop.batch());
        if (session.writable(stream)) return loop.completed();
        MemorySegment future = awaitedFuture();
        session.whenWritable(stream, () -> loop.post(() -> answer(future, () -> Py.newRef(Py.None))));
        return Py.newRef(future);
    }

    /** {@code webtransport.stream.reset} (the server's side, RESET_STREAM) or {@code .stream.stop} (the client's, STOP_SENDING). */
    private MemorySegment abortStream(MemorySegment message, AsgiMessages m, boolean reset) {
        String type = reset ? "webtransport.stream.reset" : "webtransport.stream.stop";
        expect(State.ACCEPTED, type);
        if (closeCode >= 0) throw closed();
        long stream = integer(message, m.stream, type, "stream", -1);
        long code = integer(message, m.code, type, "code", 0);
        if (code > StreamErrors.MAX_CODE) throw new PythonRaise(Py.ExcValueError, "a WebTransport stream error code is at most 2**32-1");
        if (reset ? !session.sendable(stream) : !session.receivable(stream)) {
            throw new PythonRaise(Py.ExcValueError, "stream " + stream + (reset ? " is not open for the server to send on" : " is not one the server reads"));
        }
        if (reset) session.resetStream(stream, code, loop.batch());
        else session.stopStream(stream, code, loop.batch());
        return loop.completed();
    }

    /**
     * {@code webtransport.stream.open}: the future the application awaits holds the new stream's ID, or
     * None when it could not be opened. That is the one place where awaiting send() gives a value: the
     * application needs the ID to send on the stream, and only the I/O thread learns it.
     */
    private MemorySegment openStream(MemorySegment message, AsgiMessages m) {
        expect(State.ACCEPTED, "webtransport.stream.open");
        if (closeCode >= 0) throw closed();
        MemorySegment bidirectionalObject = Py.dictGet(message, m.bidirectional);
        boolean bidirectional = bidirectionalObject == null || Py.isNone(bidirectionalObject) || Py.isTrue(bidirectionalObject);
        MemorySegment future = awaitedFuture();
        session.openStream(bidirectional, id -> loop.post(() -> answer(future,
                () -> id < 0 ? Py.newRef(Py.None) : Py.integer(id))), loop.batch());
        return Py.newRef(future);
    }

    private MemorySegment awaitedFuture() {
        MemorySegment future = loop.newFuture();
        awaited.add(future);
        return future;
    }

    /** Resolves one of {@link #awaited} with a new reference to the value; nothing when the call ended meanwhile and released it. */
    private void answer(MemorySegment future, Supplier<MemorySegment> value) {
        if (awaited.remove(future)) loop.resolve(future, value.get());
    }

    private MemorySegment sendDatagram(MemorySegment message, AsgiMessages m) {
        expect(State.ACCEPTED, "webtransport.datagram.send");
        if (closeCode >= 0) throw closed();
        session.sendDatagram(bytes(message, m.data, "webtransport.datagram.send"), loop.batch());
        return loop.completed();
    }

    private MemorySegment close(MemorySegment message, AsgiMessages m) {
        switch (state) {
            case CONNECTING -> {
                // Closing before accepting refuses the session with an HTTP status: 403 unless the application names one.
                int status = (int) integer(message, m.status, "webtransport.close", "status", 403);
                if (status < 300 || status > 599) throw new PythonRaise(Py.ExcValueError, "a refusal's 'status' must be 300 to 599, not " + status);
                state = State.CLOSED;
                session.refuse(status, loop.batch());
            }
            case ACCEPTED -> {
                long code = integer(message, m.code, "webtransport.close", "code", 0);
                if (code > MAX_CLOSE_CODE) throw new PythonRaise(Py.ExcValueError, "a WebTransport close code is at most 2**32-1");
                MemorySegment reasonObject = Py.dictGet(message, m.reason);
                String reason = "";
                if (reasonObject != null && !Py.isNone(reasonObject)) {
                    reason = Py.toJavaString(reasonObject);
                    if (reason == null) throw new PythonRaise(Py.ExcTypeError, "'reason' of 'webtransport.close' must be a str");
                    if (reason.getBytes(StandardCharsets.UTF_8).length > Capsules.MAX_REASON_BYTES) {
                        throw new PythonRaise(Py.ExcValueError, "a WebTransport close reason is at most "
                                + Capsules.MAX_REASON_BYTES + " bytes of UTF-8");
                    }
                }
                state = State.CLOSED;
                if (closeCode < 0) session.close(code, reason, loop.batch());
            }
            case CLOSED -> expect(State.ACCEPTED, "webtransport.close");
        }
        return loop.completed();
    }

    /** A non-negative int entry of a message, or {@code absent} when it is missing or None ({@code absent} -1: required). */
    private static long integer(MemorySegment message, MemorySegment key, String type, String name, long absent) {
        MemorySegment object = Py.dictGet(message, key);
        if (object == null || Py.isNone(object)) {
            if (absent >= 0) return absent;
            throw new PythonRaise(Py.ExcValueError, "'" + type + "' needs '" + name + "'");
        }
        if (!Py.isInstance(object, Py.LongType)) throw new PythonRaise(Py.ExcTypeError, "'" + name + "' of '" + type + "' must be an int");
        long value = Py.toLong(object);
        if (value < 0) throw new PythonRaise(Py.ExcValueError, "'" + name + "' of '" + type + "' must not be negative");
        return value;
    }

    private static ByteBuf bytes(MemorySegment message, MemorySegment key, String type) {
        MemorySegment object = Py.dictGet(message, key);
        MemorySegment bytes = object == null || Py.isNone(object) ? null : Py.bytesLikeOf(object);
        if (object != null && !Py.isNone(object) && bytes == null) {
            throw new PythonRaise(Py.ExcTypeError, "'data' of '" + type + "' must be bytes, not " + AsgiRequest.typeName(object));
        }
        if (bytes == null || bytes.byteSize() == 0) return Unpooled.EMPTY_BUFFER;
        return NativeBuffers.fromNative(PooledByteBufAllocator.DEFAULT, bytes);
    }

    private static PythonRaise closed() {
        return new PythonRaise(Py.ExcOSError, "the WebTransport session is closed");
    }

    @Override
    void end(String error) {
        if (error != null && !error.isEmpty()) LOG.error("Exception in ASGI application\n" + error.stripTrailing());
        if (state == State.CONNECTING && error == null && closeCode < 0) {
            LOG.error("ASGI application returned without accepting or refusing the WebTransport session");
        }
        if (state != State.CLOSED) session.finish(error != null, loop.batch());
        state = State.CLOSED;
        for (Incoming event : incoming) release(event);
        incoming.clear();
        for (MemorySegment future : awaited) Py.decRef(future);
        awaited.clear();
    }
}
