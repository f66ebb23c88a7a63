package dev.peregrine.asgi;

import dev.peregrine.app.ServedApplication;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.WakeupBatch;
import dev.peregrine.metrics.RequestMetrics;
import dev.peregrine.python.BorrowedBytes;
import dev.peregrine.python.Py;
import dev.peregrine.python.PythonException;
import dev.peregrine.python.PythonInterpreter;
import dev.peregrine.python.PythonRaise;
import dev.peregrine.websocket.WebSocketApplication;
import dev.peregrine.websocket.WebSocketConnection;
import dev.peregrine.webtransport.WebTransportApplication;
import dev.peregrine.webtransport.WebTransportSession;
import org.jboss.logging.Logger;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Serves an ASGI 3 application: owns the Python thread and its asyncio loop, hands it requests
 * through {@link LoopWakeup}, and implements the {@code peregrine._native.asgi_*} functions the
 * loop calls back with. Everything touching Python objects runs on the Python thread.
 */
public final class AsgiApplication implements ServedApplication {
    private static final Logger LOG = Logger.getLogger("peregrine");

    private final MemorySegment app;
    private final boolean uvloop;
    private final boolean lifespan;
    private final LoopWakeup wakeup = new LoopWakeup();
    private final BorrowedBytes borrowed = new BorrowedBytes(() -> wakeup.post(this::drainBorrowed));
    private final RequestTable requests = new RequestTable();
    /**
     * Requests and connections handed to this loop that have not ended, queued ones included; any
     * thread. Free-threaded workers give each new one to the loop with the fewest (AsgiWorkerThreads).
     */
    private final AtomicInteger load = new AtomicInteger();
    private final CompletableFuture<String> ready = new CompletableFuture<>();
    private final String rootPath;
    private final PythonInterpreter interpreter;
    private final RequestMetrics metrics;
    private Thread thread;
    /** Set before the loop's thread starts, which reads it (see {@link #start(MemorySegment)}). */
    private MemorySegment sharedState;
    /** "python", or "python-N" for the worker threads of a free-threaded process. */
    private final String threadName;

    // Set on the Python thread once the glue is imported.
    private MemorySegment glueRunRequest;
    private MemorySegment glueResolve;
    private MemorySegment glueStop;
    private MemorySegment glueRun;
    private MemorySegment createFuture;
    private MemorySegment createTask;
    private MemorySegment setResult;
    private MemorySegment completed;
    private MemorySegment callSoon;
    private MemorySegment flushFunction;
    private boolean flushScheduled;
    /** Responses of one turn of the loop go to the I/O thread with one wake-up; flushed on the loop's next turn. */
    private final WakeupBatch batch = new WakeupBatch(this::scheduleFlush);
    private ScopeBuilder scopes;
    private AsgiMessages messages;

    /**
     * Called with the GIL held: {@code app} is a reference that this object keeps (the worker threads of
     * a free-threaded process share one).
     */
    public AsgiApplication(PythonInterpreter interpreter, MemorySegment app, String rootPath, boolean uvloop, boolean lifespan,
                           RequestMetrics metrics, String threadName) {
        this.threadName = threadName;
        this.interpreter = interpreter;
        this.metrics = metrics;
        this.app = app;
        this.rootPath = rootPath;
        this.uvloop = uvloop;
        this.lifespan = lifespan;
    }

