package dev.peregrine.store;

import dev.peregrine.config.SharedStoreSettings;
import dev.peregrine.metrics.MetricsLayout;
import dev.peregrine.metrics.RequestMetrics;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.SslOptions;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.metrics.CommandLatencyRecorder;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.Delay;
import io.netty.channel.EventLoopGroup;
import io.netty.resolver.DefaultAddressResolverGroup;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.internal.ThreadExecutorMap;
import org.jboss.logging.Logger;

import java.time.Duration;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.logging.Level;

/**
 * One worker's connection to {@code --shared-store}, a Redis or Valkey server, and what the request path
 * asks of it: scripts that run atomically in one round trip.
 *
 * <p>The client is Lettuce: it runs on Netty, so its one connection lives on the worker's own I/O
 * threads ({@link SharedLoops}, {@link LoopTimer}) and a command costs the worker no thread switch and
 * no thread of its own; and it pipelines, so every request of the worker shares that one connection. A
 * blocking client (Jedis) would need a pool of threads to keep the I/O threads from waiting.
 *
 * <p>The store is a help, never a dependency: a command that fails, or does not answer within the
 * timeout, completes exceptionally and the caller serves without it. For a second after a timeout,
 * commands are not even sent, so that a store that stalls costs the requests nothing more. Commands
 * fail at once too while the connection is down (Lettuce rejects them instead of queueing): from the
 * start until the store first answers, and after a loss until Lettuce reconnects (within a second) or
 * {@link #connect}'s own retries (for a first connection) succeed. Each failure counts in
 * {@code peregrine_shared_store_errors_total}; a warning is logged at most once a minute, and one line
 * when the store answers again.
 */
