package dev.peregrine.server;

import dev.peregrine.app.ServedApplication;
import dev.peregrine.asgi.AsgiApplication;
import dev.peregrine.cli.ServerSettings;
import dev.peregrine.cli.Version;
import dev.peregrine.http.HttpSettings;
import dev.peregrine.ops.HealthCheck;
import dev.peregrine.ops.metrics.WorkerMetrics;
import dev.peregrine.python.Py;
import dev.peregrine.python.PythonInstall;
import dev.peregrine.python.PythonInterpreter;
import dev.peregrine.http3.Http3Setup;
import dev.peregrine.tls.HttpsRedirect;
import dev.peregrine.tls.TlsContexts;
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
import sun.misc.Signal;

import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;

/**
 * One worker: the embedded interpreter with the application, the listening socket, and the
 * shutdown sequence (stop accepting, let in-flight requests finish, stop the application).
 */
public final class PeregrineServer {
    private static final Logger LOG = Logger.getLogger("peregrine");

    private final ServerSettings settings;
    private final LinkedBlockingQueue<Stop> stops = new LinkedBlockingQueue<>();
    private volatile boolean serving;

    /** Null without TLS. */
    private final TlsContexts tls;

    public PeregrineServer(ServerSettings settings, TlsContexts tls) {
        this.settings = settings;
        this.tls = tls;
    }