    /**
     * Registers the {@code peregrine._native.asgi_*} functions, once for the process. The glue imports
     * them once, yet each worker thread of a free-threaded process runs a loop of its own: a call finds
     * the application whose loop made it from the thread it runs on.
     */
    public static void defineNatives(PythonInterpreter interpreter) {
        interpreter.define("asgi_wake", args -> {
            AsgiApplication self = onThisLoop();
            self.borrowed.drain();
            self.wakeup.drain(self::runTask);
            return null;
        });
        interpreter.define("asgi_flush", args -> {
            AsgiApplication self = onThisLoop();
            self.flushScheduled = false;
            self.batch.flush();
            self.borrowed.drain();
            return null;
        });
        interpreter.define("asgi_receive", args -> onThisLoop().request(args.self()).receive());
        interpreter.define("asgi_send", args -> onThisLoop().request(args.self()).send(args.get(0)));
        interpreter.define("asgi_done", args -> {
            MemorySegment error = args.get(1);
            AsgiApplication self = onThisLoop();
            AsgiCall request = self.requests.remove(Py.toLong(args.get(0)));
            if (request != null) {
                self.load.decrementAndGet();
                request.done(Py.isNone(error) ? null : Py.toJavaString(error));
            }
            return null;
        });
        interpreter.define("asgi_ready", args -> {
            AsgiApplication self = onThisLoop();
            MemorySegment state = args.get(0), error = args.get(2);
            if (!Py.isNone(state)) self.scopes.useState(state);
            if (Py.isNone(error)) self.ready.complete(Py.toJavaString(args.get(1)));
            else self.ready.completeExceptionally(new IllegalStateException(Py.toJavaString(error)));
            return null;
        });
    }

    /** The thread an application's loop runs on: a call from that loop finds its application with no lookup. */
    private static final class LoopThread extends Thread {
        final AsgiApplication application;

        LoopThread(AsgiApplication application, String name) {
            super(null, application::pythonMain, name, 16L << 20);
            this.application = application;
        }
    }

    private static AsgiApplication onThisLoop() {
        if (Thread.currentThread() instanceof LoopThread loop) return loop.application;
        throw new PythonRaise(Py.ExcRuntimeError, "Peregrine's ASGI functions are called from its event loops only");
    }

    /** Imports the glue; with the GIL held, after the native module is published. */
    @Override
    public void prepare() {
        MemorySegment glue = Py.importModule("peregrine._asgi");
        glueRunRequest = Py.getAttr(glue, "run_request");
        glueResolve = Py.getAttr(glue, "resolve");
        glueStop = Py.getAttr(glue, "stop");
        glueRun = Py.getAttr(glue, "run");
        Py.decRef(glue);
        MemorySegment asyncio = Py.importModule("asyncio");
        MemorySegment futureType = Py.getAttr(asyncio, "Future");
        setResult = Py.getAttr(futureType, "set_result");
        Py.decRef(futureType);
        Py.decRef(asyncio);
        MemorySegment nativeModule = Py.importModule("peregrine._native");
        flushFunction = Py.getAttr(nativeModule, "asgi_flush");
        Py.decRef(nativeModule);
        scopes = new ScopeBuilder(rootPath);
        messages = new AsgiMessages();
    }

    /**
     * Starts the Python thread: lifespan startup, then the loop. Returns once the application is
     * ready to serve (the event loop's name), or throws with the reason it cannot.
     */
    @Override
    public String start() {
        launch(null);
        return awaitReady();
    }

    /**
     * Starts the Python thread without waiting for it; with {@code sharedState} (a lifespan state another
     * loop made for the whole process), this loop runs no lifespan of its own and its requests see that state.
     */
    void launch(MemorySegment sharedState) {
        this.sharedState = sharedState;
        thread = new LoopThread(this, threadName);
        thread.start();
    }

    /** Waits until the launched loop serves: its name, or throws with the reason it cannot. */
    String awaitReady() {
        try {
            return ready.join();
        } catch (CompletionException e) {
            throw new IllegalStateException(e.getCause().getMessage(), e.getCause());
        }
    }

    private void pythonMain() {
        int gil = PythonInterpreter.acquire();
        try {
            MemorySegment fd = Py.integer(wakeup.fd());
            MemorySegment useUvloop = Py.bool(uvloop);
            MemorySegment useLifespan = Py.bool(lifespan);
            MemorySegment result = sharedState == null ? Py.callRaw(glueRun, app, fd, useUvloop, useLifespan)
                    : Py.callRaw(glueRun, app, fd, useUvloop, useLifespan, sharedState);
            if (result.address() == 0) {
                PythonException e = PythonException.fetch();
                LOG.error("The ASGI event loop failed:\n" + e.traceback());
                ready.completeExceptionally(new IllegalStateException(e.getMessage()));
            } else {
                Py.decRef(result);
            }
            Py.decRef(fd);
            Py.decRef(useUvloop);
            Py.decRef(useLifespan);
            ready.completeExceptionally(new IllegalStateException("the ASGI event loop ended before serving"));
        } finally {
            PythonInterpreter.release(gil);
        }
    }

