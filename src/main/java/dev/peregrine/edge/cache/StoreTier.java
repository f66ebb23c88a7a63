package dev.peregrine.edge.cache;

import dev.peregrine.edge.ContentCoding;
import dev.peregrine.metrics.MetricsLayout;
import dev.peregrine.store.SharedStore;
import dev.peregrine.store.StoreScript;
import io.lettuce.core.ScriptOutputType;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.function.LongConsumer;

/**
 * The response cache's second tier, in {@code --shared-store}, behind the shared memory of each host:
 * what one replica stored, another finds on its own miss, copies into its shared memory and serves.
 *
 * <p>In the store, a URL (the 64-bit hash of {@link CacheRequest}'s key) is one hash,
 * {@code peregrine:c:HASH}, with a field per stored variant (the slot variant of {@link CacheEntry}:
 * the Vary values' hash and the coding) whose value is the entry's freshness deadline and receipt time
 * (wall-clock milliseconds, eight bytes each) followed by its ring record; the hash expires with its
 * freshest entry. A fill in progress on some replica is {@code peregrine:cl:HASH}, holding that
 * worker's token, with the same 5-second expiry as a fill marker in shared memory, or {@code pass} for
 * the 10 seconds of a hit-for-miss marker after a fill that stored nothing. Invalidation deletes
 * the hash and publishes the URL's hash on {@code peregrine:ci}, on which every worker listens to drop
 * its host's copy.
 *
 * <p>Each operation is one script, so that one round trip both reads and claims, or both stores and
 * gives back the claim. The replicas' wall clocks are compared with each other here, as freshness and
 * Age are wall-clock times: hosts kept by NTP agree to far less than a second.
 */
final class StoreTier {
    /**
     * Looks up a URL's entries; with ARGV[3] = 1 also claims its fill when nobody holds it. The first
     * element says who fills: 0 nobody, 1 this worker now, 2 another worker, 3 nobody should (the last
     * fill stored nothing: a hit-for-miss marker).
     */
    private static final StoreScript LOOKUP = StoreScript.of("""
            local holder = redis.call('GET', KEYS[2])
            local state = 0
            if holder == 'pass' then
              state = 3
            elseif holder then
              state = 2
            elseif ARGV[3] == '1' then
              redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
              state = 1
            end
            local entries = redis.call('HGETALL', KEYS[1])
            table.insert(entries, 1, state)
            return entries
            """);
    /**
     * Stores one variant (dropping the fields in ARGV[5..]: a new identity response's old codings); the
     * key's fill ends, ours or a hit-for-miss marker, as a storable answer ends one in shared memory.
     */
    private static final StoreScript PUT = StoreScript.of("""
            if #ARGV > 4 then redis.call('HDEL', KEYS[1], unpack(ARGV, 5)) end
            redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
            if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[4]) then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
            local holder = redis.call('GET', KEYS[2])
            if holder == ARGV[1] or holder == 'pass' then redis.call('DEL', KEYS[2]) end
            return 1
            """);
    /** Ends our fill: with ARGV[2] > 0, it becomes a hit-for-miss marker for that many milliseconds. */
    private static final StoreScript GIVE_BACK = StoreScript.of("""
            if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
            if ARGV[2] == '0' then return redis.call('DEL', KEYS[1]) end
            redis.call('SET', KEYS[1], 'pass', 'PX', ARGV[2])
            return 1
            """);
    private static final StoreScript INVALIDATE = StoreScript.of("""
            redis.call('DEL', KEYS[1])
            return redis.call('PUBLISH', ARGV[1], ARGV[2])
            """);
    private static final byte[] CHANNEL = ascii("peregrine:ci");
    private static final int TIMES = 2 * Long.BYTES;

    /** One stored variant of a URL. */
    record Stored(int variant, long until, long received, byte[] record) {}

    /** What the store holds for a URL, and who fills it. */
    record Answer(int state, List<Stored> entries) {
        boolean claimed() { return state == 1; }
        boolean filledElsewhere() { return state == 2; }
        boolean passes() { return state == 3; }
    }

