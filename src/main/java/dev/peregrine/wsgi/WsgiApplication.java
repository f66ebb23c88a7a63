package dev.peregrine.wsgi;

import dev.peregrine.app.ServedApplication;
import dev.peregrine.http.FileBody;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.http.StatusReasons;
import dev.peregrine.http.WakeupBatch;
import dev.peregrine.metrics.RequestMetrics;
import dev.peregrine.python.BorrowedBytes;
import dev.peregrine.python.NativeBuffers;
import dev.peregrine.python.NativeFunction;
import dev.peregrine.python.Py;
import dev.peregrine.python.PythonException;
import dev.peregrine.python.PythonInterpreter;
import dev.peregrine.python.PythonRaise;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.PooledByteBufAllocator;
import org.jboss.logging.Logger;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

/**
 * Serves a PEP 3333 application on {@code --wsgi-threads} platform threads. Each takes a request whose
 * head (and small body) has arrived, calls the application with the GIL held, and writes each block
 * it yields before asking for the next. {@code start_response}, {@code write} and the streaming
 * {@code wsgi.input} are built-in functions implemented here; they find their request through the
 * thread that calls them.
 */
public final class WsgiApplication implements ServedApplication {
    private static final Logger LOG = Logger.getLogger("peregrine");
    private static final WsgiRequest STOP = new WsgiRequest(null, r -> {});
    /** Queued when many released response bodies wait for their references to be dropped (see {@link BorrowedBytes}). */
    private static final WsgiRequest DRAIN = new WsgiRequest(null, r -> {});
    private static final ByteBufAllocator ALLOC = PooledByteBufAllocator.DEFAULT;

    private final MemorySegment app;
    private final String rootPath;
    private final int threads;
    private final BlockingQueue<WsgiRequest> queue = new LinkedBlockingQueue<>();
    private final ThreadLocal<WsgiRequest> current = new ThreadLocal<>();
    private final List<Thread> workers = new ArrayList<>();
    private Runnable threadStartHook = () -> { };
    private final RequestMetrics metrics;
    /** One instance for every request rather than a method reference made per request. */
    private final Consumer<WsgiRequest> enqueue = this::enqueue;
    private final BorrowedBytes borrowed = new BorrowedBytes(() -> queue.add(DRAIN));
    private final BatchWatchdog watchdog = new BatchWatchdog();
    /** Requests queued or running: from {@code threads} on, a new one would wait for a thread. */
    private final AtomicInteger pending = new AtomicInteger();
    private volatile Runnable saturationChange = () -> {};

    /**
     * One per WSGI thread: a builder keeps a table of interned header names that it grows as it goes,
     * which on a free-threaded CPython no lock would otherwise guard.
     */
    private EnvironBuilder[] environs;
    private MemorySegment startResponse;
    private MemorySegment write;
    private MemorySegment bytesIO;
    private MemorySegment streamingInput;
    private MemorySegment closeName;
    /** The wsgi.file_wrapper class: a result of its type may be sent by the server from the file itself. */
    private MemorySegment fileWrapper;

    public WsgiApplication(PythonInterpreter interpreter, MemorySegment app, String rootPath, int threads, RequestMetrics metrics) {
        this.app = app;
        this.metrics = metrics;
        this.rootPath = rootPath;
        this.threads = threads;
        interpreter.define("wsgi_start_response", this::startResponse);
        interpreter.define("wsgi_write", args -> {
            MemorySegment data = Py.bytesLikeOf(args.get(0));
            if (data == null) throw new PythonRaise(Py.ExcTypeError, "write() takes bytes");
            WsgiRequest request = request();
            if (request.head == null) throw new PythonRaise(Py.ExcRuntimeError, "write() called before start_response()");
            if (request.complete) return null;
            if (data.byteSize() > 0 || !request.headSent) {
                request.send(borrowed.of(args.get(0), data), request.completesDeclaredLength(data.byteSize()));
            }
            return null;
        });
        interpreter.define("wsgi_read", args -> {
            int max = (int) Math.min(Integer.MAX_VALUE, Py.toLong(args.get(0)));
            ByteBuf data = request().read(max, ALLOC);
            try {
                return NativeBuffers.toBytes(data);
            } finally {
                data.release();
            }
        });
    }