    /** The lifespan state requests see, once ready: shared by the other loops with --lifespan-scope process. */
    MemorySegment lifespanState() {
        return scopes.state();
    }

    /** Stops the loop once in-flight requests are done; runs lifespan shutdown; waits for the thread. */
    @Override
    public void stop(long timeoutMillis) throws InterruptedException {
        requestStop();
        awaitStopped(timeoutMillis);
    }

    /** Asks the loop to stop once in-flight requests are done, without waiting. */
    void requestStop() {
        wakeup.post(() -> Py.callVoid(glueStop));
    }

    void awaitStopped(long timeoutMillis) throws InterruptedException {
        if (thread != null) thread.join(timeoutMillis);
    }

    private void runTask(Runnable task) {
        try {
            task.run();
        } catch (PythonException e) {
            LOG.error("Error in the ASGI bridge: " + e.traceback());
        } catch (RuntimeException e) {
            LOG.error("Error in the ASGI bridge", e);
        }
    }

    private AsgiCall request(MemorySegment cid) {
        AsgiCall request = requests.get(Py.toLong(cid));
        if (request == null) throw new PythonRaise(Py.ExcRuntimeError, "this ASGI request has already ended");
        return request;
    }

    /**
     * A loop that has not come back for its queued work within this is taken as blocked by the
     * application rather than busy: long enough that a loop running many short tasks under load never
     * reaches it, short next to the seconds a blocking call holds it.
     */
    private static final long STALLED_NANOS = 200_000_000L;

    /**
     * The loop is blocked: a connection accepted now would wait too. An idle loop is sent an empty task,
     * so that one blocked with nothing queued yet is seen at the next check as well; that is one wake-up
     * per check on an idle worker, and none under load, where tasks are queued anyway.
     */
    @Override
    public boolean saturated() {
        long stalled = wakeup.stalledNanos();
        if (stalled == 0) wakeup.post(NOTHING);
        return stalled > STALLED_NANOS;
    }

    private static final Runnable NOTHING = () -> {};

    // ---- called on I/O threads ----

    @Override
    public void dispatch(HttpExchange exchange) {
        AsgiRequest request = new AsgiRequest(this, exchange);
        exchange.receiveBody(request);
        handOver(request);
    }

    @Override
    public WebSocketApplication webSockets() {
        return this::dispatchWebSocket;
    }

    private void dispatchWebSocket(WebSocketConnection connection) {
        AsgiWebSocket socket = new AsgiWebSocket(this, connection);
        connection.start(socket);
        handOver(socket);
    }

    @Override
    public WebTransportApplication webTransport() {
        return this::dispatchWebTransport;
    }

    private void dispatchWebTransport(WebTransportSession session) {
        AsgiWebTransport call = new AsgiWebTransport(this, session);
        session.start(call);
        handOver(call);
    }

    /** Counts the call in this loop's load and queues its start on the loop. */
    private void handOver(AsgiCall call) {
        load.incrementAndGet();
        long ready = metrics.clock();
        wakeup.post(() -> begin(call, ready));
    }

    void post(Runnable task) {
        wakeup.post(task);
    }

    int load() {
        return load.get();
    }

    // ---- on the Python thread ----

