package dev.peregrine.server;

import dev.peregrine.app.ServedApplication;
import dev.peregrine.config.ServerSettings;
import dev.peregrine.config.Version;
import dev.peregrine.python.Py;
import dev.peregrine.python.PythonInterpreter;
import dev.peregrine.server.WorkerAssembly.StartFailure;
import dev.peregrine.server.WorkerAssembly.Worker;
import dev.peregrine.tls.TlsContexts;
import dev.peregrine.workers.Listeners;
import dev.peregrine.workers.SupervisorLink;
import org.jboss.logging.Logger;
import sun.misc.Signal;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * The life of one worker process: signals, the start ({@link WorkerAssembly}), serving until a stop,
 * and the drain (fail the health check for --drain-delay, stop accepting, let in-flight requests finish,
 * stop the application).
 */
public final class WorkerServer {
    private static final Logger LOG = Logger.getLogger("peregrine");

    private final ServerSettings settings;
    /** Null without TLS. */
    private final TlsContexts tls;
    private final LinkedBlockingQueue<Stop> stops = new LinkedBlockingQueue<>();
    private volatile boolean serving;

    public WorkerServer(ServerSettings settings, TlsContexts tls) {
        this.settings = settings;
        this.tls = tls;
    }

    /**
     * How a stop was asked for: by a signal, to shut down (the drain delay applies), or by the supervisor,
     * whose successor for this worker serves already (at once, and idle connections are kept as long as
     * keep-alive keeps them, see {@link #drainIdleGraceNanos}).
     */
    private enum Stop { AFTER_DELAY, REPLACED }

    /** How long a shutdown gives a connection just used to send its next request. */
    private static final long SHUTDOWN_IDLE_GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(250);

    /**
     * Where the start is, which decides what a signal does. While the application is imported nothing
     * needs undoing, so a stop ends the process at once. From the moment its startup (ASGI lifespan,
     * WSGI threads) begins, the application may hold what only its shutdown releases (a pool, a
     * connection), so a stop waits for the startup to complete and then runs the shutdown; only a
     * second signal during that startup (one that hangs) ends a single process at once.
     */
    private enum Phase { LOADING, STARTING_APPLICATION, RUNNING }

    private final Object phaseLock = new Object();
    /** Guarded by phaseLock. */
    private Phase phase = Phase.LOADING;
    /** Guarded by phaseLock: a stop came during the application's startup. */
    private boolean stopDuringStartup;

    /** Serves until SIGTERM or SIGINT (or the supervisor's word); returns the exit status. */
    public int run() {
        // Before anything else, so that every signal is heard and logged, in whichever phase it comes.
        Signal.handle(new Signal("TERM"), signal -> stopOrExit(Stop.AFTER_DELAY, 143, "SIGTERM"));
        Signal.handle(new Signal("INT"), signal -> stopOrExit(Stop.AFTER_DELAY, 130, "SIGINT"));
        Signal.handle(new Signal("HUP"), SupervisorLink.supervised()
                // The supervisor decides about replacements; a hang-up of the terminal is not a request to stop.
                ? signal -> LOG.infof("%sreceived SIGHUP: ignored, the supervisor replaces workers", who())
                : tls != null
                // One process cannot replace itself, but it can take new certificates (renewed on disk) for new connections.
                ? signal -> {
                    LOG.info("received SIGHUP: reloading the certificates");
                    tls.reload();
                }
                : signal -> LOG.warn("received SIGHUP: ignored, SIGHUP replaces workers only when a supervisor runs them: "
                        + "start with --workers 2 or more (0 = one per CPU) or --reload"));
        Worker worker;
        try {
            worker = WorkerAssembly.assemble(settings, tls, () -> stops.add(Stop.REPLACED), () -> {
                synchronized (phaseLock) {
                    phase = Phase.STARTING_APPLICATION;
                }
            });
        } catch (StartFailure e) {
            if (e.status == 0) {
                LOG.infof("%s%s", who(), e.getMessage());
                return 0;
            }
            if (!e.traceback.isEmpty()) System.err.println(e.traceback);
            System.err.println("peregrine: " + e.getMessage());
            return e.status;
        }
        boolean stoppedDuringStartup;
        synchronized (phaseLock) {
            phase = Phase.RUNNING;
            stoppedDuringStartup = stopDuringStartup;
        }
        if (stoppedDuringStartup) {
            // Never announced, so nothing to drain for: straight to the shutdown, with the application's.
            return drain(worker, Stop.AFTER_DELAY);
        }
        serving = true;
        announce(worker);
        // After the listener is up: the CA validates on this very port.
        if (tls != null) tls.startCertificateManagement();
        Stop stop = awaitStop();
        if (stop == Stop.AFTER_DELAY && settings.workers().drainDelayMillis() > 0) {
            worker.edge().failHealthCheck();
            LOG.infof("Draining in %d ms: the health check fails from now on, requests are still served", settings.workers().drainDelayMillis());
            // A second signal, or the supervisor, cuts the delay short.
            pollStop(settings.workers().drainDelayMillis());
        }
        return drain(worker, stop);
    }

