package dev.peregrine.server;

import dev.peregrine.accesslog.AccessLog;
import dev.peregrine.app.ServedApplication;
import dev.peregrine.asgi.AsgiApplication;
import dev.peregrine.asgi.AsgiWorkerThreads;
import dev.peregrine.config.OperationsSettings;
import dev.peregrine.config.ServerSettings;
import dev.peregrine.edge.chain.EdgeChain;
import dev.peregrine.http.Connections;
import dev.peregrine.http.HttpSettings;
import dev.peregrine.http.RequestCore;
import dev.peregrine.http.TlsResponseHeaders;
import dev.peregrine.http3.Http3Setup;
import dev.peregrine.metrics.WorkerMetrics;
import dev.peregrine.python.Py;
import dev.peregrine.python.PythonInstall;
import dev.peregrine.python.PythonInterpreter;
import dev.peregrine.shared.ConnectionShares;
import dev.peregrine.shared.SharedLayout;
import dev.peregrine.shared.SharedRegion;
import dev.peregrine.store.SharedStore;
import dev.peregrine.tls.HttpsRedirect;
import dev.peregrine.tls.TlsContexts;
import dev.peregrine.workers.Listeners;
import dev.peregrine.workers.SupervisorLink;
import dev.peregrine.wsgi.WsgiApplication;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import org.jboss.logging.Logger;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * Puts one worker together, in the order that lets each failure be reported with nothing half-started:
 * the metrics port, the interpreter, the application (import, then its threads and lifespan startup),
 * the request core and the edge chain, the I/O threads, then the sockets (HTTP/3 first, so that once
 * the TCP port answers QUIC does too; the redirect port last). Every step that holds something
 * registers how to undo it; a step that fails undoes all before it, in reverse, in one place.
 */
public final class WorkerAssembly {
    private static final Logger LOG = Logger.getLogger("peregrine");
    /**
     * A start that could not complete: its message is printed, and the process exits with {@code status}.
     * Status 0 is a start cut short by a stop, which is logged as such rather than printed as an error.
     */
    static final class StartFailure extends Exception {
        final int status;
        final String traceback;

        StartFailure(int status, String message, String traceback) {
            super(message, null, false, false);
            this.status = status;
            this.traceback = traceback;
        }
    }

    /** A worker whose application runs and whose sockets accept. */
    record Worker(ServedApplication application, String protocol, String flavour, PythonInstall install, WorkerMetrics metrics,
                  Connections connections, EdgeChain edge, EventLoopGroup acceptors, EventLoopGroup workers,
                  Channel listener, Channel quic, Channel redirect, SupervisorLink link, SharedStore store) {}

    private final ServerSettings settings;
    private final TlsContexts tls;
    /** What to undo should a later step fail, last first. */
    private final Deque<Runnable> undo = new ArrayDeque<>();

    private WorkerAssembly(ServerSettings settings, TlsContexts tls) {
        this.settings = settings;
        this.tls = tls;
    }

    /**
     * @param stopNow what the supervisor's word to stop (or its disappearance) does
     * @param startingApplication run just before the application's startup (lifespan, threads) begins
     */
    static Worker assemble(ServerSettings settings, TlsContexts tls, Runnable stopNow, Runnable startingApplication) throws StartFailure {
        WorkerAssembly assembly = new WorkerAssembly(settings, tls);
        try {
            return assembly.build(stopNow, startingApplication);
        } catch (StartFailure e) {
            assembly.rollBack();
            throw e;
        }
    }

    /**
     * One event loop on one Python thread; with --free-threaded, one per worker thread, all serving the
     * one application object.
     */
    private ServedApplication asgi(PythonInterpreter interpreter, MemorySegment app, WorkerMetrics metrics) {
        AsgiApplication.defineNatives(interpreter);
        Function<String, AsgiApplication> loop = threadName -> new AsgiApplication(interpreter, app,
                settings.app().rootPath(), settings.app().uvloop(), settings.app().lifespan(), metrics.recorder(), threadName);
        if (!settings.workers().freeThreaded()) return loop.apply("python");
        List<AsgiApplication> loops = new ArrayList<>();
        for (int i = 1; i <= settings.workers().workers(); i++) loops.add(loop.apply("python-" + i));
        return new AsgiWorkerThreads(loops, settings.workers().processLifespan());
    }

    /** With --free-threaded, each worker thread brings its --wsgi-threads to the one pool, and they run in parallel. */
    private ServedApplication wsgi(PythonInterpreter interpreter, MemorySegment app, WorkerMetrics metrics) {
        int threads = settings.app().wsgiThreads() * (settings.workers().freeThreaded() ? settings.workers().workers() : 1);
        return new WsgiApplication(interpreter, app, settings.app().rootPath(), threads, metrics.recorder());
    }

    private void rollBack() {
        while (!undo.isEmpty()) undo.pop().run();
    }