public final class SharedStore implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger("peregrine");
    /** Lettuce's own lines (each reconnection attempt at INFO) say what ours say already, less clearly: errors only. */
    private static final java.util.logging.Logger LETTUCE_LOG = java.util.logging.Logger.getLogger("io.lettuce");
    private static final long WARNING_INTERVAL = TimeUnit.MINUTES.toNanos(1);
    /** How long a worker's start waits for the store: the first requests are then shared too. */
    private static final Duration FIRST_CONNECTION = Duration.ofSeconds(2);
    private static final Duration RETRY = Duration.ofSeconds(1);
    /**
     * After a command timed out, how long the request path goes without the store: a store that stalls
     * would otherwise add the whole timeout to every request, and hold their connections meanwhile.
     */
    private static final long SLOW_PAUSE = TimeUnit.SECONDS.toNanos(1);
    private static final TimedOut SLOW = new TimedOut("a command timed out within the last second: requests go without the store meanwhile");
    private static final TimedOut TIMED_OUT = new TimedOut("no answer within --shared-store-timeout");
    /** How long a command nobody waits for (storing a response, an invalidation) may take. */
    private static final Duration BACKGROUND_TIMEOUT = Duration.ofSeconds(2);
    private static final StoreScript WARM_UP = StoreScript.of("return 1");
    private static final int WARM_UP_COMMANDS = 200;

    private final SharedStoreSettings settings;
    private final long timeoutNanos;
    /** What goes through the store, for its log lines: "rate limit", "response cache" or both. */
    private final String shared;
    private final RequestMetrics metrics;
    private final EventLoopGroup loops;
    private final ClientResources resources;
    private final RedisClient client;
    private final RedisURI uri;
    private volatile StatefulRedisConnection<byte[], byte[]> connection;
    private final AtomicBoolean failing = new AtomicBoolean();
    private final AtomicLong lastWarning = new AtomicLong(System.nanoTime() - WARNING_INTERVAL);
    private final Queue<StatefulRedisPubSubConnection<byte[], byte[]>> subscriptions = new ConcurrentLinkedQueue<>();
    private volatile boolean closed;
    private final AtomicBoolean flushQueued = new AtomicBoolean();
    /** Until this {@link System#nanoTime}, commands fail at once: the store just let one time out. */
    private volatile long slowUntil = System.nanoTime();

    private SharedStore(SharedStoreSettings settings, String shared, EventLoopGroup loops, int threads, Duration timeout, RequestMetrics metrics) {
        this.settings = settings;
        this.timeoutNanos = timeout.toNanos();
        this.shared = shared;
        this.metrics = metrics;
        this.loops = loops;
        LETTUCE_LOG.setLevel(Level.SEVERE);
        resources = ClientResources.builder()
                .eventLoopGroupProvider(new SharedLoops(loops, threads))
                .eventExecutorGroup(loops)
                .timer(new LoopTimer(loops))
                .addressResolverGroup(DefaultAddressResolverGroup.INSTANCE)
                .commandLatencyRecorder(CommandLatencyRecorder.disabled())
                .reconnectDelay(Delay.exponential(Duration.ofMillis(50), RETRY, 2, TimeUnit.MILLISECONDS))
                .build();
        RedisURI.Builder address = RedisURI.builder()
                .withHost(settings.host())
                .withPort(settings.port())
                .withDatabase(settings.database())
                .withSsl(settings.tls())
                .withClientName("peregrine")
                // The hand-shake (HELLO, AUTH, SELECT) happens off the request path: it may take longer than a command.
                .withTimeout(FIRST_CONNECTION);
        if (settings.password() != null) {
            address.withAuthentication(settings.user() != null ? settings.user() : "default", settings.password().toCharArray());
        }
        uri = address.build();
        ClientOptions.Builder options = ClientOptions.builder()
                .autoReconnect(true)
                .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
                .publishOnScheduler(false)
                .timeoutOptions(TimeoutOptions.builder().timeoutCommands(false).build())
                .socketOptions(SocketOptions.builder().connectTimeout(FIRST_CONNECTION).keepAlive(true).tcpNoDelay(true).build());
        if (settings.tls()) {
            SslOptions.Builder ssl = SslOptions.builder().jdkSslProvider();
            if (settings.caFile() != null) ssl.trustManager(settings.caFile().toFile());
            options.sslOptions(ssl.build());
        }
        client = RedisClient.create(resources);
        client.setOptions(options.build());
    }

    /**
     * Connects to the store, waiting a moment for it from the calling thread (not an I/O thread); when it
     * does not answer, the worker serves without it and keeps trying.
     *
     * @param shared  what goes through it, for the log: "rate limit", "response cache"...
     * @param threads how many I/O threads {@code loops} has
     * @param timeout how long a command on the request path may wait for the store
     */
    public static SharedStore open(SharedStoreSettings settings, String shared, EventLoopGroup loops, int threads, Duration timeout,
                                   RequestMetrics metrics) {
        SharedStore store = new SharedStore(settings, shared, loops, threads, timeout, metrics);
        try {
            store.connect().get(FIRST_CONNECTION.toMillis() + 500, TimeUnit.MILLISECONDS);
        } catch (Exception e) {
            // Reported by connect's failure path; the retries go on.
        }
        return store;
    }

    /**
     * Runs {@code script} with {@code keys} and {@code args} and completes with its result (as Lettuce
     * gives {@code type}), on the thread of the store's connection. Completes exceptionally when the store
     * fails or does not answer in time; the failure is counted under {@code operation}
     * ({@link MetricsLayout#STORE_OPERATIONS}) already.
     *
     * @param requestPath a request waits for the answer: the store has --shared-store-timeout to give it,
     *                    and a timeout sends the next second's requests past the store. Otherwise (a
     *                    store, an invalidation, which nobody waits for) it has {@link #BACKGROUND_TIMEOUT}.
     */
    public <T> CompletableFuture<T> eval(StoreScript script, ScriptOutputType type, int operation, boolean requestPath,
                                         byte[][] keys, byte[]... args) {
        StatefulRedisConnection<byte[], byte[]> open = connection;
        if (open == null) {
            failed(operation, new IllegalStateException("not connected yet"));
            return CompletableFuture.failedFuture(new IllegalStateException("the shared store is not connected"));
        }
        long sent = System.nanoTime();
        if (requestPath && sent - slowUntil < 0) {
            failed(operation, SLOW);
            return CompletableFuture.failedFuture(SLOW);
        }
        CompletableFuture<T> answer = open.async().<T>evalsha(script.sha(), type, keys, args)
                .toCompletableFuture()
                .exceptionallyCompose(e -> {
                    if (!(unwrap(e) instanceof RedisNoScriptException)) return CompletableFuture.failedFuture(e);
                    CompletableFuture<T> again = open.async().<T>eval(script.body(), type, keys, args).toCompletableFuture();
                    flushSoon(open);
                    return again;
                });
        flushSoon(open);
        // A timer of our own rather than Lettuce's (one timeout per connection): the request path's and the background's differ.
        EventExecutor here = ThreadExecutorMap.currentExecutor();
        ScheduledFuture<?> timer = (here != null ? here : loops.next()).schedule(
                () -> answer.completeExceptionally(requestPath ? TIMED_OUT : new TimedOut("no answer within " + BACKGROUND_TIMEOUT)),
                requestPath ? timeoutNanos : BACKGROUND_TIMEOUT.toNanos(), TimeUnit.NANOSECONDS);
        return answer.whenComplete((result, error) -> {
            timer.cancel(false);
            if (error != null) {
                Throwable cause = unwrap(error);
                if (cause == TIMED_OUT) slowUntil = System.nanoTime() + SLOW_PAUSE;
                failed(operation, cause);
            } else {
                metrics.storeAnswered(System.nanoTime() - sent);
                answered();
            }
        });
    }

    /** {@link #eval} of a script whose result is an integer. */
    public CompletableFuture<Long> evalInteger(StoreScript script, int operation, boolean requestPath, byte[][] keys, byte[]... args) {
        return eval(script, ScriptOutputType.INTEGER, operation, requestPath, keys, args);
    }

    /**
     * Hands each message published on {@code channel} to {@code listener}, on an I/O thread, from now on:
     * over a connection of its own (a subscribed connection takes no other command), which Lettuce
     * subscribes again after each reconnection. Messages published while it is down are lost.
     */
    public void subscribe(byte[] channel, Consumer<byte[]> listener) {
        client.connectPubSubAsync(ByteArrayCodec.INSTANCE, uri).toCompletableFuture().whenComplete((made, error) -> {
            if (error != null) {
                failed(MetricsLayout.STORE_CONNECT, unwrap(error));
                retry(() -> subscribe(channel, listener));
                return;
            }
            if (closed) {
                made.closeAsync();
                return;
            }
            subscriptions.add(made);
            made.addListener(new RedisPubSubAdapter<>() {
                @Override
                public void message(byte[] from, byte[] message) {
                    listener.accept(message);
                }
            });
            made.async().subscribe(channel);
        });
    }

    /** The first connection, retried every second until it is made; Lettuce reconnects by itself after that. */
    private CompletableFuture<?> connect() {
        return client.connectAsync(ByteArrayCodec.INSTANCE, uri).toCompletableFuture().whenComplete((made, error) -> {
            if (error != null) {
                failed(MetricsLayout.STORE_CONNECT, unwrap(error));
                retry(this::connect);
                return;
            }
            if (closed) {
                made.closeAsync();
                return;
            }
            made.setAutoFlushCommands(false);
            connection = made;
            if (failing.getAndSet(false)) {
                logAnswersAgain();
            } else {
                LOG.infof("The shared store at %s answers: this worker shares its %s through it", settings.address(), shared);
            }
        });
    }

    /**
     * Loads every script of the request path into the store and runs a few hundred commands, from the
     * starting thread (it blocks), once the stages that own the scripts exist and before the first
     * request: the store then knows them all (no NOSCRIPT round trip on a first request), and Lettuce's
     * command path is loaded and compiled, which otherwise makes a new worker's first commands take tens
     * of milliseconds, longer than --shared-store-timeout gives them. Nothing when the store is not
     * connected yet.
     */
    public void warmUp() {
        StatefulRedisConnection<byte[], byte[]> made = connection;
        if (made == null || ThreadExecutorMap.currentExecutor() != null) return;
        try {
            for (StoreScript script : StoreScript.registered()) made.sync().scriptLoad(script.body());
            for (int i = 0; i < WARM_UP_COMMANDS; i++) {
                made.async().eval(WARM_UP.body(), ScriptOutputType.INTEGER, new byte[0][]);
                made.flushCommands();
            }
            made.sync().ping();
        } catch (RuntimeException e) {
            LOG.debugf("Warming up the shared store's connection: %s", describe(e));
        }
    }

    /**
     * Writes the commands issued so far once the calling I/O thread is done with what it is doing: the
     * requests one read of the sockets brought go to the store in one write, and the store reads them in
     * one go, instead of a write (and a system call on each side) per command.
     */
    private void flushSoon(StatefulRedisConnection<byte[], byte[]> open) {
        if (!flushQueued.compareAndSet(false, true)) return;
        EventExecutor here = ThreadExecutorMap.currentExecutor();
        (here != null ? here : loops.next()).execute(() -> {
            flushQueued.set(false);
            open.flushCommands();
        });
    }

    private void retry(Runnable attempt) {
        if (closed) return;
        try {
            loops.next().schedule(attempt, RETRY.toMillis(), TimeUnit.MILLISECONDS);
        } catch (RejectedExecutionException stopping) {
            // The worker's I/O threads are shutting down: so is this store.
        }
    }

    private void answered() {
        if (failing.get() && failing.compareAndSet(true, false)) logAnswersAgain();
    }

    private void logAnswersAgain() {
        LOG.infof("The shared store at %s answers again: the %s is shared once more", settings.address(), shared);
    }

    private void failed(int operation, Throwable cause) {
        metrics.storeFailed(operation);
        failing.set(true);
        long now = System.nanoTime();
        long last = lastWarning.get();
        if (now - last < WARNING_INTERVAL || !lastWarning.compareAndSet(last, now)) return;
        LOG.warnf("The shared store at %s failed (%s): until it answers again, each replica keeps its own %s "
                + "(this warning comes at most once a minute; peregrine_shared_store_errors_total counts every failure)",
                settings.address(), describe(cause), shared);
    }

    /**
     * What went wrong, for the log: the failure's own words, and those of its root cause when they say more
     * (a refused login reads "Unable to connect to …" with WRONGPASS or NOAUTH only in its cause).
     */
    private String describe(Throwable failure) {
        Throwable root = failure;
        while (root.getCause() != null && root.getCause() != root) root = root.getCause();
        String message = String.valueOf(failure.getMessage());
        if (root != failure && root.getMessage() != null && !message.contains(root.getMessage())) message += ": " + root.getMessage();
        return redacted(message);
    }

    /** A message of Lettuce or the JDK, in case one ever quotes the credentials. */
    private String redacted(String message) {
        String password = settings.password();
        return password == null || password.isEmpty() ? message : message.replace(password, "***");
    }

    private static Throwable unwrap(Throwable e) {
        while (e instanceof CompletionException && e.getCause() != null) e = e.getCause();
        return e;
    }

    /** A command the store did not answer in time; shared, without a stack trace: it says all there is. */
    private static final class TimedOut extends IllegalStateException {
        TimedOut(String message) {
            super(message, null);
        }

        @Override
        public synchronized Throwable fillInStackTrace() {
            return this;
        }
    }

    /** Closes the connection; the I/O threads it ran on are the worker's to stop. */
    @Override
    public void close() {
        closed = true;
        StatefulRedisConnection<byte[], byte[]> open = connection;
        connection = null;
        if (open != null) open.closeAsync();
        for (StatefulRedisPubSubConnection<byte[], byte[]> subscription : subscriptions) subscription.closeAsync();
        client.shutdownAsync(0, 0, TimeUnit.MILLISECONDS);
        resources.shutdown(0, 0, TimeUnit.MILLISECONDS);
    }
}
