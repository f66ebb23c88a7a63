package dev.peregrine.workers;

import dev.peregrine.config.ServerSettings;
import dev.peregrine.config.Version;
import dev.peregrine.python.PythonInstall;
import dev.peregrine.shared.ConnectionShares;
import dev.peregrine.shared.SharedLayout;
import dev.peregrine.shared.SharedRegion;
import dev.peregrine.tls.HttpsRedirect;
import dev.peregrine.tls.RetryTokens;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.unix.UnixChannel;
import org.jboss.logging.Logger;
import sun.misc.Signal;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The parent process when there are several workers (or --reload): it owns the listening socket and
 * runs no Python. It starts the workers, hands each the socket, replaces one that dies, replaces all
 * of them one at a time on SIGHUP or a source change, and forwards SIGTERM/SIGINT.
 *
 * <p>All decisions happen on one thread reading {@link Event}s, so the state needs no locks: signals,
 * process exits, readiness reports and file changes only post events.
 */
public final class Supervisor {
    private static final Logger LOG = Logger.getLogger("peregrine");
    /** A worker that dies younger than this counts as failing at startup, and its restarts back off. */
    private static final double STARTUP_FAILURE_SECONDS = 10;
    private static final long MAX_BACKOFF_MILLIS = 30_000;

    private sealed interface Event {}
    private record Stop(String signal) implements Event {}
    private record Replace(String reason) implements Event {}
    private record Connected(long pid, Channel control) implements Event {}
    private record Ready(long pid) implements Event {}
    private record Exited(WorkerProcess worker, int status) implements Event {}
    private record Respawn(int position) implements Event {}