    private Worker build(Runnable stopNow, Runnable startingApplication) throws StartFailure {
        // How long each step took, in the debug log: a replaced worker's time to serve is all start-up.
        long begun = System.nanoTime();
        long jvmMillis = ProcessHandle.current().info().startInstant()
                .map(t -> Duration.between(t, Instant.now()).toMillis()).orElse(-1L);
        WorkerMetrics metrics;
        try {
            // Before Python starts: a port that is taken is reported at once, with nothing to undo.
            metrics = WorkerMetrics.start(settings.operations().metricsPort(), settings.operations().metricsHost(), System.getenv());
        } catch (IOException e) {
            throw new StartFailure(1, e.getMessage(), "");
        }
        undo.push(metrics::close);

        SharedLayout layout = SharedLayout.of(settings.edge());
        SharedRegion shared;
        try {
            shared = layout == null ? null : layout.forWorker(System.getenv());
        } catch (IOException e) {
            throw new StartFailure(1, "cannot map the workers' shared memory: " + e.getMessage(), "");
        }

        PythonInstall install;
        PythonInterpreter interpreter;
        try {
            install = PythonInstall.locate(settings.python().venv(), settings.python().autoVenv(), System.getenv());
            List<Path> path = new ArrayList<>();
            for (Path p : settings.python().pythonPath()) path.add(p.toAbsolutePath());
            path.add(Path.of("").toAbsolutePath());
            interpreter = PythonInterpreter.start(install, path);
        } catch (PythonInstall.Unusable e) {
            throw new StartFailure(1, e.getMessage(), "");
        }
        long pythonStarted = System.nanoTime();

        ServedApplication application;
        String protocol;
        boolean freeThreaded = settings.workers().freeThreaded();
        int gil = PythonInterpreter.acquire();
        try {
            String refusal = freeThreaded ? install.freeThreadingRefusal() : null;
            if (refusal != null) throw new StartFailure(2, refusal, "");
            ApplicationLoader.Loaded loaded = ApplicationLoader.load(settings.app().target(), settings.app().factory(),
                    settings.app().protocol().name());
            protocol = loaded.protocol();
            if (freeThreaded && FreeThreading.gilEnabled()) {
                LOG.warn("The GIL is enabled: importing the application loaded an extension module that does not declare it can run "
                        + "without it (CPython's RuntimeWarning above names it); the worker threads serve, but one at a time. "
                        + "PYTHON_GIL=0 in the environment keeps the GIL off at the module's own risk.");
            }
            interpreter.define("log", args -> {
                WorkerServer.pythonLog((int) Py.toLong(args.get(0)), Py.toJavaString(args.get(1)));
                return null;
            });
            application = protocol.equals("asgi") ? asgi(interpreter, loaded.app(), metrics) : wsgi(interpreter, loaded.app(), metrics);
            interpreter.publishNativeModule();
            application.prepare();
        } catch (ApplicationLoader.LoadFailure e) {
            throw new StartFailure(e.usage() ? 2 : 1, e.getMessage(), e.traceback());
        } finally {
            PythonInterpreter.release(gil);
        }

        long imported = System.nanoTime();
        Connections connections = new Connections(settings.listen().maxConnections(), metrics.recorder());
        CoreSharing cores = CoreSharing.forSingleWorker(settings.workers().shareCore() && settings.workers().processes() == 1, connections);
        if (cores != null) application.onApplicationThreadStart(cores::adoptCurrentThread);
        String flavour;
        startingApplication.run();
        try {
            flavour = application.start();
        } catch (IllegalStateException e) {
            throw new StartFailure(3, e.getMessage(), "");
        }
        undo.push(() -> WorkerServer.stopApplication(application, settings));
        long applicationStarted = System.nanoTime();
        if (settings.python().gcFreeze()) PythonInterpreter.freezeStartupObjects();

        HttpSettings http = httpSettings(settings);
        boolean epoll = Epoll.isAvailable();
        EventLoopGroup acceptors = epoll ? new EpollEventLoopGroup(1) : new NioEventLoopGroup(1);
        // One I/O thread per worker: in a free-threaded process, the worker threads share the I/O threads.
        int ioThreads = settings.workers().freeThreaded() ? settings.workers().workers() : 1;
        EventLoopGroup workers = epoll ? new EpollEventLoopGroup(ioThreads, PollBeforeSleep.factory(ioThreads == 1 ? cores : null)) : new NioEventLoopGroup(ioThreads);
        undo.push(() -> {
            acceptors.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
            workers.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
        });
        SharedStore store = sharedStore(workers, ioThreads, metrics);
        if (store != null) undo.push(store::close);
        if (store != null && tls != null) tls.keepCertificatesIn(store);

        EdgeChain edge = new EdgeChain(settings.edge(), shared, store, metrics.recorder(), application);
        if (store != null) store.warmUp();
        RequestCore core = new RequestCore(http, connections, edge.entry(), edge.upgradeGate());
        AcceptGate gate = null;
        if (SupervisorLink.supervised() && settings.workers().processes() > 1) {
            ConnectionShares shares = null;
            try {
                shares = ConnectionShares.forWorker(System.getenv(), ConnectionShares.slotsFor(settings.workers().processes()));
            } catch (IOException e) {
                LOG.warnf("Cannot map the workers' connection counts (%s): this worker accepts without regard to the others' share", e.getMessage());
            }
            gate = new AcceptGate(application, shares);
        }
        ServerBootstrap bootstrap = new ServerBootstrap()
                .group(acceptors, workers)
                .childOption(ChannelOption.AUTO_READ, false)
                .childHandler(new ConnectionInitializer(
                        new Protocols(core, application.webSockets(), settings.protocols().http2(), settings.protocols().http2Only()),
                        connections, tls, handshakeTimeout()));
        if (settings.listen().unix() == null) bootstrap.childOption(ChannelOption.TCP_NODELAY, true);
        if (gate != null) bootstrap.handler(gate);

        Channel quic = null;
        if (settings.protocols().http3()) {
            try {
                quic = Http3Setup.bind(workers, settings.listen().host(), settings.protocols().quicPort(), SupervisorLink.supervised(),
                        Http3Setup.quicCodec(tls.quicEngines(), core, application.webTransport(), application.webSockets()));
            } catch (Exception e) {
                throw new StartFailure(1, "cannot listen on udp " + settings.listen().host() + ":" + settings.protocols().quicPort()
                        + " (--http3): " + e.getMessage(), "");
            }
            undo.push(quic::close);
        }

        Channel listener;
        SupervisorLink link;
        try {
            link = SupervisorLink.connectIfSupervised(acceptors, stopNow);
            listener = link == null ? Listeners.bind(bootstrap, settings) : Listeners.adopt(bootstrap, link.listenerFd(), settings.listen().unix() != null);
        } catch (Exception e) {
            // Not a failure: the supervisor stopped (a signal during the application's startup) before this worker served.
            if (e.getCause() instanceof SupervisorLink.Closed) throw new StartFailure(0, "stopped before it served: its supervisor is stopping", "");
            throw new StartFailure(1, "cannot listen on " + (settings.listen().unix() != null ? settings.listen().unix()
                    : settings.listen().host() + ":" + settings.listen().port()) + ": " + e.getMessage(), "");
        }
        undo.push(listener::close);
        // Other workers accept on the same socket: this one leaves them the next connections while it is
        // saturated or holds more than its share (AcceptGate).
        if (gate != null) gate.attach(listener);

        Channel redirect = null;
        if (link == null && settings.tls().redirectHttpPort() != null) {
            // Under a supervisor, the supervisor answers the redirect port.
            try {
                redirect = HttpsRedirect.bind(acceptors, settings);
            } catch (Exception e) {
                throw new StartFailure(1, "cannot listen on " + settings.listen().host() + ":" + settings.tls().redirectHttpPort()
                        + " (--redirect-http): " + e.getMessage(), "");
            }
        }
        long end = System.nanoTime();
        LOG.debugf("Start-up took %d ms from the process's start: JVM and settings %d ms, Python %d ms, import %d ms, application startup %d ms, sockets %d ms",
                jvmMillis < 0 ? -1 : jvmMillis + (end - begun) / 1_000_000, jvmMillis, (pythonStarted - begun) / 1_000_000,
                (imported - pythonStarted) / 1_000_000, (applicationStarted - imported) / 1_000_000, (end - applicationStarted) / 1_000_000);
        return new Worker(application, protocol, flavour, install, metrics, connections, edge, acceptors, workers, listener, quic, redirect, link, store);
    }

