package dev.peregrine.asgi;

import dev.peregrine.http.BodyReceiver;
import dev.peregrine.http.FileBody;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.python.NativeBuffers;
import dev.peregrine.python.Py;
import dev.peregrine.python.PythonRaise;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import org.jboss.logging.Logger;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayDeque;

/**
 * One ASGI HTTP request: the body pieces the application has not received yet, the futures it waits
 * on, and the response it is sending. The {@link BodyReceiver} methods run on the I/O thread and only
 * post; everything else runs on the Python thread.
 */
final class AsgiRequest extends AsgiCall implements BodyReceiver {
    private static final Logger LOG = Logger.getLogger("peregrine");

    private final HttpExchange exchange;
    private final ArrayDeque<ByteBuf> body = new ArrayDeque<>(2);
    private boolean bodyEnded;
    private boolean finalBodyReceived;
    private boolean disconnected;
    /** The application was given http.disconnect (then Starlette's request.body() raises ClientDisconnect). */
    private boolean toldDisconnect;
    private boolean demanding;
    private ResponseHead pendingHead;
    private boolean started;
    private boolean complete;

    AsgiRequest(AsgiLoop loop, AsgiMessages messages, HttpExchange exchange) {
        super(loop, messages);
        this.exchange = exchange;
    }

    HttpExchange exchange() { return exchange; }

    @Override
    MemorySegment scope(ScopeBuilder scopes) {
        return scopes.build(exchange);
    }

    // ---- I/O thread ----

    @Override
    public void onBody(ByteBuf data) {
        loop.post(() -> {
            if (ended) {
                data.release();
                return;
            }
            demanding = false;
            body.add(data);
            wakeReceiver();
        });
    }

    @Override
    public void onBodyEnd() {
        loop.post(() -> {
            demanding = false;
            bodyEnded = true;
            wakeReceiver();
        });
    }

    @Override
    public void onDisconnect() {
        loop.post(() -> {
            disconnected = true;
            wakeReceiver();
            wakeSender();
        });
    }

    // ---- Python thread ----

    @Override
    void beforeWaiting() {
        if (!bodyEnded && !demanding) {
            demanding = true;
            exchange.demand();
        }
    }

    @Override
    MemorySegment nextMessage() {
        AsgiMessages m = messages;
        ByteBuf piece = body.poll();
        if (piece != null) {
            MemorySegment bytes;
            try {
                bytes = NativeBuffers.toBytes(piece);
            } finally {
                piece.release();
            }
            boolean last = bodyEnded && body.isEmpty();
            if (last) finalBodyReceived = true;
            return m.request(bytes, !last);
        }
        if (bodyEnded && !finalBodyReceived) {
            finalBodyReceived = true;
            return m.request(Py.newRef(m.emptyBytes), false);
        }
        // Once the response is complete the request is over: a task waiting on it would only hold the connection.
        if (disconnected || complete || exchange.disconnected()) {
            toldDisconnect = true;
            return m.disconnect();
        }
        return null;
    }

    /** {@code send(message)}: a future to await, already done unless the client must drain first (backpressure). */
    @Override
    MemorySegment send(MemorySegment message) {
        AsgiMessages m = messages;
        MemorySegment type = m.typeOf(message);
        if (AsgiMessages.is(type, AsgiMessages.RESPONSE_START)) {
            if (started) throw new PythonRaise(Py.ExcRuntimeError, "'http.response.start' sent twice");
            if (complete) throw new PythonRaise(Py.ExcRuntimeError, "'http.response.start' sent after the response completed");
            pendingHead = responseHead(message, m);
            started = true;
            return loop.completed();
        }
        if (AsgiMessages.is(type, AsgiMessages.RESPONSE_BODY)) {
            if (!started) throw new PythonRaise(Py.ExcRuntimeError, "'http.response.body' sent before 'http.response.start'");
            if (complete) throw new PythonRaise(Py.ExcRuntimeError, "'http.response.body' sent after the response completed");
            MemorySegment bodyObject = Py.dictGet(message, m.body);
            MemorySegment bytes = bodyObject == null ? null : Py.bytesLikeOf(bodyObject);
            if (bodyObject != null && bytes == null) {
                throw new PythonRaise(Py.ExcTypeError, "'body' of 'http.response.body' must be bytes, not " + typeName(bodyObject));
            }
            MemorySegment moreObject = Py.dictGet(message, m.moreBody);
            boolean more = moreObject != null && Py.isTrue(moreObject);
            if (disconnected || exchange.disconnected()) {
                complete = !more;
                return loop.completed(); // the client is gone: sending is a no-op, as the application cannot know yet
            }
            ByteBuf data = bytes == null || bytes.byteSize() == 0 ? null : loop.borrowed().of(bodyObject, bytes);
            ResponseHead head = pendingHead;
            pendingHead = null;
            exchange.send(head, data, !more, loop.batchFor(!more));
            if (!more) {
                complete = true;
                wakeReceiver();
                return loop.completed();
            }
            return exchange.writable() ? loop.completed() : waitUntilWritable(exchange::whenWritable);
        }
        if (AsgiMessages.is(type, AsgiMessages.RESPONSE_PATHSEND)) return sendPath(message, m);
        throw new PythonRaise(Py.ExcRuntimeError, "unexpected ASGI message type '"
                + new String(type.toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8) + "'");
    }