    private final ServerSettings settings;
    private final LinkedBlockingQueue<Event> events = new LinkedBlockingQueue<>();
    private final ScheduledExecutorService timers = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "supervisor-timer");
        t.setDaemon(true);
        return t;
    });
    private final Map<Long, WorkerProcess> byPid = new HashMap<>();
    private final Set<WorkerProcess> live = new LinkedHashSet<>();
    private final Map<Long, Channel> earlyControl = new HashMap<>();
    private final Set<Long> earlyReady = new LinkedHashSet<>();
    private WorkerProcess[] serving;
    private int[] failures;
    /** The position of the next worker of the first start, which starts once an earlier one is ready. */
    private int nextFirstStart;
    private String controlPath;
    private SupervisorMetrics metrics;
    /** Where the workers count their connections (ConnectionShares), and which lines are free; null with one worker process. */
    private SharedRegion shares;
    private final Deque<Integer> freeShareSlots = new ArrayDeque<>();
    private final Map<Long, Integer> shareSlotByPid = new HashMap<>();
    /** What every worker's environment gets: the shared memory's file, and the key of QUIC's Retry tokens, so that any worker takes the token another minted. */
    private final Map<String, String> sharedEnvironment = new HashMap<>(Map.of(RetryTokens.KEY_ENV, RetryTokens.newEncodedKey()));

    /** The rolling replacement under way: positions still to replace, and the replacement starting now. */
    private final Deque<Integer> toReplace = new ArrayDeque<>();
    private WorkerProcess incoming;
    private boolean replaceAgain;

    private boolean started;
    private boolean stopping;
    /** The socket clients connect to; this process's copy is closed the moment a shutdown begins. */
    private Channel listener;
    private int exitStatus;

    /** {@code workerEnvironment}: what else each worker's environment gets, such as the options it starts from. */
    public Supervisor(ServerSettings settings, Map<String, String> workerEnvironment) {
        this.settings = settings;
        sharedEnvironment.putAll(workerEnvironment);
    }

    public int run() {
        if (!Epoll.isAvailable()) {
            System.err.println("peregrine: --workers and --reload need the epoll transport (Linux), which is not available here");
            return 1;
        }
        PythonInstall python = locatePython();
        if (settings.workers().freeThreaded() && python != null) {
            // Refused here, before any worker starts, with the line and status a single process gives.
            String refusal = python.freeThreadingRefusal();
            if (refusal != null) {
                System.err.println("peregrine: " + refusal);
                return 2;
            }
        }
        int count = settings.workers().processes();
        // What start() set up, undone last first: when a step fails, and at the end of a normal run alike.
        Deque<Runnable> undo = new ArrayDeque<>();
        try {
            start(count, undo);
        } catch (CannotStart e) {
            System.err.println("peregrine: " + e.getMessage());
            undo.forEach(Runnable::run);
            return 1;
        }

        Signal.handle(new Signal("TERM"), s -> events.add(new Stop("SIGTERM")));
        Signal.handle(new Signal("INT"), s -> events.add(new Stop("SIGINT")));
        Signal.handle(new Signal("HUP"), s -> events.add(new Replace("SIGHUP")));
        SourceWatcher watcher = settings.workers().reload() ? SourceWatcher.start(watchedDirectories(), () -> events.add(new Replace("a source change"))) : null;

        String address = Listeners.describe(listener, settings);
        serving = new WorkerProcess[count];
        failures = new int[count];
        // No more workers start at once than there are CPUs to start them: a start is bound by CPU, so
        // more at once would only delay the first to serve (4 on 2 CPUs all served after 6 to 7 s).
        nextFirstStart = Math.min(count, Runtime.getRuntime().availableProcessors());
        for (int i = 0; i < nextFirstStart && !stopping; i++) serving[i] = spawn(i);
        loop(address, count);

        if (watcher != null) watcher.close();
        timers.shutdownNow();
        undo.forEach(Runnable::run);
        LOG.info("Stopped");
        return exitStatus;
    }

    /**
     * Finds the interpreter the workers will embed, and hands it to the workers started from now on, which
     * then skip finding it themselves (a Python process each). Null when it cannot be found or used: each
     * worker then looks for itself and says why.
     */
    private PythonInstall locatePython() {
        try {
            PythonInstall python = PythonInstall.locate(settings.python().venv(), settings.python().autoVenv(), System.getenv());
            sharedEnvironment.put(PythonInstall.LOCATED_ENV, python.encode());
            return python;
        } catch (PythonInstall.Unusable e) {
            sharedEnvironment.remove(PythonInstall.LOCATED_ENV);
            return null;
        }
    }

    /** A step of the supervisor's start failed: the message says which and why. */
    private static final class CannotStart extends Exception {
        CannotStart(String message) {
            super(message, null, false, false);
        }
    }

    /**
     * Binds the listening socket, opens the workers' control socket, the metrics port and the redirect
     * port, in that order, pushing onto {@code undo} how to release each. The redirect port stays open
     * through a drain: this process answers it itself.
     */
    private void start(int count, Deque<Runnable> undo) throws CannotStart {
        EventLoopGroup group = new EpollEventLoopGroup(1);
        undo.push(() -> group.shutdownGracefully(0, 100, TimeUnit.MILLISECONDS));
        try {
            // The supervisor never accepts: its copy of the socket only keeps the socket, and its queue, alive.
            listener = Listeners.bind(new ServerBootstrap().group(group)
                    .option(ChannelOption.AUTO_READ, false)
                    .childHandler(new ChannelInboundHandlerAdapter()), settings);
        } catch (Exception e) {
            throw new CannotStart("cannot listen on " + (settings.listen().unix() != null ? settings.listen().unix()
                    : settings.listen().host() + ":" + settings.listen().port()) + ": " + e.getMessage());
        }
        undo.push(() -> {
            listener.close().syncUninterruptibly();
            if (settings.listen().unix() != null) deleteQuietly(settings.listen().unix());
        });
        ControlServer control;
        try {
            Path controlDir = Files.createTempDirectory("peregrine-");
            controlPath = controlDir.resolve("control.sock").toString();
            undo.push(() -> {
                deleteQuietly(Path.of(controlPath));
                deleteQuietly(controlDir);
            });
            int fd = ((UnixChannel) listener).fd().intValue();
            control = new ControlServer(group, Path.of(controlPath), fd, listener::isOpen,
                    (pid, channel) -> events.add(new Connected(pid, channel)), pid -> events.add(new Ready(pid)));
        } catch (Exception e) {
            throw new CannotStart("cannot open the workers' control socket: " + e.getMessage());
        }
        undo.push(control::close);
        try {
            metrics = SupervisorMetrics.start(settings, count);
        } catch (IOException e) {
            throw new CannotStart(e.getMessage());
        }
        if (metrics != null) undo.push(metrics::close); // null without --metrics-port
        if (count > 1) {
            Path file = SharedRegion.directory().resolve("peregrine-" + ProcessHandle.current().pid() + ".shares");
            int slots = ConnectionShares.slotsFor(count);
            try {
                shares = ConnectionShares.create(file, slots);
            } catch (IOException e) {
                throw new CannotStart("cannot create the workers' connection counts " + file + ": " + e.getMessage());
            }
            undo.push(() -> deleteQuietly(file));
            sharedEnvironment.put(ConnectionShares.FILE_ENV, file.toString());
            for (int i = 0; i < slots; i++) freeShareSlots.add(i);
        }
        SharedLayout layout = SharedLayout.of(settings.edge());
        if (layout != null) {
            // This process only creates the area: the file keeps it while workers come and go, and dies with this process.
            Path file = SharedRegion.directory().resolve("peregrine-" + ProcessHandle.current().pid() + ".shared");
            try {
                layout.create(file);
            } catch (IOException e) {
                throw new CannotStart("cannot create the workers' shared memory " + file + ": " + e.getMessage());
            }
            undo.push(() -> deleteQuietly(file));
            sharedEnvironment.put(SharedLayout.FILE_ENV, file.toString());
        }
        if (settings.tls().redirectHttpPort() == null) return;
        // The redirect port needs no application: the supervisor answers it, for all workers.
        Channel redirect;
        try {
            redirect = HttpsRedirect.bind(group, settings);
        } catch (Exception e) {
            throw new CannotStart("cannot listen on " + settings.listen().host() + ":" + settings.tls().redirectHttpPort()
                    + " (--redirect-http): " + e.getMessage());
        }
        undo.push(redirect::close);
    }

    private void loop(String address, int count) {
        long killAt = Long.MAX_VALUE;
        while (!(stopping && live.isEmpty())) {
            Event event;
            try {
                event = killAt == Long.MAX_VALUE ? events.take() : events.poll(Math.max(1, killAt - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                continue;
            }
            if (event == null) {
                for (WorkerProcess w : live) {
                    LOG.warnf("%s did not stop in time: killed", w.name());
                    w.kill();
                }
                killAt = Long.MAX_VALUE;
                exitStatus = 1;
                continue;
            }
            switch (event) {
                case Stop stop -> {
                    if (stopping) {
                        if (stop.signal().startsWith("SIG")) LOG.infof("received %s: already stopping, %d worker(s) still running", stop.signal(), live.size());
                    } else {
                        LOG.infof("%s%s: stopping %d worker(s)", stop.signal().startsWith("SIG") ? "received " : "", stop.signal(), live.size());
                        beginStopping();
                        toReplace.clear();
                        for (WorkerProcess w : live) w.terminate();
                        killAt = System.currentTimeMillis() + settings.workers().drainDelayMillis() + settings.limits().gracefulTimeoutMillis() + 15_000;
                    }
                }
                case Replace replace -> replaceAll(replace.reason());
                case Connected connected -> {
                    WorkerProcess w = byPid.get(connected.pid());
                    if (w != null) w.control = connected.control();
                    else earlyControl.put(connected.pid(), connected.control());
                }
                case Ready ready -> {
                    WorkerProcess w = byPid.get(ready.pid());
                    if (w == null) earlyReady.add(ready.pid());
                    else onReady(w, address, count);
                }
                case Exited exited -> onExit(exited.worker(), exited.status());
                case Respawn respawn -> {
                    if (!stopping) serving[respawn.position()] = spawn(respawn.position());
                }
            }
        }
    }

    /**
     * A shutdown (never a replacement) gives up this process's copy of the listening socket at once:
     * the workers hold theirs as long as they accept (through their drain delay), and once the last
     * copy is closed the kernel refuses new connections instead of queueing them for nobody. The
     * redirect port stays: this process answers it itself.
     */
    private void beginStopping() {
        stopping = true;
        listener.close();
    }

    private WorkerProcess spawn(int position) {
        WorkerProcess w;
        int slot = metrics == null ? -1 : metrics.takeSlot(position);
        // Without a free line (replacements piling up), a worker accepts without regard to the share.
        Integer shareSlot = freeShareSlots.poll();
        try {
            Map<String, String> environment = new HashMap<>(sharedEnvironment);
            if (metrics != null) environment.putAll(metrics.environment(slot));
            if (shareSlot != null) environment.put(ConnectionShares.SLOT_ENV, Integer.toString(shareSlot));
            w = WorkerProcess.start(position, controlPath, environment, slot);
        } catch (IOException e) {
            if (metrics != null) metrics.releaseSlot(slot);
            if (shareSlot != null) freeShareSlots.add(shareSlot);
            LOG.errorf("Cannot start worker %d: %s", position + 1, e.getMessage());
            events.add(new Stop("worker start failure"));
            exitStatus = 1;
            return null;
        }
        byPid.put(w.pid(), w);
        if (shareSlot != null) shareSlotByPid.put(w.pid(), shareSlot);
        live.add(w);
        w.process.onExit().thenAccept(p -> events.add(new Exited(w, p.exitValue())));
        Channel early = earlyControl.remove(w.pid());
        if (early != null) w.control = early;
        if (earlyReady.remove(w.pid())) events.add(new Ready(w.pid()));
        if (metrics != null) metrics.started();
        LOG.debugf("Started %s", w.name());
        return w;
    }

    private void onReady(WorkerProcess w, String address, int count) {
        w.ready = true;
        if (stopping) return;
        if (w == incoming) {
            WorkerProcess old = serving[w.position];
            serving[w.position] = w;
            incoming = null;
            if (old != null) {
                LOG.infof("Replaced %s with %s", old.name(), w.name());
                old.drain();
            }
            replaceNext();
            return;
        }
        LOG.debugf("%s ready", w.name());
        if (nextFirstStart < count) {
            serving[nextFirstStart] = spawn(nextFirstStart);
            nextFirstStart++;
        }
        if (!started && Stream.of(serving).allMatch(s -> s != null && s.ready)) {
            started = true;
            String pids = Stream.of(serving).map(s -> Long.toString(s.pid())).reduce((a, b) -> a + ", " + b).orElse("");
            LOG.infof("Peregrine %s serving %s on %s with %s%s", Version.VERSION, settings.app().target(), address,
                    settings.workers().freeThreaded()
                            ? settings.workers().workers() + " worker threads in one process (pid " + pids + ")"
                            : count + " workers (pids " + pids + ")",
                    settings.workers().reload() ? ", reloading on source changes" : "");
            if (metrics != null) LOG.infof("Metrics on %s", metrics.url());
        }
    }

    private void onExit(WorkerProcess w, int status) {
        live.remove(w);
        byPid.remove(w.pid());
        Integer shareSlot = shareSlotByPid.remove(w.pid());
        if (shareSlot != null) {
            // A killed worker could not clear its own line; a line is reused only once cleared.
            ConnectionShares.clear(shares, shareSlot);
            freeShareSlots.add(shareSlot);
        }
        if (metrics != null) metrics.exited(w.metricsSlot);
        if (stopping) {
            if (status != 0 && w.ready) exitStatus = 1;
            LOG.debugf("%s exited with status %d", w.name(), status);
            return;
        }
        if (w == incoming) {
            incoming = null;
            toReplace.clear();
            LOG.errorf("The replacement %s exited with status %d before it was ready: the running workers keep serving", w.name(), status);
            replaceNext();
            return;
        }
        if (serving[w.position] != w) {
            LOG.debugf("%s exited with status %d after draining", w.name(), status);
            return;
        }
        if (!started && !w.ready && (status == 1 || status == 2 || status == 3)) {
            // The worker's own verdict that the application cannot start (import error, --protocol that
            // contradicts the application, failed lifespan startup, no usable Python): a restart loop
            // would only repeat the traceback.
            LOG.errorf("%s exited with status %d during startup: stopping", w.name(), status);
            exitStatus = status == 0 ? 1 : status;
            beginStopping();
            for (WorkerProcess other : live) other.terminate();
            return;
        }
        int position = w.position;
        serving[position] = null;
        if (metrics != null) metrics.restarted();
        long delay = 0;
        if (w.ageSeconds() < STARTUP_FAILURE_SECONDS) {
            // The first early death is replaced at once like any other: one kill or crash soon after a
            // start is no loop yet, and the new worker's start-up is already the whole of the wait.
            failures[position]++;
            if (failures[position] > 1) delay = Math.min(MAX_BACKOFF_MILLIS, 500L << Math.min(16, failures[position] - 2));
        } else {
            failures[position] = 0;
        }
        LOG.errorf("%s exited unexpectedly with status %d: starting a new one%s", w.name(), status,
                delay > 0 ? " in " + delay + " ms" : "");
        if (delay == 0) serving[position] = spawn(position);
        else timers.schedule(() -> events.add(new Respawn(position)), delay, TimeUnit.MILLISECONDS);
    }

    /** Starts replacing every worker, one at a time; a request during a round queues one more round. */
    private void replaceAll(String reason) {
        String said = reason.startsWith("SIG") ? "received " + reason : reason;
        if (stopping) {
            if (reason.startsWith("SIG")) LOG.infof("%s: ignored, the server is stopping", said);
            return;
        }
        if (incoming != null || !toReplace.isEmpty()) {
            if (!replaceAgain) LOG.infof("%s: a replacement is under way; another round follows it", said);
            else LOG.infof("%s: a replacement is under way and another round is already due", said);
            replaceAgain = true;
            return;
        }
        // A position with no worker (one of the first start still to come, or one waiting out its back-off)
        // gets a worker of the new code when its turn comes.
        for (int i = 0; i < serving.length; i++) if (serving[i] != null) toReplace.add(i);
        LOG.infof("%s: replacing %d worker(s) one at a time", said, toReplace.size());
        // The replacements embed the interpreter as it is now: a virtualenv may have been rebuilt since.
        locatePython();
        replaceNext();
    }

    private void replaceNext() {
        if (stopping) return;
        Integer position = toReplace.poll();
        if (position == null) {
            if (replaceAgain) {
                replaceAgain = false;
                replaceAll("another reload request");
            }
            return;
        }
        incoming = spawn(position);
    }

    private List<Path> watchedDirectories() {
        List<Path> dirs = new ArrayList<>();
        dirs.add(Path.of("").toAbsolutePath());
        for (Path p : settings.python().pythonPath()) dirs.add(p.toAbsolutePath());
        return dirs;
    }

    private static void deleteQuietly(Path path) {
        if (path == null) return;
        try {
            Files.deleteIfExists(path);
        } catch (IOException ignored) {
            // A leftover in the temporary directory is harmless.
        }
    }
}