    /** The connection to --shared-store, when something goes through it: the rate limit, the response cache. Null otherwise. */
    private SharedStore sharedStore(EventLoopGroup workers, int ioThreads, WorkerMetrics metrics) {
        if (settings.sharedStore() == null) return null;
        List<String> shared = new ArrayList<>();
        if (settings.edge().rateLimit() != null) shared.add("rate limit");
        if (settings.edge().cache() != null) shared.add("response cache");
        if (settings.tls().acme() != null) shared.add("ACME certificates");
        if (shared.isEmpty()) return null;
        return SharedStore.open(settings.sharedStore(), String.join(" and ", shared), workers, ioThreads,
                Duration.ofMillis(settings.sharedStore().timeoutMillis()), metrics.recorder());
    }

    /** What the connections of every transport read of the configuration. */
    public static HttpSettings httpSettings(ServerSettings s) {
        OperationsSettings ops = s.operations();
        AccessLog accessLog = ops.accessLog() ? new AccessLog(ops.accessLogJson(), ops.requestId(), ops.traceContext()) : null;
        return new HttpSettings(s.limits().maxHeaderSize(), s.limits().maxBody(), s.limits().keepAliveMillis(), s.limits().requestTimeoutMillis(),
                s.app().scheme(), accessLog, ops.forwardedAllowIps(), ops.requestId(), ops.requestStartHeader(), s.webSocket(),
                TlsResponseHeaders.of(s.tls().hstsSeconds() >= 0 ? "max-age=" + s.tls().hstsSeconds() : null,
                        s.protocols().http3() ? "h3=\":" + s.protocols().quicPort() + "\"; ma=86400" : null),
                s.limits().gracefulTimeoutMillis());
    }

    /** A TLS handshake may take as long as a request may stall. */
    private long handshakeTimeout() {
        return settings.limits().requestTimeoutMillis() > 0 ? settings.limits().requestTimeoutMillis() : 30_000;
    }
}