    /**
     * Starts the application on a request: {@code receive} and {@code send} are built-ins bound to
     * the request's number, so the application's calls reach Java with no Python frame in between.
     */
    private void begin(AsgiCall request, long readyNanos) {
        metrics.pythonStarted(readyNanos);
        long cid = requests.add(request);
        MemorySegment scope = request.scope(scopes);
        MemorySegment id = Py.integer(cid);
        MemorySegment receive = interpreter.bind("asgi_receive", id);
        MemorySegment send = interpreter.bind("asgi_send", id);
        MemorySegment coroutine = Py.callRaw(glueRunRequest, scope, receive, send, id);
        lookUpLoopMethods();
        MemorySegment task = coroutine.address() == 0 ? coroutine : Py.callRaw(createTask, coroutine);
        Py.decRef(coroutine);
        Py.decRef(send);
        Py.decRef(receive);
        Py.decRef(id);
        Py.decRef(scope);
        if (task.address() == 0) {
            PythonException e = PythonException.fetch();
            requests.remove(cid);
            load.decrementAndGet();
            request.done(e.traceback());
        } else {
            // Held until the request ends: the loop itself keeps only weak references to tasks.
            request.holdTask(task);
        }
    }

    /** The running loop's create_future, create_task and call_soon, looked up on first use. */
    private void lookUpLoopMethods() {
        if (createFuture == null) {
            MemorySegment asyncio = Py.importModule("asyncio");
            MemorySegment getLoop = Py.getAttr(asyncio, "get_running_loop");
            MemorySegment loop = Py.call(getLoop);
            createFuture = Py.getAttr(loop, "create_future");
            createTask = Py.getAttr(loop, "create_task");
            callSoon = Py.getAttr(loop, "call_soon");
            Py.decRef(loop);
            Py.decRef(getLoop);
            Py.decRef(asyncio);
        }
    }

    WakeupBatch batch() {
        return batch;
    }

    /**
     * The batch for a part of a response, or null to hand it over at once. When the part ends the response,
     * its request is the only call running and no other response waits in the batch, the flush would wake
     * the I/O thread for this response alone: handing it over now costs the same one wake-up, and lets the
     * I/O thread write while the application still unwinds (middleware, the end of its task) instead of a
     * turn of the loop later. Otherwise it joins the batch, so that a busy turn still wakes the I/O thread once.
     */
    WakeupBatch batchFor(boolean lastPart) {
        return lastPart && requests.size() == 1 && batch.isEmpty() ? null : batch;
    }

    /** Lends large response bodies to the I/O threads instead of copying them (see {@link BorrowedBytes}). */
    BorrowedBytes borrowed() {
        return borrowed;
    }

    private void drainBorrowed() {
        borrowed.drain();
    }

    private void scheduleFlush() {
        if (flushScheduled) return;
        flushScheduled = true;
        lookUpLoopMethods();
        MemorySegment handle = Py.callRaw(callSoon, flushFunction);
        if (handle.address() == 0) {
            LOG.error("Could not schedule the response flush: " + PythonException.fetch().getMessage());
            flushScheduled = false;
            batch.flush();
        } else {
            Py.decRef(handle);
        }
    }

    MemorySegment newFuture() {
        lookUpLoopMethods();
        return Py.call(createFuture);
    }

    /** A new future already holding {@code value} (stolen): what receive() returns when it can answer at once. */
    MemorySegment completedFuture(MemorySegment value) {
        MemorySegment future = newFuture();
        MemorySegment r = Py.callRaw(setResult, future, value);
        Py.decRef(value);
        if (r.address() == 0) {
            Py.decRef(future);
            throw PythonException.fetch();
        }
        Py.decRef(r);
        return future;
    }

    /** One future, done with None, that every send() returns when it need not wait: awaiting it returns at once. */
    MemorySegment completed() {
        if (completed == null) completed = completedFuture(Py.newRef(Py.None));
        return Py.newRef(completed);
    }

    /** Completes a future handed to the application earlier; steals our reference to it and to value. */
    void resolve(MemorySegment future, MemorySegment value) {
        MemorySegment result = Py.callRaw(glueResolve, future, value);
        Py.decRef(future);
        Py.decRef(value);
        if (result.address() == 0) {
            LOG.error("Could not resume an ASGI request: " + PythonException.fetch().getMessage());
        } else {
            Py.decRef(result);
        }
    }

    AsgiMessages messages() {
        return messages;
    }
}