    private final SharedStore store;
    /** This worker's claims: only it may give them back. */
    private final byte[] token = ascii(UUID.randomUUID().toString());
    private final byte[] claimMillis = ascii(Long.toString(ResponseCache.WAIT_MILLIS));
    private final byte[] passMillis = ascii(Long.toString(ResponseCache.PASS_MILLIS));

    /** @param invalidated called with a URL's hash when any replica invalidated it, on an I/O thread */
    StoreTier(SharedStore store, LongConsumer invalidated) {
        this.store = store;
        store.subscribe(CHANNEL, message -> {
            if (message.length == Long.BYTES) invalidated.accept(ByteBuffer.wrap(message).getLong());
        });
    }

    /** The URL's stored variants; with {@code claim}, its fill is claimed for this worker when nobody holds it. */
    CompletableFuture<Answer> lookup(long hash, boolean claim) {
        return store.<List<Object>>eval(LOOKUP, ScriptOutputType.MULTI, MetricsLayout.STORE_CACHE_LOOKUP, true,
                        new byte[][] {entriesKey(hash), claimKey(hash)}, token, claimMillis, ascii(claim ? "1" : "0"))
                .thenApply(StoreTier::answer);
    }

    private static Answer answer(List<Object> reply) {
        int state = ((Long) reply.getFirst()).intValue();
        List<Stored> entries = new ArrayList<>();
        for (int i = 1; i + 1 < reply.size(); i += 2) {
            byte[] field = (byte[]) reply.get(i), value = (byte[]) reply.get(i + 1);
            if (field.length != Integer.BYTES || value.length < TIMES) continue;
            ByteBuffer times = ByteBuffer.wrap(value);
            byte[] record = new byte[value.length - TIMES];
            System.arraycopy(value, TIMES, record, 0, record.length);
            entries.add(new Stored(ByteBuffer.wrap(field).getInt(), times.getLong(), times.getLong(), record));
        }
        return new Answer(state, entries);
    }

    /**
     * Stores a variant until {@code until}; an identity entry drops the coded variants of the response it
     * replaces. {@code giveBack}: the fill this worker claimed ends with it. Nobody waits for the answer.
     */
    void put(long hash, int variant, long until, long received, byte[] record, boolean giveBack) {
        long ttl = until - System.currentTimeMillis();
        if (ttl <= 0) {
            if (giveBack) giveBack(hash, false);
            return;
        }
        byte[] value = ByteBuffer.allocate(TIMES + record.length).putLong(until).putLong(received).put(record).array();
        List<byte[]> args = new ArrayList<>(List.of(token, field(variant), value, ascii(Long.toString(ttl))));
        if (CacheEntry.identity(variant)) {
            for (ContentCoding coding : ContentCoding.values()) args.add(field(CacheEntry.codedVariant(variant, coding)));
        }
        store.evalInteger(PUT, MetricsLayout.STORE_CACHE_STORE, false, new byte[][] {entriesKey(hash), claimKey(hash)}, args.toArray(byte[][]::new));
    }

    /**
     * Ends this worker's claim of a fill: the other replicas stop waiting for it. {@code pass}: the response
     * was not storable, and for {@link ResponseCache#PASS_MILLIS} every replica's requests for the key go to
     * their application without waiting for each other.
     */
    void giveBack(long hash, boolean pass) {
        store.evalInteger(GIVE_BACK, MetricsLayout.STORE_CACHE_STORE, false, new byte[][] {claimKey(hash)}, token,
                pass ? passMillis : ascii("0"));
    }

    /** Drops the URL's entries in the store and tells every replica to drop its own copies. */
    void invalidate(long hash) {
        store.evalInteger(INVALIDATE, MetricsLayout.STORE_CACHE_INVALIDATE, false, new byte[][] {entriesKey(hash)},
                CHANNEL, ByteBuffer.allocate(Long.BYTES).putLong(hash).array());
    }

    private static byte[] entriesKey(long hash) {
        return ascii("peregrine:c:" + Long.toHexString(hash));
    }

    private static byte[] claimKey(long hash) {
        return ascii("peregrine:cl:" + Long.toHexString(hash));
    }

    private static byte[] field(int variant) {
        return ByteBuffer.allocate(Integer.BYTES).putInt(variant).array();
    }

    private static byte[] ascii(String text) {
        return text.getBytes(StandardCharsets.US_ASCII);
    }
}