    private void announce(Worker worker) {
        if (worker.link() == null) {
            LOG.infof("Peregrine %s serving %s (%s, %s) on %s with Python %s (%s)", Version.VERSION, settings.app().target(),
                    worker.protocol().toUpperCase(), worker.flavour(), Listeners.describe(worker.listener(), settings),
                    worker.install().version(), worker.install().executable());
            if (tls != null) LOG.infof("TLS by %s, ALPN %s", tls.implementation(), tls.alpn());
            if (worker.quic() != null) LOG.infof("HTTP/3 over QUIC on udp %s:%d", settings.listen().host(), settings.protocols().quicPort());
            if (worker.redirect() != null) LOG.infof("Redirecting plain HTTP on port %d to https", settings.tls().redirectHttpPort());
            if (worker.metrics().url() != null) LOG.infof("Metrics on %s", worker.metrics().url());
        } else {
            LOG.infof("Worker %d (pid %d) serving %s (%s, %s) with Python %s", worker.link().id(), ProcessHandle.current().pid(),
                    settings.app().target(), worker.protocol().toUpperCase(), worker.flavour(), worker.install().version());
            worker.link().ready();
        }
    }

    /** Stops accepting, lets requests in flight finish within --graceful-timeout, and stops everything; the exit status. */
    private int drain(Worker worker, Stop stop) {
        LOG.info("Shutting down: finishing requests in flight");
        worker.edge().failHealthCheck();
        worker.listener().close().syncUninterruptibly();
        // A connection accepted just before the close may still be on its way to its I/O thread, where it is
        // counted: an empty task queued behind its registration on each I/O thread lets the wait below see it,
        // instead of the shutdown closing it unanswered.
        for (var ioThread : worker.workers()) ioThread.submit(() -> {}).syncUninterruptibly();
        if (worker.redirect() != null) worker.redirect().close();
        worker.connections().startDraining(drainIdleGraceNanos(stop));
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(settings.limits().gracefulTimeoutMillis());
        // Connections, not only requests: idle keep-alive connections close on their own within a moment,
        // and one that sends a request meanwhile gets its answer (with Connection: close) instead of a reset.
        while ((worker.connections().inFlight() > 0 || worker.connections().open() > 0) && System.nanoTime() < deadline) {
            sleep(10);
        }
        int cut = worker.connections().inFlight();
        if (cut > 0) LOG.warnf("Graceful timeout: %d request(s) still in flight were cut", cut);
        worker.connections().closeAll();
        // After the connections: QUIC connections are closed by packets sent through this socket.
        if (worker.quic() != null) worker.quic().close().syncUninterruptibly();
        stopApplication(worker.application(), settings);
        if (worker.store() != null) worker.store().close();
        worker.acceptors().shutdownGracefully(0, 100, TimeUnit.MILLISECONDS);
        worker.workers().shutdownGracefully(0, 100, TimeUnit.MILLISECONDS);
        if (settings.listen().unix() != null && worker.link() == null) {
            try {
                Files.deleteIfExists(settings.listen().unix());
            } catch (IOException ignored) {
                // The socket file is left behind; the next start removes it.
            }
        }
        flushPython();
        worker.metrics().close();
        LOG.info("Stopped");
        return cut > 0 ? 1 : 0;
    }

