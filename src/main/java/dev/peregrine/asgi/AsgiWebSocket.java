package dev.peregrine.asgi;

import dev.peregrine.http.ResponseHead;
import dev.peregrine.python.NativeBuffers;
import dev.peregrine.python.Py;
import dev.peregrine.python.PythonRaise;
import dev.peregrine.websocket.WebSocketConnection;
import dev.peregrine.websocket.WebSocketReceiver;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.Unpooled;
import org.jboss.logging.Logger;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;

/**
 * One ASGI WebSocket connection: the messages the application has not received yet, the futures it
 * waits on, and where it is in the protocol. The {@link WebSocketReceiver} methods run on the I/O
 * thread and only post; everything else runs on the Python thread.
 */
final class AsgiWebSocket extends AsgiCall implements WebSocketReceiver {
    private static final Logger LOG = Logger.getLogger("peregrine");

    /** Where the application is: before its decision, refusing with an HTTP response, accepted, or done with the connection. */
    private enum State { HANDSHAKE, DENYING, ACCEPTED, CLOSED }

    private record Incoming(ByteBuf data, boolean text) {}

    private final WebSocketConnection connection;
    private final ArrayDeque<Incoming> incoming = new ArrayDeque<>(4);
    private State state = State.HANDSHAKE;
    private boolean connectReceived;
    /** The close code once the connection is over, else -1. */
    private int closeCode = -1;
    private String closeReason = "";
    private ResponseHead denial;
    private CompositeByteBuf denialBody;

    AsgiWebSocket(AsgiLoop loop, AsgiMessages messages, WebSocketConnection connection) {
        super(loop, messages);
        this.connection = connection;
    }

    @Override
    MemorySegment scope(ScopeBuilder scopes) {
        return scopes.buildWebSocket(connection);
    }

    // ---- I/O thread ----

    @Override
    public void onMessage(ByteBuf data, boolean text) {
        loop.post(() -> {
            if (ended) {
                data.release();
                return;
            }
            incoming.add(new Incoming(data, text));
            wakeReceiver();
        });
    }

    @Override
    public void onClose(int code, String reason) {
        loop.post(() -> {
            closeCode = code;
            closeReason = reason == null ? "" : reason;
            wakeReceiver();
            wakeSender();
        });
    }

    // ---- Python thread ----

    @Override
    MemorySegment nextMessage() {
        AsgiMessages m = messages;
        if (!connectReceived) {
            connectReceived = true;
            return m.webSocketConnect();
        }
        Incoming next = incoming.poll();
        if (next != null) {
            int size = next.data.readableBytes();
            try {
                MemorySegment data = next.text ? NativeBuffers.toStr(next.data) : NativeBuffers.toBytes(next.data);
                return m.webSocketReceive(data, next.text);
            } finally {
                next.data.release();
                connection.consumed(size);
            }
        }
        if (closeCode >= 0) return m.webSocketDisconnect(closeCode, closeReason);
        return null;
    }

    @Override
    MemorySegment send(MemorySegment message) {
        AsgiMessages m = messages;
        MemorySegment type = m.typeOf(message);
        if (AsgiMessages.is(type, AsgiMessages.WS_SEND)) return sendMessage(message, m);
        if (AsgiMessages.is(type, AsgiMessages.WS_ACCEPT)) return accept(message, m);
        if (AsgiMessages.is(type, AsgiMessages.WS_CLOSE)) return close(message, m);
        if (AsgiMessages.is(type, AsgiMessages.WS_RESPONSE_START)) {
            expect(State.HANDSHAKE, "websocket.http.response.start");
            denial = AsgiRequest.responseHead(message, m);
            denialBody = PooledByteBufAllocator.DEFAULT.compositeDirectBuffer(Integer.MAX_VALUE);
            state = State.DENYING;
            return loop.completed();
        }
        if (AsgiMessages.is(type, AsgiMessages.WS_RESPONSE_BODY)) {
            expect(State.DENYING, "websocket.http.response.body");
            MemorySegment bodyObject = Py.dictGet(message, m.body);
            MemorySegment bytes = bodyObject == null ? null : Py.bytesLikeOf(bodyObject);
            if (bodyObject != null && bytes == null) {
                throw new PythonRaise(Py.ExcTypeError, "'body' of 'websocket.http.response.body' must be bytes, not "
                        + AsgiRequest.typeName(bodyObject));
            }
            if (bytes != null && bytes.byteSize() > 0) {
                denialBody.addComponent(true, NativeBuffers.fromNative(PooledByteBufAllocator.DEFAULT, bytes));
            }
            MemorySegment moreObject = Py.dictGet(message, m.moreBody);
            if (moreObject == null || !Py.isTrue(moreObject)) {
                state = State.CLOSED;
                connection.deny(denial, denialBody, loop.batch());
                denialBody = null;
            }
            return loop.completed();
        }
        throw new PythonRaise(Py.ExcRuntimeError, "unexpected ASGI message type '"
                + new String(type.toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8) + "' on a WebSocket");
    }

    private void expect(State expected, String type) {
        if (state == expected) return;
        String where = switch (state) {
            case HANDSHAKE -> "before the handshake was accepted";
            case DENYING -> "while sending a denial response";
            case ACCEPTED -> "after the handshake was accepted";
            case CLOSED -> "after the WebSocket was closed";
        };
        throw new PythonRaise(Py.ExcRuntimeError, "unexpected ASGI message '" + type + "' " + where);
    }