    /** Serves until SIGTERM or SIGINT; returns the exit status. */
    public int run() {
        applyLogLevel(settings);
        // Before anything else: nothing is served yet, so a stop during startup (an import that hangs,
        // Ctrl-C) ends the process at once; from the startup line on, a stop is a drain.
        Signal.handle(new Signal("TERM"), signal -> stopOrExit(Stop.AFTER_DELAY, 143));
        Signal.handle(new Signal("INT"), signal -> stopOrExit(Stop.AFTER_DELAY, 130));
        Signal.handle(new Signal("HUP"), SupervisorLink.supervised()
                // The supervisor decides about replacements; a hang-up of the terminal is not a request to stop.
                ? signal -> { }
                : tls != null
                // One process cannot replace itself, but it can take new certificates (renewed on disk) for new connections.
                ? signal -> tls.reload()
                : signal -> LOG.warn("SIGHUP replaces workers only when a supervisor runs them: "
                        + "start with --workers 2 or more (0 = one per CPU) or --reload"));
        WorkerMetrics metrics;
        try {
            // Before Python starts: a port that is taken is reported at once, with nothing to undo.
            metrics = WorkerMetrics.start(settings.metricsPort(), settings.metricsHost(), System.getenv());
        } catch (java.io.IOException e) {
            System.err.println("peregrine: " + e.getMessage());
            return 1;
        }
        PythonInstall install;
        PythonInterpreter interpreter;
        try {
            install = PythonInstall.locate(settings.venv(), settings.autoVenv(), System.getenv());
            List<Path> path = new ArrayList<>();
            for (Path p : settings.pythonPath()) path.add(p.toAbsolutePath());
            path.add(Path.of("").toAbsolutePath());
            interpreter = PythonInterpreter.start(install, path);
        } catch (PythonInstall.Unusable e) {
            System.err.println("peregrine: " + e.getMessage());
            return 1;
        }

        ServedApplication application;
        String protocol;
        int gil = PythonInterpreter.acquire();
        try {
            ApplicationLoader.Loaded loaded = ApplicationLoader.load(settings.target(), settings.factory(), settings.protocol().name());
            protocol = loaded.protocol();
            interpreter.define("log", args -> {
                log((int) Py.toLong(args.get(0)), Py.toJavaString(args.get(1)));
                return null;
            });
            application = protocol.equals("asgi")
                    ? new AsgiApplication(interpreter, loaded.app(), settings.rootPath(), settings.uvloop(), settings.lifespan(), metrics.recorder())
                    : new WsgiApplication(interpreter, loaded.app(), settings.rootPath(), settings.wsgiThreads(), metrics.recorder());
            interpreter.publishNativeModule();
            application.prepare();
        } catch (ApplicationLoader.LoadFailure e) {
            if (!e.traceback().isEmpty()) System.err.println(e.traceback());
            System.err.println("peregrine: " + e.getMessage());
            return 1;
        } finally {
            PythonInterpreter.release(gil);
        }

        String flavour;
        try {
            flavour = application.start();
        } catch (IllegalStateException e) {
            System.err.println("peregrine: " + e.getMessage());
            return 3;
        }

        Connections connections = new Connections(settings.maxConnections(), metrics.recorder());
        HttpSettings http = HttpSettings.from(settings);
        HealthCheck health = settings.healthCheckPath() == null ? null : new HealthCheck(settings.healthCheckPath(), application);
        boolean epoll = Epoll.isAvailable();
        EventLoopGroup acceptors = epoll ? new EpollEventLoopGroup(1) : new NioEventLoopGroup(1);
        EventLoopGroup workers = epoll ? new EpollEventLoopGroup(1) : new NioEventLoopGroup(1);
        ServerBootstrap bootstrap = new ServerBootstrap()
                .group(acceptors, workers)
                .childOption(ChannelOption.AUTO_READ, false)
                .childHandler(new ConnectionInitializer(
                        new Protocols(http, health != null ? health : application, connections, settings.http2(), settings.http2Only()),
                        connections, tls, handshakeTimeout()));
        if (settings.unix() == null) bootstrap.childOption(ChannelOption.TCP_NODELAY, true);
        // HTTP/3 first: once the TCP port answers (what readiness probes and tests watch), QUIC does too.
        Channel quic = null;
        if (settings.http3()) {
            try {
                quic = Http3Setup.bind(workers, settings.host(), settings.quicPort(), SupervisorLink.supervised(),
                        Http3Setup.quicCodec(tls.quicEngines(), http, health != null ? health : application, connections));
            } catch (Exception e) {
                System.err.println("peregrine: cannot listen on udp " + settings.host() + ":" + settings.quicPort() + " (--http3): " + e.getMessage());
                return failStart(application, acceptors, workers);
            }
        }
        Channel listener;
        Channel redirect = null;
        SupervisorLink link;
        try {
            link = SupervisorLink.connectIfSupervised(acceptors, () -> stops.add(Stop.NOW));
            listener = link == null ? Listeners.bind(bootstrap, settings) : Listeners.adopt(bootstrap, link.listenerFd(), settings.unix() != null);
        } catch (Exception e) {
            System.err.println("peregrine: cannot listen on " + (settings.unix() != null ? settings.unix() : settings.host() + ":" + settings.port())
                    + ": " + e.getMessage());
            return failStart(application, acceptors, workers, quic);
        }

        if (link == null && settings.redirectHttpPort() != null) {
            // Under a supervisor, the supervisor answers the redirect port.
            try {
                redirect = HttpsRedirect.bind(acceptors, settings);
            } catch (Exception e) {
                System.err.println("peregrine: cannot listen on " + settings.host() + ":" + settings.redirectHttpPort() + " (--redirect-http): " + e.getMessage());
                return failStart(application, acceptors, workers, listener, quic);
            }
        }

        serving = true;
        if (link == null) {
            LOG.infof("Peregrine %s serving %s (%s, %s) on %s with Python %s (%s)", Version.VERSION, settings.target(),
                    protocol.toUpperCase(), flavour, Listeners.describe(listener, settings), install.version(), install.executable());
            if (tls != null) LOG.infof("TLS by %s, ALPN %s", tls.implementation(), tls.alpn());
            if (quic != null) LOG.infof("HTTP/3 over QUIC on udp %s:%d", settings.host(), settings.quicPort());
            if (redirect != null) LOG.infof("Redirecting plain HTTP on port %d to https", settings.redirectHttpPort());
            if (metrics.url() != null) LOG.infof("Metrics on %s", metrics.url());
        } else {
            LOG.infof("Worker %d (pid %d) serving %s (%s, %s) with Python %s", link.id(), ProcessHandle.current().pid(),
                    settings.target(), protocol.toUpperCase(), flavour, install.version());
            link.ready();
        }
        Stop stop = awaitStop();
        if (stop == Stop.AFTER_DELAY && settings.drainDelayMillis() > 0) {
            if (health != null) health.fail();
            LOG.infof("Draining in %d ms: the health check fails from now on, requests are still served", settings.drainDelayMillis());
            // A second signal, or the supervisor, cuts the delay short.
            pollStop(settings.drainDelayMillis());
        }

        LOG.info("Shutting down: finishing requests in flight");
        if (health != null) health.fail();
        listener.close().syncUninterruptibly();
        if (redirect != null) redirect.close();
        connections.startDraining();
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(settings.gracefulTimeoutMillis());
        // Connections, not only requests: idle keep-alive connections close on their own within a moment,
        // and one that sends a request meanwhile gets its answer (with Connection: close) instead of a reset.
        while ((connections.inFlight() > 0 || connections.open() > 0) && System.nanoTime() < deadline) {
            sleep(10);
        }
        int cut = connections.inFlight();
        if (cut > 0) LOG.warnf("Graceful timeout: %d request(s) still in flight were cut", cut);
        connections.closeAll();
        // After the connections: QUIC connections are closed by packets sent through this socket.
        if (quic != null) quic.close().syncUninterruptibly();
        stopApplication(application);
        acceptors.shutdownGracefully(0, 100, TimeUnit.MILLISECONDS);
        workers.shutdownGracefully(0, 100, TimeUnit.MILLISECONDS);
        if (settings.unix() != null && link == null) {
            try {
                Files.deleteIfExists(settings.unix());
            } catch (java.io.IOException ignored) {
                // The socket file is left behind; the next start removes it.
            }
        }
        flushPython();
        metrics.close();
        LOG.info("Stopped");
        return cut > 0 ? 1 : 0;
    }

