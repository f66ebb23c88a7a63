package dev.peregrine.server;

import dev.peregrine.app.ServedApplication;
import dev.peregrine.asgi.AsgiApplication;
import dev.peregrine.cli.ServerSettings;
import dev.peregrine.cli.Version;
import dev.peregrine.http1.Http1Initializer;
import dev.peregrine.http1.Http1Settings;
import dev.peregrine.python.Py;
import dev.peregrine.python.PythonInstall;
import dev.peregrine.python.PythonInterpreter;
import dev.peregrine.wsgi.WsgiApplication;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.unix.DomainSocketAddress;
import org.jboss.logging.Logger;
import sun.misc.Signal;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;

/**
 * One worker: the embedded interpreter with the application, the listening socket, and the
 * shutdown sequence (stop accepting, let in-flight requests finish, stop the application).
 */
public final class PeregrineServer {
    private static final Logger LOG = Logger.getLogger("peregrine");

    private final ServerSettings settings;
    private final CountDownLatch shutdown = new CountDownLatch(1);

    public PeregrineServer(ServerSettings settings) {
        this.settings = settings;
    }

    /** Serves until SIGTERM or SIGINT; returns the exit status. */
    public int run() {
        applyLogLevel();
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
                    ? new AsgiApplication(interpreter, loaded.app(), settings.rootPath(), settings.uvloop(), settings.lifespan())
                    : new WsgiApplication(interpreter, loaded.app(), settings.rootPath(), settings.wsgiThreads());
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

        Connections connections = new Connections(settings.maxConnections());
        Http1Settings http1 = Http1Settings.from(settings);
        boolean epoll = Epoll.isAvailable();
        EventLoopGroup acceptors = epoll ? new EpollEventLoopGroup(1) : new NioEventLoopGroup(1);
        EventLoopGroup workers = epoll ? new EpollEventLoopGroup(1) : new NioEventLoopGroup(1);
        Channel listener;
        String address;
        try {
            ServerBootstrap bootstrap = new ServerBootstrap()
                    .group(acceptors, workers)
                    .option(ChannelOption.SO_BACKLOG, settings.backlog())
                    .option(ChannelOption.SO_REUSEADDR, true)
                    .childOption(ChannelOption.AUTO_READ, false)
                    .childHandler(new Http1Initializer(http1, application, connections));
            if (settings.unix() != null) {
                if (!epoll) throw new IllegalStateException("--unix needs the epoll transport, which is not available here");
                Files.deleteIfExists(settings.unix());
                listener = bootstrap.channel(EpollServerDomainSocketChannel.class)
                        .bind(new DomainSocketAddress(settings.unix().toFile())).sync().channel();
                address = "unix:" + settings.unix();
            } else {
                bootstrap.channel(epoll ? EpollServerSocketChannel.class : NioServerSocketChannel.class)
                        .childOption(ChannelOption.TCP_NODELAY, true);
                listener = bootstrap.bind(settings.host(), settings.port()).sync().channel();
                InetSocketAddress bound = (InetSocketAddress) listener.localAddress();
                String host = settings.host().contains(":") ? "[" + settings.host() + "]" : settings.host();
                address = "http://" + host + ":" + bound.getPort();
            }
        } catch (Exception e) {
            System.err.println("peregrine: cannot listen on " + (settings.unix() != null ? settings.unix() : settings.host() + ":" + settings.port())
                    + ": " + e.getMessage());
            stopApplication(application);
            acceptors.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
            workers.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
            return 1;
        }

        LOG.infof("Peregrine %s serving %s (%s, %s) on %s with Python %s (%s)", Version.VERSION, settings.target(),
                protocol.toUpperCase(), flavour, address, install.version(), install.executable());
        Signal.handle(new Signal("TERM"), signal -> shutdown.countDown());
        Signal.handle(new Signal("INT"), signal -> shutdown.countDown());
        awaitShutdown();

        LOG.info("Shutting down: finishing requests in flight");
        listener.close().syncUninterruptibly();
        connections.startDraining();
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(settings.gracefulTimeoutMillis());
        while (connections.inFlight() > 0 && System.nanoTime() < deadline) {
            sleep(10);
        }
        int cut = connections.inFlight();
        if (cut > 0) LOG.warnf("Graceful timeout: %d request(s) still in flight were cut", cut);
        connections.closeAll();
        stopApplication(application);
        acceptors.shutdownGracefully(0, 100, TimeUnit.MILLISECONDS);
        workers.shutdownGracefully(0, 100, TimeUnit.MILLISECONDS);
        if (settings.unix() != null) {
            try {
                Files.deleteIfExists(settings.unix());
            } catch (java.io.IOException ignored) {
                // The socket file is left behind; the next start removes it.
            }
        }
        flushPython();
        LOG.info("Stopped");
        return cut > 0 ? 1 : 0;
    }

    private void awaitShutdown() {
        while (true) {
            try {
                shutdown.await();
                return;
            } catch (InterruptedException ignored) {
                // Only a signal ends the server.
            }
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

    private void applyLogLevel() {
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
