package dev.peregrine.asgi;

import dev.peregrine.app.ServedApplication;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.metrics.RequestMetrics;
import dev.peregrine.python.Py;
import dev.peregrine.python.PyRef;
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
 * Serves an ASGI 3 application: owns the Python thread that runs its asyncio loop, starts each call
 * (request, WebSocket, WebTransport session) on it, and implements the {@code peregrine._native.asgi_*}
 * functions the loop calls back with, finding the call by its number. What a running call asks of the
 * loop (futures, the response batch, lent bodies) is {@link AsgiLoop}'s. Everything touching Python
 * objects runs on the Python thread.
 */
public final class AsgiApplication implements ServedApplication {
    private static final Logger LOG = Logger.getLogger("peregrine");

    private final MemorySegment app;
    private final boolean uvloop;
    private final boolean lifespan;
    /** The calls running on the loop, by the number their bound receive and send carry. */
    private final RequestTable calls = new RequestTable();
    private final AsgiLoop loop = new AsgiLoop(calls);
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
    private Runnable threadStartHook = () -> { };
    /** Set before the loop's thread starts, which reads it (see {@link #start(MemorySegment)}). */
    private MemorySegment sharedState;
    /** "python", or "python-N" for the worker threads of a free-threaded process. */
    private final String threadName;

    // Set on the Python thread once the glue is imported.
    private MemorySegment glueRunRequest;
    private MemorySegment glueStop;
    private MemorySegment glueRun;
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
            // A static method: the reference is made once, not on each wake-up of the loop.
            self.loop.wake(AsgiApplication::runTask);
            return null;
        });
        interpreter.define("asgi_flush", args -> {
            onThisLoop().loop.flush();
            return null;
        });
        interpreter.define("asgi_receive", args -> onThisLoop().call(args.self()).receive());
        interpreter.define("asgi_send", args -> onThisLoop().call(args.self()).send(args.get(0)));
        interpreter.define("asgi_done", args -> {
            MemorySegment error = args.get(1);
            onThisLoop().end(Py.toLong(args.get(0)), Py.isNone(error) ? null : Py.toJavaString(error));
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
        try (PyRef glue = PyRef.own(Py.importModule("peregrine._asgi"))) {
            glueRunRequest = Py.getAttr(glue.object(), "run_request");
            glueStop = Py.getAttr(glue.object(), "stop");
            glueRun = Py.getAttr(glue.object(), "run");
            loop.prepare(glue.object());
        }
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

    @Override
    public void onApplicationThreadStart(Runnable hook) {
        threadStartHook = hook;
    }

    private void pythonMain() {
        threadStartHook.run();
        int gil = PythonInterpreter.acquire();
        try (PyRef fd = PyRef.own(Py.integer(loop.fd()));
             PyRef useUvloop = PyRef.own(Py.bool(uvloop));
             PyRef useLifespan = PyRef.own(Py.bool(lifespan));
             PyRef result = PyRef.own(sharedState == null
                     ? Py.callRaw(glueRun, app, fd.object(), useUvloop.object(), useLifespan.object())
                     : Py.callRaw(glueRun, app, fd.object(), useUvloop.object(), useLifespan.object(), sharedState))) {
            if (result.failed()) {
                PythonException e = PythonException.fetch();
                LOG.error("The ASGI event loop failed:\n" + e.traceback());
                ready.completeExceptionally(new IllegalStateException(e.getMessage()));
            }
            // Completes nothing when the loop served and has now stopped: ready was completed then.
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
        loop.post(() -> Py.callVoid(glueStop));
    }

    void awaitStopped(long timeoutMillis) throws InterruptedException {
        if (thread != null) thread.join(timeoutMillis);
    }

    private static void runTask(Runnable task) {
        try {
            task.run();
        } catch (PythonException e) {
            LOG.error("Error in the ASGI bridge: " + e.traceback());
        } catch (RuntimeException e) {
            LOG.error("Error in the ASGI bridge", e);
        }
    }

    private AsgiCall call(MemorySegment cid) {
        AsgiCall call = calls.get(Py.toLong(cid));
        if (call == null) throw new PythonRaise(Py.ExcRuntimeError, "this ASGI request has already ended");
        return call;
    }

    /** The call's task ended: with null, the application returned; else its traceback, or "" when cancelled. */
    private void end(long cid, String error) {
        AsgiCall call = calls.remove(cid);
        if (call != null) {
            load.decrementAndGet();
            call.done(error);
        }
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
        long stalled = loop.stalledNanos();
        if (stalled == 0) loop.post(NOTHING);
        return stalled > STALLED_NANOS;
    }

    private static final Runnable NOTHING = () -> {};

    // ---- called on I/O threads ----

    @Override
    public void dispatch(HttpExchange exchange) {
        AsgiRequest request = new AsgiRequest(loop, messages, exchange);
        exchange.receiveBody(request);
        handOver(request);
    }

    @Override
    public WebSocketApplication webSockets() {
        return this::dispatchWebSocket;
    }

    private void dispatchWebSocket(WebSocketConnection connection) {
        AsgiWebSocket socket = new AsgiWebSocket(loop, messages, connection);
        connection.start(socket);
        handOver(socket);
    }

    @Override
    public WebTransportApplication webTransport() {
        return this::dispatchWebTransport;
    }

    private void dispatchWebTransport(WebTransportSession session) {
        AsgiWebTransport call = new AsgiWebTransport(loop, messages, session);
        session.start(call);
        handOver(call);
    }

    /** Counts the call in this loop's load and queues its start on the loop. */
    private void handOver(AsgiCall call) {
        load.incrementAndGet();
        long ready = metrics.clock();
        loop.post(() -> begin(call, ready));
    }

    int load() {
        return load.get();
    }

    // ---- on the Python thread ----

    /**
     * Starts the application on a call: {@code receive} and {@code send} are built-ins bound to
     * the call's number, so the application's calls reach Java with no Python frame in between.
     */
    private void begin(AsgiCall call, long readyNanos) {
        metrics.pythonStarted(readyNanos);
        long cid = calls.add(call);
        MemorySegment task;
        try (PyRef scope = PyRef.own(call.scope(scopes));
             PyRef id = PyRef.own(Py.integer(cid));
             PyRef receive = PyRef.own(interpreter.bind("asgi_receive", id.object()));
             PyRef send = PyRef.own(interpreter.bind("asgi_send", id.object()));
             PyRef coroutine = PyRef.own(Py.callRaw(glueRunRequest, scope.object(), receive.object(), send.object(), id.object()))) {
            task = coroutine.failed() ? coroutine.object() : loop.createTask(coroutine.object());
        } catch (PythonException e) {
            end(cid, e.traceback());
            return;
        }
        if (task.address() == 0) {
            end(cid, PythonException.fetch().traceback());
        } else {
            // Held until the call ends: the loop itself keeps only weak references to tasks.
            call.holdTask(task);
        }
    }
}