    @Override
    public void prepare() {
        MemorySegment glue = Py.importModule("peregrine._wsgi");
        fileWrapper = Py.getAttr(glue, "FileWrapper");
        streamingInput = Py.getAttr(glue, "Input");
        Py.decRef(glue);
        MemorySegment io = Py.importModule("io");
        bytesIO = Py.getAttr(io, "BytesIO");
        Py.decRef(io);
        MemorySegment sys = Py.importModule("sys");
        MemorySegment stderr = Py.getAttr(sys, "stderr");
        Py.decRef(sys);
        MemorySegment nativeModule = Py.importModule("peregrine._native");
        startResponse = Py.getAttr(nativeModule, "wsgi_start_response");
        write = Py.getAttr(nativeModule, "wsgi_write");
        Py.decRef(nativeModule);
        closeName = Py.internedStr("close");
        environs = new EnvironBuilder[threads];
        for (int i = 0; i < threads; i++) environs[i] = new EnvironBuilder(rootPath, threads > 1, stderr, fileWrapper);
        Py.decRef(stderr);
    }

    @Override
    public void onApplicationThreadStart(Runnable hook) {
        threadStartHook = hook;
    }

    @Override
    public String start() {
        watchdog.start();
        for (int i = 1; i <= threads; i++) {
            EnvironBuilder builder = environs[i - 1];
            Thread worker = new Thread(null, () -> serve(builder), "wsgi-" + i, 16L << 20);
            worker.start();
            workers.add(worker);
        }
        return threads == 1 ? "1 thread" : threads + " threads";
    }

    @Override
    public void stop(long timeoutMillis) throws InterruptedException {
        for (int i = 0; i < workers.size(); i++) queue.add(STOP);
        for (Thread worker : workers) worker.join(timeoutMillis);
        watchdog.stop();
    }

    @Override
    public void dispatch(HttpExchange exchange) {
        WsgiRequest request = new WsgiRequest(exchange, enqueue);
        exchange.receiveBody(request);
        request.readAhead();
    }

    /** The request's head and read-ahead body are in: from now on it waits for a WSGI thread. */
    private void enqueue(WsgiRequest request) {
        request.readyNanos = metrics.clock();
        if (pending.incrementAndGet() == threads) saturationChange.run();
        queue.add(request);
    }

    @Override
    public boolean saturated() {
        return pending.get() >= threads;
    }

    @Override
    public void onSaturationChange(Runnable change) {
        saturationChange = change;
    }

    private WsgiRequest request() {
        WsgiRequest request = current.get();
        if (request == null) throw new PythonRaise(Py.ExcRuntimeError, "no WSGI request is running on this thread");
        return request;
    }

    private void serve(EnvironBuilder environs) {
        threadStartHook.run();
        PythonInterpreter.pinThreadState();
        // Finished responses go to the I/O threads without waking them, which costs this thread a system
        // call each (about 8 µs on these virtual machines, 12 % of a Flask request): the batch wakes
        // them when this thread runs out of requests, after 32 responses or 512 KiB, or before it waits;
        // the watchdog when a request blocks with responses waiting.
        WakeupBatch batch = new WakeupBatch(() -> {});
        watchdog.watch(batch);
        while (true) {
            WsgiRequest request = queue.poll();
            if (request == null) {
                batch.flush();
                try {
                    request = queue.take();
                } catch (InterruptedException e) {
                    return;
                }
            }
            if (request == STOP) {
                batch.flush();
                return;
            }
            if (batch.waitingSince() != 0) watchdog.arm();
            int gil = PythonInterpreter.acquire();
            if (request == DRAIN) {
                borrowed.drain();
                PythonInterpreter.release(gil);
                continue;
            }
            metrics.pythonStarted(request.readyNanos);
            request.batch = batch;
            current.set(request);
            try {
                handle(request, environs);
            } catch (RuntimeException e) {
                LOG.error("Error in the WSGI bridge", e);
                request.exchange().abort();
            } finally {
                current.remove();
                request.releaseBody();
                borrowed.drain();
                PythonInterpreter.release(gil);
                if (pending.getAndDecrement() == threads) saturationChange.run();
            }
        }
    }

    private void handle(WsgiRequest request, EnvironBuilder environs) {
        ByteBuf[] body = request.completeBody();
        long length = body != null ? completeLength(body) : request.spooledLength();
        MemorySegment environ = environs.build(request.exchange(), input(body), length);
        MemorySegment result = Py.callRaw(app, environ, startResponse);
        Py.decRef(environ);
        if (result.address() == 0) {
            failed(request, PythonException.fetch());
            return;
        }
        try {
            writeResult(request, result);
        } catch (PythonException e) {
            failed(request, e);
        } finally {
            close(result, request);
            Py.decRef(result);
        }
    }

    /** The size of a body read ahead whole into memory. */
    private static long completeLength(ByteBuf[] body) {
        long length = 0;
        for (ByteBuf piece : body) length += piece.readableBytes();
        return length;
    }

