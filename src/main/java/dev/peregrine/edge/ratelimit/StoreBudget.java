package dev.peregrine.edge.ratelimit;

import dev.peregrine.config.RateLimitSettings;
import dev.peregrine.metrics.MetricsLayout;
import dev.peregrine.store.SharedStore;
import dev.peregrine.store.StoreScript;
import io.lettuce.core.ScriptOutputType;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.internal.ThreadExecutorMap;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * The rate limit's budgets in {@code --shared-store}, spent by every replica: the GCRA of
 * {@link ClientTable}, run by the store as one script, so that two replicas charging one client at once
 * are serialised by the store.
 *
 * <p>A client costs the store far fewer round trips than requests, in two ways, neither of which lets
 * it past its budget:
 * <ul>
 *   <li>One command per client at a time, per worker: the requests of a client that arrive while its
 *       command is out wait for the answer, then are charged together by the next command, which lets
 *       through as many of them as the budget allows, in order.</li>
 *   <li>A lease: a client with much of its budget left is charged, in the same command, for up to
 *       {@value #MAX_LEASE} more requests (an eighth of what it has left at most), which this worker
 *       then lets through without asking, for {@value #LEASE_MILLIS} ms; once half of it is spent, the
 *       next is asked for meanwhile, so that a fast client does not wait for the store. What a client
 *       has not used of a lease by then is lost to it: at most an eighth of a budget it was far from
 *       spending. A client near its limit gets no lease, so the limit itself is exact across replicas.</li>
 * </ul>
 *
 * <p>The clock is the store's ({@code TIME}), in microseconds: the replicas' own clocks never meet. A
 * client's key, {@code peregrine:rl:} and its {@link ClientKey} in hex, holds its TAT and expires once
 * its budget is full again, so the store keeps only clients that sent within the last refill period.
 * Lua's numbers are doubles, exact to a quarter of a microsecond at today's Unix time: the interval is
 * passed as a fraction of microseconds and the TAT stored with all 17 digits, so a sustained rate
 * drifts by nothing a client could notice up to some million requests a second.
 */
final class StoreBudget {
    /**
     * Charges ARGV[3] requests, and a lease of up to ARGV[4] more when the budget has room for eight times
     * that; answers how many it let through (lease included), then the microseconds until the next one would be.
     */
    private static final StoreScript GCRA = StoreScript.of("""
            local time = redis.call('TIME')
            local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
            local interval = tonumber(ARGV[1])
            local tolerance = tonumber(ARGV[2])
            local wanted = tonumber(ARGV[3])
            local tat = tonumber(redis.call('GET', KEYS[1])) or now
            if tat < now then tat = now end
            local allowed = 0
            if tat - now <= tolerance then
              local available = math.floor((tolerance - (tat - now)) / interval) + 1
              allowed = math.min(wanted, available)
              allowed = allowed + math.min(tonumber(ARGV[4]), math.floor((available - allowed) / 8))
              tat = tat + allowed * interval
              redis.call('SET', KEYS[1], string.format('%.17g', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
            end
            return {allowed, math.max(0, math.ceil(tat - now - tolerance))}
            """);
    private static final String PREFIX = "peregrine:rl:";
    /** The most requests one command charges ahead; a client sending faster costs a round trip per this many. */
    static final int MAX_LEASE = 64;
    /** How long a lease lasts: long enough for a fast client to use, short enough to forget an idle one soon. */
    static final long LEASE_MILLIS = 1_000;
    private static final byte[] MAX_LEASE_ARG = ascii(Integer.toString(MAX_LEASE));

    private final SharedStore store;
    private final byte[] intervalMicros;
    private final byte[] toleranceMicros;
    /** The clients with a command out or a lease, and the requests waiting for the next command. */
    private final ConcurrentHashMap<Long, Client> clients = new ConcurrentHashMap<>();

    StoreBudget(SharedStore store, RateLimitSettings settings) {
        this.store = store;
        double interval = settings.periodSeconds() * 1e6 / settings.requests();
        this.intervalMicros = ascii(Double.toString(interval));
        this.toleranceMicros = ascii(Double.toString((settings.burst() - 1) * interval));
    }

    /**
     * Charges one request of {@code key}: completes with 0 when it may go on (at once when the client holds a
     * lease), or minus the nanoseconds until the client may send again; exceptionally when the store did not
     * answer in time.
     */
    CompletableFuture<Long> admit(long key) {
        CompletableFuture<Long> outcome = new CompletableFuture<>();
        while (true) {
            Client client = clients.get(key);
            if (client == null) {
                Client fresh = new Client();
                fresh.asking = true;
                if (clients.putIfAbsent(key, fresh) != null) continue;
                charge(key, fresh, List.of(outcome));
                return outcome;
            }
            boolean fromLease, refill = false;
            synchronized (client) {
                if (client.forgotten) continue;
                fromLease = client.leased > 0 && System.nanoTime() - client.leaseEnds < 0;
                if (fromLease) {
                    client.leased--;
                    // Half the lease spent: the next is asked for now, so that the client never waits for it.
                    refill = !client.asking && client.leased < MAX_LEASE / 2;
                } else if (client.asking) {
                    client.waiting.add(outcome);
                    return outcome;
                } else {
                    client.leased = 0;
                }
                if (refill || !fromLease) client.asking = true;
            }
            if (fromLease) {
                outcome.complete(0L);
                if (refill) charge(key, client, List.of());
            } else {
                charge(key, client, List.of(outcome));
            }
            return outcome;
        }
    }

    private void charge(long key, Client client, List<CompletableFuture<Long>> requests) {
        byte[][] keys = {ascii(PREFIX + Long.toHexString(key))};
        store.<List<Long>>eval(GCRA, ScriptOutputType.MULTI, MetricsLayout.STORE_RATE_LIMIT, true, keys, intervalMicros, toleranceMicros,
                        ascii(Integer.toString(requests.size())), MAX_LEASE_ARG)
                .whenComplete((answer, failure) -> landed(key, client, requests, answer, failure));
    }

    private void landed(long key, Client client, List<CompletableFuture<Long>> requests, List<Long> answer, Throwable failure) {
        long lease = 0;
        if (failure != null) {
            for (CompletableFuture<Long> request : requests) request.completeExceptionally(failure);
        } else {
            long allowed = answer.get(0), waitNanos = answer.get(1) * 1_000;
            for (int i = 0; i < requests.size(); i++) requests.get(i).complete(i < allowed ? 0L : -Math.max(1, waitNanos));
            lease = Math.max(0, allowed - requests.size());
        }
        List<CompletableFuture<Long>> next;
        synchronized (client) {
            // Added to what is left of the last lease, whose successor is asked for before it runs out.
            client.leased = (int) Math.min(Integer.MAX_VALUE, client.leased + lease);
            client.leaseEnds = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(LEASE_MILLIS);
            next = client.waiting;
            client.waiting = new ArrayList<>();
            int fromLease = (int) Math.min(next.size(), client.leased);
            for (int i = 0; i < fromLease; i++) next.get(i).complete(0L);
            client.leased -= fromLease;
            next = next.subList(fromLease, next.size());
            if (next.isEmpty()) {
                client.asking = false;
                if (client.leased == 0) {
                    forget(key, client);
                    return;
                }
            }
        }
        if (next.isEmpty()) {
            forgetLater(key, client);
            return;
        }
        charge(key, client, new ArrayList<>(next));
    }

    /** Drops a client whose lease ran out unused, once it has, unless it asked again meanwhile. */
    private void forgetLater(long key, Client client) {
        EventExecutor loop = ThreadExecutorMap.currentExecutor();
        if (loop == null) return;
        loop.schedule(() -> {
            synchronized (client) {
                if (!client.asking && System.nanoTime() - client.leaseEnds >= 0) forget(key, client);
            }
        }, LEASE_MILLIS, TimeUnit.MILLISECONDS);
    }

    /** Under the client's lock. */
    private void forget(long key, Client client) {
        client.forgotten = true;
        clients.remove(key, client);
    }

    /** What this worker knows of a client between its requests. Guarded by its own lock. */
    private static final class Client {
        /** A command is out for it. */
        boolean asking;
        /** Requests that came while it was, for the next command. */
        List<CompletableFuture<Long>> waiting = new ArrayList<>();
        /** Requests already paid for in the store, until {@link #leaseEnds} ({@link System#nanoTime}). */
        int leased;
        long leaseEnds;
        /** Removed from the map: a request that found it there looks again. */
        boolean forgotten;
    }

    private static byte[] ascii(String text) {
        return text.getBytes(StandardCharsets.US_ASCII);
    }
}