    /**
     * A replaced worker's clients go on as if nothing happened: an idle connection is closed when keep-alive
     * would have closed it anyway, so the replacement adds no close that could race a request. A shutdown
     * (Ctrl-C, SIGTERM) does not wait that long for connections a browser keeps open, nor does --reload,
     * where a request to the old worker would show the old code.
     */
    private long drainIdleGraceNanos(Stop stop) {
        if (stop != Stop.REPLACED || settings.workers().reload()) return SHUTDOWN_IDLE_GRACE_NANOS;
        return Math.max(SHUTDOWN_IDLE_GRACE_NANOS, TimeUnit.MILLISECONDS.toNanos(settings.limits().keepAliveMillis()));
    }

    private void stopOrExit(Stop stop, int status, String signal) {
        synchronized (phaseLock) {
            switch (phase) {
                case LOADING -> {
                    LOG.infof("%sreceived %s while loading the application: exiting", who(), signal);
                    Runtime.getRuntime().halt(status);
                }
                case STARTING_APPLICATION -> {
                    // Under a supervisor a second signal is no one's impatience: Ctrl-C at a terminal
                    // reaches every process of the group and the supervisor then sends its SIGTERM too.
                    // The supervisor kills a worker that does not stop in time.
                    if (stopDuringStartup && !SupervisorLink.supervised()) {
                        LOG.warnf("%sreceived %s again during the application's startup: exiting without its shutdown", who(), signal);
                        Runtime.getRuntime().halt(status);
                    }
                    if (stopDuringStartup) {
                        LOG.infof("%sreceived %s during the application's startup: already stopping once it completes", who(), signal);
                        return;
                    }
                    stopDuringStartup = true;
                    LOG.infof("%sreceived %s during the application's startup: stopping once it completes", who(), signal);
                    stops.add(stop);
                }
                case RUNNING -> {
                    LOG.infof("%sreceived %s: %s", who(), signal, serving ? "stopping" : "stopping once started");
                    stops.add(stop);
                }
            }
        }
    }

    /** How this process's lines name it: a supervised worker says which one it is. */
    static String who() {
        return SupervisorLink.supervised()
                ? "worker " + System.getenv().getOrDefault("PEREGRINE_WORKER_ID", "?") + " (pid " + ProcessHandle.current().pid() + ") " : "";
    }

    private Stop awaitStop() {
        while (true) {
            try {
                return stops.take();
            } catch (InterruptedException ignored) {
                // Only a signal or the supervisor ends the server.
            }
        }
    }

    private void pollStop(long millis) {
        try {
            stops.poll(millis, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** After the last request, or to undo a start: stops the Python thread(s), with the lifespan shutdown. */
    static void stopApplication(ServedApplication application, ServerSettings settings) {
        try {
            application.stop(settings.limits().gracefulTimeoutMillis() + 5000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void flushPython() {
        int gil = PythonInterpreter.acquire();
        try {
            MemorySegment sys = Py.importModule("sys");
            for (String stream : List.of("stdout", "stderr")) {
                MemorySegment file = Py.getAttr(sys, stream);
                if (!Py.isNone(file)) {
                    MemorySegment flush = Py.getAttr(file, "flush");
                    MemorySegment r = Py.callRaw(flush);
                    if (r.address() == 0) Py.clearError();
                    else Py.decRef(r);
                    Py.decRef(flush);
                }
                Py.decRef(file);
            }
            Py.decRef(sys);
        } finally {
            PythonInterpreter.release(gil);
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Messages from the Python glue, with Python's logging levels. */
    static void pythonLog(int level, String message) {
        if (level >= 40) LOG.error(message);
        else if (level >= 30) LOG.warn(message);
        else if (level >= 20) LOG.info(message);
        else LOG.debug(message);
    }
}