    private MemorySegment accept(MemorySegment message, AsgiMessages m) {
        expect(State.HANDSHAKE, "websocket.accept");
        if (closeCode >= 0) throw closed();
        MemorySegment subprotocolObject = Py.dictGet(message, m.subprotocol);
        String subprotocol = null;
        if (subprotocolObject != null && !Py.isNone(subprotocolObject)) {
            subprotocol = Py.toJavaString(subprotocolObject);
            if (subprotocol == null) throw new PythonRaise(Py.ExcTypeError, "'subprotocol' of 'websocket.accept' must be a str");
        }
        if (subprotocol != null && subprotocol.chars().anyMatch(c -> c == '\r' || c == '\n' || c == 0)) {
            throw new PythonRaise(Py.ExcValueError, "'subprotocol' of 'websocket.accept' contains CR, LF or NUL");
        }
        // The status is a placeholder: only the headers are taken, checked as any response's are.
        ResponseHead extra = new ResponseHead(101);
        AsgiRequest.addHeaders(extra, Py.dictGet(message, m.headers));
        state = State.ACCEPTED;
        connection.accept(subprotocol, extra, loop.batch());
        return loop.completed();
    }

    private MemorySegment sendMessage(MemorySegment message, AsgiMessages m) {
        expect(State.ACCEPTED, "websocket.send");
        if (closeCode >= 0) throw closed();
        MemorySegment bytesObject = Py.dictGet(message, m.bytes);
        MemorySegment textObject = Py.dictGet(message, m.text);
        ByteBuf data;
        boolean text;
        if (bytesObject != null && !Py.isNone(bytesObject)) {
            MemorySegment bytes = Py.bytesLikeOf(bytesObject);
            if (bytes == null) throw new PythonRaise(Py.ExcTypeError, "'bytes' of 'websocket.send' must be bytes, not " + AsgiRequest.typeName(bytesObject));
            data = copy(bytes);
            text = false;
        } else if (textObject != null && !Py.isNone(textObject)) {
            if (!Py.isInstance(textObject, Py.UnicodeType)) {
                throw new PythonRaise(Py.ExcTypeError, "'text' of 'websocket.send' must be str, not " + AsgiRequest.typeName(textObject));
            }
            data = copy(Py.bufferOf(textObject));
            text = true;
        } else {
            throw new PythonRaise(Py.ExcValueError, "'websocket.send' needs 'bytes' or 'text'");
        }
        // A message is whole: the client may be waiting for it, as for the last part of a response.
        connection.send(data, text, loop.batchFor(true));
        return connection.writable() ? loop.completed() : waitUntilWritable(connection::whenWritable);
    }

    private static ByteBuf copy(MemorySegment data) {
        return data.byteSize() == 0 ? Unpooled.EMPTY_BUFFER : NativeBuffers.fromNative(PooledByteBufAllocator.DEFAULT, data);
    }

    private MemorySegment close(MemorySegment message, AsgiMessages m) {
        MemorySegment codeObject = Py.dictGet(message, m.code);
        int code = 1000;
        if (codeObject != null && !Py.isNone(codeObject)) {
            if (!Py.isInstance(codeObject, Py.LongType)) throw new PythonRaise(Py.ExcTypeError, "'code' of 'websocket.close' must be an int");
            long value = Py.toLong(codeObject);
            if (!sendableCloseCode(value)) throw new PythonRaise(Py.ExcValueError, "invalid WebSocket close code " + value);
            code = (int) value;
        }
        MemorySegment reasonObject = Py.dictGet(message, m.reason);
        String reason = "";
        if (reasonObject != null && !Py.isNone(reasonObject)) {
            reason = Py.toJavaString(reasonObject);
            if (reason == null) throw new PythonRaise(Py.ExcTypeError, "'reason' of 'websocket.close' must be a str");
            if (reason.getBytes(StandardCharsets.UTF_8).length > 123) {
                throw new PythonRaise(Py.ExcValueError, "a WebSocket close reason is at most 123 bytes of UTF-8");
            }
        }
        switch (state) {
            case HANDSHAKE -> {
                // Closing before accepting refuses the handshake, as the ASGI specification says: 403.
                state = State.CLOSED;
                ResponseHead forbidden = new ResponseHead(403);
                forbidden.add("content-type", "text/plain; charset=utf-8");
                connection.deny(forbidden, Unpooled.copiedBuffer("Forbidden\n", StandardCharsets.US_ASCII), loop.batch());
            }
            case ACCEPTED -> {
                state = State.CLOSED;
                if (closeCode < 0) connection.close(code, reason, loop.batch());
            }
            case DENYING, CLOSED -> expect(State.ACCEPTED, "websocket.close");
        }
        return loop.completed();
    }

    /** Codes an endpoint may put in a close frame (RFC 6455 7.4): the reserved ones are refused. */
    private static boolean sendableCloseCode(long code) {
        if (code >= 3000 && code <= 4999) return true;
        return code >= 1000 && code <= 1014 && code != 1004 && code != 1005 && code != 1006;
    }

    private static PythonRaise closed() {
        return new PythonRaise(Py.ExcOSError, "the WebSocket connection is closed");
    }

    @Override
    void end(String error) {
        if (error != null && !error.isEmpty()) LOG.error("Exception in ASGI application\n" + error.stripTrailing());
        switch (state) {
            case HANDSHAKE -> {
                if (error == null && closeCode < 0) LOG.error("ASGI application returned without accepting or refusing the WebSocket");
                connection.deny(ResponseHead.internalError(), ResponseHead.internalErrorBody(PooledByteBufAllocator.DEFAULT), loop.batch());
            }
            case DENYING -> connection.finish(1011, loop.batch()); // a denial response left unfinished: drop the connection
            case ACCEPTED -> connection.finish(error == null ? 1000 : 1011, loop.batch());
            case CLOSED -> { }
        }
        state = State.CLOSED;
        if (denialBody != null) {
            denialBody.release();
            denialBody = null;
        }
        for (Incoming piece : incoming) piece.data.release();
        incoming.clear();
    }
}