    private MemorySegment input(ByteBuf[] body) {
        if (body == null) return Py.call(streamingInput);
        if (body.length == 0) return Py.call(bytesIO);
        ByteBuf whole = body.length == 1 ? body[0] : ALLOC.compositeBuffer(body.length).addComponents(true, body);
        try {
            MemorySegment bytes = NativeBuffers.toBytes(whole);
            MemorySegment stream = Py.call(bytesIO, bytes);
            Py.decRef(bytes);
            return stream;
        } finally {
            whole.release();
        }
    }

    /**
     * A list or tuple is written in one go, every part of it being in hand; any other iterable one
     * block at a time, each reaching the socket before the next is asked for.
     */
    private void writeResult(WsgiRequest request, MemorySegment result) {
        if (!request.headSent && request.head != null && Py.isInstance(result, fileWrapper) && sendFile(request, result)) return;
        if (Py.isListOrTuple(result)) {
            ByteBuf all = null;
            for (long i = 0, n = Py.fastSize(result); i < n; i++) {
                MemorySegment item = Py.fastItem(result, i);
                MemorySegment block = block(item);
                if (block.byteSize() == 0) continue;
                ByteBuf data = borrowed.of(item, block);
                all = all == null ? data : ALLOC.compositeDirectBuffer().addComponents(true, all, data);
            }
            finish(request, all);
            return;
        }
        MemorySegment iterator = Py.getIter(result);
        try {
            MemorySegment item;
            while (!request.clientGone() && (item = Py.next(iterator)) != null) {
                try {
                    MemorySegment block = block(item);
                    // Blocks past a declared Content-Length that was reached are dropped, as the transport would cut them.
                    if (block.byteSize() > 0 && !request.complete) {
                        requireStarted(request);
                        request.send(borrowed.of(item, block), request.completesDeclaredLength(block.byteSize()));
                    }
                } finally {
                    Py.decRef(item);
                }
            }
        } finally {
            Py.decRef(iterator);
        }
        if (!request.clientGone()) finish(request, null);
    }

    /**
     * wsgi.file_wrapper over a regular file: the server sends the file from its current position itself
     * ({@link dev.peregrine.http.HttpExchange#sendFile}: sendfile on plain HTTP/1.1), reopening it through
     * /proc/self/fd so that the application's close() of its own file does not cut the transfer. False
     * when the wrapped object is no such file: then it is iterated as any other result.
     */
    private boolean sendFile(WsgiRequest request, MemorySegment wrapper) {
        MemorySegment method = Py.getAttr(wrapper, "_file_region");
        MemorySegment region = Py.call(method);
        Py.decRef(method);
        try {
            if (Py.isNone(region)) return false;
            long fd = Py.toLong(Py.fastItem(region, 0)), offset = Py.toLong(Py.fastItem(region, 1)), size = Py.toLong(Py.fastItem(region, 2));
            FileChannel file;
            try {
                file = FileChannel.open(Path.of("/proc/self/fd/" + fd), StandardOpenOption.READ);
            } catch (IOException | RuntimeException e) {
                return false;
            }
            ResponseHead head = request.head;
            long declared = head.contentLength();
            if (declared < 0) head.add("content-length", Long.toString(size - offset));
            FileBody body = FileBody.region(file, offset, declared >= 0 ? declared : size - offset);
            request.headSent = true;
            request.complete = true;
            if (request.exchange().head().method().equals("HEAD")) {
                body.close();
                request.exchange().send(head, null, true);
            } else {
                request.exchange().sendFile(head, body);
            }
            return true;
        } finally {
            Py.decRef(region);
        }
    }

    private static MemorySegment block(MemorySegment item) {
        MemorySegment block = Py.bytesLikeOf(item);
        if (block == null) throw new PythonException("TypeError", "TypeError: the WSGI application yielded "
                + Py.str(Py.typeOf(item)) + " instead of bytes", "");
        return block;
    }

    private static void requireStarted(WsgiRequest request) {
        if (request.head == null) throw new PythonException("RuntimeError", "RuntimeError: the WSGI application produced a body without calling start_response()", "");
    }

    private static void finish(WsgiRequest request, ByteBuf last) {
        if (request.complete) return;
        try {
            requireStarted(request);
        } catch (PythonException e) {
            if (last != null) last.release();
            throw e;
        }
        request.send(last, true);
    }

    /** PEP 3333: close() is called whatever happened, also when the client went away. */
    private void close(MemorySegment result, WsgiRequest request) {
        MemorySegment close = Py.getAttrOrNull(result, closeName);
        if (close == null) return;
        MemorySegment r = Py.callRaw(close);
        Py.decRef(close);
        if (r.address() == 0) {
            failed(request, PythonException.fetch());
        } else {
            Py.decRef(r);
        }
    }