    /**
     * The ASGI http.response.pathsend extension: the body is the file at 'path', which the server opens
     * and sends itself ({@link HttpExchange#sendFile}: sendfile on plain HTTP/1.1), so that the Python
     * thread never reads it. A file that cannot be opened raises OSError in the application.
     */
    private MemorySegment sendPath(MemorySegment message, AsgiMessages m) {
        if (!started) throw new PythonRaise(Py.ExcRuntimeError, "'http.response.pathsend' sent before 'http.response.start'");
        if (complete) throw new PythonRaise(Py.ExcRuntimeError, "'http.response.pathsend' sent after the response completed");
        MemorySegment pathObject = Py.dictGet(message, m.path);
        if (pathObject == null || !Py.isInstance(pathObject, Py.UnicodeType)) {
            throw new PythonRaise(Py.ExcTypeError, "'path' of 'http.response.pathsend' must be a str");
        }
        String path = Py.toJavaString(pathObject);
        FileChannel file;
        long size;
        try {
            file = FileChannel.open(Path.of(path), StandardOpenOption.READ);
            size = file.size();
        } catch (IOException | RuntimeException e) {
            throw new PythonRaise(Py.ExcOSError, "http.response.pathsend cannot open '" + path + "': " + e.getMessage());
        }
        complete = true;
        wakeReceiver();
        ResponseHead head = pendingHead;
        pendingHead = null;
        FileBody body = FileBody.region(file, 0, head.contentLength() >= 0 ? head.contentLength() : size);
        if (head.contentLength() < 0) head.add("content-length", Long.toString(size));
        if (disconnected || exchange.disconnected() || exchange.head().method().equals("HEAD")) {
            body.close();
            if (!disconnected && !exchange.disconnected()) exchange.send(head, null, true, loop.batch());
        } else {
            exchange.sendFile(head, body);
        }
        return loop.completed();
    }

    static String typeName(MemorySegment object) {
        MemorySegment type = Py.typeOf(object);
        MemorySegment name = Py.getAttr(type, "__name__");
        String text = Py.toJavaString(name);
        Py.decRef(name);
        return text;
    }

    /** The status and headers of an 'http.response.start' (or 'websocket.http.response.start') message. */
    static ResponseHead responseHead(MemorySegment message, AsgiMessages m) {
        MemorySegment statusObject = Py.dictGet(message, m.status);
        if (statusObject == null || !Py.isInstance(statusObject, Py.LongType)) {
            throw new PythonRaise(Py.ExcTypeError, "'status' of 'http.response.start' must be an int");
        }
        ResponseHead head;
        try {
            head = new ResponseHead((int) Py.toLong(statusObject));
        } catch (IllegalArgumentException e) {
            throw new PythonRaise(Py.ExcValueError, e.getMessage());
        }
        addHeaders(head, Py.dictGet(message, m.headers));
        return head;
    }

    /** Adds the application's headers (an iterable of pairs, or null/None for none) to {@code head}. */
    static void addHeaders(ResponseHead head, MemorySegment headers) {
        if (headers == null || Py.isNone(headers)) return;
        MemorySegment list = Py.sequenceFast(headers, HEADERS_ERROR);
        try {
            for (long i = 0, n = Py.fastSize(list); i < n; i++) {
                MemorySegment pair = Py.fastItem(list, i);
                if (!Py.isListOrTuple(pair) || Py.fastSize(pair) != 2) {
                    throw new PythonRaise(Py.ExcTypeError, "each response header must be a pair of (name, value)");
                }
                head.add(headerBytes(Py.fastItem(pair, 0)), headerBytes(Py.fastItem(pair, 1)));
            }
        } catch (IllegalArgumentException e) {
            throw new PythonRaise(Py.ExcValueError, e.getMessage());
        } finally {
            Py.decRef(list);
        }
    }

    private static final MemorySegment HEADERS_ERROR = Arena.global().allocateFrom("'headers' must be an iterable of pairs");

    private static MemorySegment headerBytes(MemorySegment object) {
        MemorySegment bytes = Py.bufferOf(object);
        if (bytes == null) throw new PythonRaise(Py.ExcTypeError, "response header names and values must be bytes or str, not " + typeName(object));
        return bytes;
    }

    @Override
    void end(String error) {
        if (error != null && !error.isEmpty() && toldDisconnect && exchange.endedByServer()) {
            // The server refused the body (413 past --max-body) and told the application the request
            // was gone; what it raised about that is the server's doing, not an application error.
            LOG.debug("The ASGI application raised after the server ended its request\n" + error.stripTrailing());
        } else if (error != null && !error.isEmpty()) {
            LOG.error("Exception in ASGI application\n" + error.stripTrailing());
        } else if (error == null && !started && !exchange.disconnected()) {
            LOG.error("ASGI application returned without starting a response");
        } else if (error == null && !complete && !exchange.disconnected()) {
            LOG.error("ASGI application returned without completing its response");
        }
        if (!complete) {
            boolean headSent = started && pendingHead == null;
            if (!headSent && !disconnected && !exchange.disconnected()) {
                exchange.send(ResponseHead.internalError(), ResponseHead.internalErrorBody(PooledByteBufAllocator.DEFAULT), true, loop.batch());
            } else {
                exchange.abort();
            }
            complete = true;
        }
        for (ByteBuf piece : body) piece.release();
        body.clear();
    }
}