    /** Undoes a start that failed once the application was running: the exit status. */
    private int failStart(ServedApplication application, EventLoopGroup acceptors, EventLoopGroup workers, Channel... bound) {
        for (Channel channel : bound) {
            if (channel != null) channel.close();
        }
        stopApplication(application);
        acceptors.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
        workers.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
        return 1;
    }

    /** A TLS handshake may take as long as a request may stall. */
    private long handshakeTimeout() {
        return settings.requestTimeoutMillis() > 0 ? settings.requestTimeoutMillis() : 30_000;
    }

    private void stopOrExit(Stop stop, int status) {
        if (serving) stops.add(stop);
        else Runtime.getRuntime().halt(status);
    }

    /** How a stop was asked for: by a signal (the drain delay applies) or by the supervisor (at once). */
    private enum Stop { AFTER_DELAY, NOW }

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

    private void stopApplication(ServedApplication application) {
        try {
            application.stop(settings.gracefulTimeoutMillis() + 5000);
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
    private static void log(int level, String message) {
        if (level >= 40) LOG.error(message);
        else if (level >= 30) LOG.warn(message);
        else if (level >= 20) LOG.info(message);
        else LOG.debug(message);
    }

    /** --log-level, for this process's own lines: a worker's, or the supervisor's, which calls this too. */
    public static void applyLogLevel(ServerSettings settings) {
        Level level = switch (settings.logLevel()) {
            case debug -> Level.FINE;
            case info -> Level.INFO;
            case warning -> Level.WARNING;
            case error -> Level.SEVERE;
            case silent -> Level.OFF;
        };
        java.util.logging.Logger.getLogger("peregrine").setLevel(level);
    }
}