    private static void failed(WsgiRequest request, PythonException error) {
        LOG.error("Exception in WSGI application\n" + (error.traceback().isEmpty() ? error.getMessage() : error.traceback()));
        if (request.complete) return;
        if (!request.headSent && !request.clientGone()) {
            request.head = ResponseHead.internalError();
            request.send(ResponseHead.internalErrorBody(ALLOC), true);
        } else {
            request.complete = true;
            request.exchange().abort();
        }
    }

    /** {@code start_response(status, headers, exc_info=None)}, returning {@code write}. */
    private MemorySegment startResponse(NativeFunction.Arguments args) {
        WsgiRequest request = request();
        MemorySegment excInfo = args.optional(2);
        if (excInfo != null && !Py.isNone(excInfo)) {
            if (request.headSent) {
                if (!Py.isListOrTuple(excInfo) || Py.fastSize(excInfo) != 3) throw new PythonRaise(Py.ExcTypeError, "exc_info must be a 3-tuple");
                Py.restoreError(Py.fastItem(excInfo, 0), Py.fastItem(excInfo, 1), Py.fastItem(excInfo, 2));
                throw PythonRaise.pending();
            }
        } else if (request.head != null) {
            throw new PythonRaise(Py.ExcRuntimeError, "start_response() called a second time without exc_info");
        }
        request.head = responseHead(args.get(0), args.get(1));
        return Py.newRef(write);
    }

    private static final String[] REASONS = new String[1000];
    static {
        for (int status = 100; status < REASONS.length; status++) REASONS[status] = StatusReasons.reason(status);
    }

    private static ResponseHead responseHead(MemorySegment status, MemorySegment headers) {
        if (!Py.isInstance(status, Py.UnicodeType)) throw new PythonRaise(Py.ExcTypeError, "the status must be a str such as '200 OK'");
        String text = Py.toJavaString(status);
        if (text.length() < 3 || !Character.isDigit(text.charAt(0)) || !Character.isDigit(text.charAt(1))
                || !Character.isDigit(text.charAt(2)) || (text.length() > 3 && text.charAt(3) != ' ')) {
            throw new PythonRaise(Py.ExcValueError, "invalid WSGI status '" + text + "': it must be three digits, a space and a reason");
        }
        ResponseHead head;
        try {
            head = new ResponseHead(Integer.parseInt(text.substring(0, 3)));
        } catch (IllegalArgumentException e) {
            throw new PythonRaise(Py.ExcValueError, e.getMessage());
        }
        // The application's reason phrase goes out as given ("302 FOUND" from Werkzeug), as gunicorn sends
        // it; compared in place, so the usual standard phrase costs no copy. gunicorn writes even CR and
        // LF out; here such a phrase is refused like a header value with them: start_response raises
        // ValueError, and the application's error becomes a 500.
        String standard = REASONS[head.status()];
        int reasonLength = text.length() - 4;
        if (reasonLength >= 0 && !(reasonLength == standard.length() && text.regionMatches(4, standard, 0, reasonLength))) {
            try {
                head.reason(text.subSequence(4, text.length()));
            } catch (IllegalArgumentException e) {
                throw new PythonRaise(Py.ExcValueError, e.getMessage());
            }
        }
        if (!Py.isListOrTuple(headers)) throw new PythonRaise(Py.ExcTypeError, "the response headers must be a list of (name, value) tuples");
        for (long i = 0, n = Py.fastSize(headers); i < n; i++) {
            MemorySegment pair = Py.fastItem(headers, i);
            if (!Py.isListOrTuple(pair) || Py.fastSize(pair) != 2) {
                throw new PythonRaise(Py.ExcTypeError, "each response header must be a (name, value) tuple");
            }
            MemorySegment name = nativeString(Py.fastItem(pair, 0)), value = nativeString(Py.fastItem(pair, 1));
            try {
                head.add(Py.bufferOf(name), Py.bufferOf(value));
            } catch (IllegalArgumentException e) {
                throw new PythonRaise(Py.ExcValueError, e.getMessage());
            } finally {
                Py.decRef(name);
                Py.decRef(value);
            }
        }
        return head;
    }

    /** A header name or value as bytes: str is encoded as ISO-8859-1, as PEP 3333 defines native strings. */
    private static MemorySegment nativeString(MemorySegment object) {
        if (Py.isInstance(object, Py.UnicodeType)) return Py.latin1Bytes(object);
        if (Py.bytesLikeOf(object) != null) return Py.newRef(object);
        throw new PythonRaise(Py.ExcTypeError, "response header names and values must be str");
    }
}
