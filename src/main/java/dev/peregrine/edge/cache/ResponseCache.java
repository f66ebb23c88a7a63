package dev.peregrine.edge.cache;

import dev.peregrine.config.CacheSettings;
import dev.peregrine.edge.ContentEncoder;
import dev.peregrine.edge.EdgeStage;
import dev.peregrine.http.Application;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.metrics.RequestMetrics;
import dev.peregrine.shared.SharedRegion;
import dev.peregrine.store.SharedStore;
import io.netty.buffer.Unpooled;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.internal.ThreadExecutorMap;

import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * The response cache stage (--cache-size): answers a GET or HEAD from a response stored by any worker,
 * on the I/O thread, and stores what the application answers to a miss on its way out
 * ({@link CacheExchange}). Concurrent misses for one key, in any worker, make one application call:
 * the first claims the key's fill marker in the shared index, the others poll the index until the
 * entry is there, the marker is gone, or {@value #WAIT_MILLIS} ms have passed. A successful unsafe
 * request invalidates its URL's entries. Storage: {@link CacheStore}; rules: {@link CacheStorability}.
 *
 * <p>With --compress, an entry is the application's identity response, and a hit for a client that
 * takes a coding is answered from that coding's variant of it: made once, by the compression stage, on
 * the first such hit, and stored beside the identity entry with its freshness and age. Storing a new
 * identity response drops the variants of the old one; invalidation drops them all.
 *
 * <p>With --shared-store, a miss in this host's memory asks the store ({@link StoreTier}) before the
 * application: an entry another replica stored is copied into this host's memory and served from it;
 * else the request claims the key's fill across replicas, or waits for the replica that holds it as it
 * waits for a local fill, polling the store every {@value #REMOTE_POLL_MILLIS} ms. Every response this
 * host stores goes to the store too, and an invalidation reaches every replica. When the store fails,
 * the cache is this host's alone, as without it.
 */
public final class ResponseCache implements EdgeStage {
    /** How long misses wait for another request's fill of the same key, and how long a fill may take before others stop waiting. */
    static final long WAIT_MILLIS = 5_000;
    /** How long, after a response that could not be stored, requests for its key go to the application without waiting (hit-for-miss). */
    static final long PASS_MILLIS = 10_000;
    private static final long POLL_MILLIS = 5;
    /** How often a miss waiting for another replica's fill asks the store again: each ask is a round trip. */
    static final long REMOTE_POLL_MILLIS = 20;
    private static final Set<String> UNSAFE = Set.of("POST", "PUT", "PATCH", "DELETE");
    /** What a 304 carries of the stored response (RFC 9110 §15.4.5). */
    private static final List<String> NOT_MODIFIED_HEADERS = List.of("cache-control", "content-location", "date", "etag",
            "expires", "vary", "last-modified");

    final CacheSettings settings;
    final CacheStore store;
    final RequestMetrics metrics;
    /** --compress, whose codings' variants the cache keeps; null without it. */
    private final ContentEncoder compression;
    /** The entries of every replica, in --shared-store; null without it. */
    private final StoreTier shared;
    private final long pid = ProcessHandle.current().pid();

    /** @param sharedStore --shared-store, or null: the cache is then this host's alone */
    public ResponseCache(CacheSettings settings, SharedRegion area, SharedStore sharedStore, RequestMetrics metrics, ContentEncoder compression) {
        this.settings = settings;
        this.store = new CacheStore(area, slot -> metrics.cacheReleased(slot.length(), true));
        this.metrics = metrics;
        this.compression = compression;
        this.shared = sharedStore == null ? null : new StoreTier(sharedStore, this::invalidateHere);
    }

    @Override
    public void handle(HttpExchange exchange, Application next) {
        String method = exchange.head().method();
        boolean get = method.equals("GET");
        if (!get && !method.equals("HEAD")) {
            if (UNSAFE.contains(method)) next.dispatch(new CacheExchange(exchange, this, CacheRequest.of(exchange), null, false, true));
            else next.dispatch(exchange);
            return;
        }
        CacheRequest request = CacheRequest.of(exchange, compression == null ? null : compression.coding(exchange.head()));
        if (request.noCache || request.noStore) {
            forward(exchange, next, request, null, false);
            return;
        }
        lookup(exchange, next, request, System.currentTimeMillis() + WAIT_MILLIS, loop());
    }

    /** The I/O thread's event loop, where waits are scheduled and stores run; null off a Netty thread (then nothing waits). */
    private static EventExecutor loop() {
        return ThreadExecutorMap.currentExecutor();
    }

    private void lookup(HttpExchange exchange, Application next, CacheRequest request, long waitUntil, EventExecutor loop) {
        if (exchange.disconnected()) return;
        long now = System.currentTimeMillis();
        Found found = find(request, now);
        if (found.hit != null) {
            serve(exchange, request, found, now);
            return;
        }
        if (found.filling && now < waitUntil && loop != null) {
            loop.schedule(() -> lookup(exchange, next, request, waitUntil, loop), POLL_MILLIS, TimeUnit.MILLISECONDS);
            return;
        }
        // A HEAD's or a conditional request's answer is no GET's full response: it neither fills nor makes others wait.
        boolean fills = !found.pass && !found.filling && request.method.equals("GET") && !request.conditional();
        CacheStore.Slot claim = null;
        if (fills) {
            Claim result = claim(request.hash, now);
            if (result == Claim.LOST) {
                lookup(exchange, next, request, waitUntil, loop);
                return;
            }
            claim = result.slot;
        }
        if (shared != null && !found.pass && loop != null) {
            lookupShared(exchange, next, request, claim, fills, waitUntil, loop);
            return;
        }
        forward(exchange, next, request, claim, false);
    }

    /**
     * A miss in this host's memory, asked of the store: an entry another replica stored is copied here and
     * served; else a request that fills claims the key's fill for every replica ({@code fills}), and a fill
     * another replica holds is waited for, as a local one is. A fill that stored nothing leaves a
     * hit-for-miss marker in the store, which sends every replica's requests for the key to their
     * application at once. When the store fails, the miss goes to the application as without it.
     */
    private void lookupShared(HttpExchange exchange, Application next, CacheRequest request, CacheStore.Slot claim, boolean fills,
                              long waitUntil, EventExecutor loop) {
        shared.lookup(request.hash, fills).whenComplete((answer, failure) -> loop.execute(() -> {
            boolean claimed = answer != null && answer.claimed();
            if (exchange.disconnected()) {
                if (claim != null) store.free(claim);
                if (claimed) shared.giveBack(request.hash, false);
                return;
            }
            long now = System.currentTimeMillis();
            if (answer != null) {
                StoreTier.Stored stored = match(request, answer.entries(), now);
                if (stored != null) {
                    if (claimed) shared.giveBack(request.hash, false);
                    storeRecord(request.hash, claim, stored.record(), stored.variant(), stored.until(), stored.received());
                    Found found = find(request, now);
                    if (found.hit != null) {
                        serve(exchange, request, found, now);
                        return;
                    }
                    // Not kept here (larger than this host's ring allows): the application answers, as for any entry too large.
                    forward(exchange, next, request, null, false);
                    return;
                }
                if (answer.passes()) {
                    pass(request.hash, claim, false);
                    forward(exchange, next, request, null, false);
                    return;
                }
                if (answer.filledElsewhere() && now < waitUntil) {
                    loop.schedule(() -> lookupShared(exchange, next, request, claim, fills, waitUntil, loop), REMOTE_POLL_MILLIS,
                            TimeUnit.MILLISECONDS);
                    return;
                }
            }
            forward(exchange, next, request, claim, claimed);
        }));
    }

    /** The store's entry for a request, as {@link #find} chooses in this host's memory; null when none is fresh and matches. */
    private static StoreTier.Stored match(CacheRequest request, List<StoreTier.Stored> entries, long now) {
        StoreTier.Stored identity = null;
        for (StoreTier.Stored stored : entries) {
            boolean inCoding = CacheEntry.codedAs(stored.variant(), request.coding);
            if (!inCoding && !CacheEntry.identity(stored.variant()) || stored.until() <= now) continue;
            CacheEntry entry = CacheEntry.parse(stored.record());
            if (entry == null || !entry.keyEquals(request) || !entry.variantMatches(request)) continue;
            if (inCoding) return stored;
            identity = stored;
        }
        return identity;
    }

    /** @param sharedClaim the request holds the key's fill in the store */
    private void forward(HttpExchange exchange, Application next, CacheRequest request, CacheStore.Slot claim, boolean sharedClaim) {
        metrics.cacheMiss();
        next.dispatch(new CacheExchange(exchange, this, request, claim, sharedClaim, false));
    }

    /**
     * What the index holds for a request: a matching fresh entry (in the request's coding, else the
     * identity one), a fill under way, a hit-for-miss marker.
     */
    record Found(CacheStore.Slot slot, CacheEntry hit, boolean filling, boolean pass) {}

    Found find(CacheRequest request, long now) {
        int home = store.home(request.hash);
        boolean filling = false, pass = false;
        Found identity = null;
        for (int i = 0; i < CacheStore.PROBE; i++) {
            CacheStore.Slot slot = store.read(store.probe(home, i));
            if (slot == null || slot.hash() != request.hash) continue;
            switch (slot.state()) {
                case CacheStore.READY -> {
                    boolean inCoding = CacheEntry.codedAs(slot.variant(), request.coding);
                    if (!inCoding && !CacheEntry.identity(slot.variant())) continue;
                    if (slot.until() <= now) {
                        release(slot, false);
                        continue;
                    }
                    byte[] record = store.record(slot.position(), slot.length());
                    CacheEntry entry = record == null ? null : CacheEntry.parse(record);
                    if (entry == null) {
                        release(slot, true);
                        continue;
                    }
                    if (entry.keyEquals(request) && entry.variantMatches(request)) {
                        Found found = new Found(slot, entry, false, false);
                        if (inCoding) return found;
                        identity = found;
                    }
                }
                case CacheStore.FILLING -> filling |= slot.live(now);
                case CacheStore.PASS -> pass |= slot.live(now);
                default -> { }
            }
        }
        return identity != null ? identity : new Found(null, null, filling, pass);
    }

    /** Drops an entry found stale ({@code evicted}: its record was overwritten, else it expired); counted once, by whoever frees it. */
    private void release(CacheStore.Slot slot, boolean evicted) {
        if (store.free(slot)) metrics.cacheReleased(slot.length(), evicted);
    }

    private void serve(HttpExchange exchange, CacheRequest request, Found found, long now) {
        metrics.cacheHit();
        CacheStore.Slot slot = found.slot;
        CacheEntry entry = found.hit;
        store.touch(slot, now);
        if (request.coding != null && CacheEntry.identity(slot.variant())) {
            CacheEntry coded = codedVariant(request, slot, entry);
            if (coded != null) entry = coded;
        }
        long age = Math.max(0, (now - slot.received()) / 1000);
        String status = "Peregrine; hit; ttl=" + Math.max(0, (slot.until() - now) / 1000);
        ResponseHead head;
        boolean withBody = false;
        if (request.conditional() && entry.status == 200 && CacheValidators.notModified(request, entry)) {
            head = entry.head(304, NOT_MODIFIED_HEADERS);
        } else {
            head = entry.head(entry.status, null);
            if (entry.status != 204) head.add("content-length", Integer.toString(entry.bodyLength()));
            withBody = !request.method.equals("HEAD") && entry.bodyLength() > 0;
        }
        head.add("age", Long.toString(age));
        head.add("cache-status", status);
        exchange.send(head, withBody ? Unpooled.wrappedBuffer(entry.record, entry.bodyStart(), entry.bodyLength()) : null, true);
        if (store.remaining(slot.position()) < 0.25) secondChance(slot, found.hit, now);
    }

    /**
     * {@code entry}'s variant in the request's coding, compressed now by the compression stage and stored
     * beside it with the same freshness and age, so that the next hit in that coding is sent as it is;
     * null when compression leaves this response alone (then the stage, seeing the identity hit go by,
     * leaves it alone too). On the I/O thread, like all of --compress: the Python thread never compresses.
     */
    private CacheEntry codedVariant(CacheRequest request, CacheStore.Slot identity, CacheEntry entry) {
        ContentEncoder.Coded coded = compression.encode(entry.head(entry.status, null), entry.record, entry.bodyStart(),
                entry.bodyLength(), request.coding);
        if (coded == null) return null;
        byte[] record = entry.recoded(coded.head(), coded.body());
        if (coded.body().length <= settings.maxObjectBytes()) {
            int variant = CacheEntry.codedVariant(identity.variant(), request.coding);
            storeRecord(request.hash, null, record, variant, identity.until(), identity.received());
            if (shared != null) shared.put(request.hash, variant, identity.until(), identity.received(), record, false);
        }
        return CacheEntry.parse(record);
    }

    /** Moves an entry used while in the oldest quarter of the ring to its head, so that it outlives entries nobody reads. */
    private void secondChance(CacheStore.Slot seen, CacheEntry entry, long now) {
        long position = store.append(entry.record, seen.hash());
        if (position < 0) return;
        CacheStore.Slot current = store.read(seen.index());
        if (current == null || current.version() != seen.version()) return;
        store.write(current, current.hash(), CacheStore.READY, 0, current.until(), current.received(), position,
                current.length(), current.variant(), now);
    }

    /** The result of claiming a key's fill: a slot (null: no room, fill without collapsing), or another request claimed it. */
    record Claim(CacheStore.Slot slot) {
        static final Claim LOST = new Claim(null);
    }

    Claim claim(long hash, long now) {
        CacheStore.Slot victim = pick(hash, now);
        if (victim == null) return new Claim(null);
        if (!store.write(victim, hash, CacheStore.FILLING, pid, now + WAIT_MILLIS, 0, 0, 0, 0, now)) return Claim.LOST;
        releaseTaken(victim, now);
        CacheStore.Slot ours = store.read(victim.index());
        // Two workers may claim at once, in two slots: both look again, and the one in the later slot of the key gives way.
        int home = store.home(hash);
        for (int i = 0; i < CacheStore.PROBE; i++) {
            int index = store.probe(home, i);
            if (index == victim.index()) break;
            CacheStore.Slot other = store.read(index);
            if (other != null && other.hash() == hash && other.state() == CacheStore.FILLING && other.live(now)) {
                if (ours != null) store.free(ours);
                return Claim.LOST;
            }
        }
        return ours == null ? new Claim(null) : new Claim(ours);
    }

    /**
     * The slot a new entry or fill of {@code hash} takes among its key's slots: a free or stale one, else
     * the least recently used entry (an eviction), never a fill under way; null when all are fills.
     */
    CacheStore.Slot pick(long hash, long now) {
        int home = store.home(hash);
        CacheStore.Slot oldest = null;
        for (int i = 0; i < CacheStore.PROBE; i++) {
            CacheStore.Slot slot = store.read(store.probe(home, i));
            if (slot == null) continue;
            boolean reusable = !slot.live(now) || slot.state() == CacheStore.READY && !store.intact(slot.position())
                    || slot.state() == CacheStore.PASS && slot.hash() == hash;
            if (reusable) return slot;
            if (slot.state() == CacheStore.READY && (oldest == null || slot.lastUse() < oldest.lastUse())) oldest = slot;
        }
        return oldest;
    }

    /** Counts what taking over {@code taken} dropped: an entry still held (evicted or expired). */
    private void releaseTaken(CacheStore.Slot taken, long now) {
        if (taken.state() != CacheStore.READY) return;
        metrics.cacheReleased(taken.length(), taken.until() > now || !store.intact(taken.position()));
    }

    /**
     * Stores a response's record, here and in the store; on the I/O thread. {@code claim}: the fill marker
     * it replaces, when it still is one; {@code sharedClaim}: the request holds the key's fill in the store.
     */
    void publish(CacheRequest request, CacheStore.Slot claim, boolean sharedClaim, byte[] record, int variant, long freshMillis,
                 long received) {
        long until = System.currentTimeMillis() + freshMillis;
        storeRecord(request.hash, claim, record, variant, until, received);
        if (shared != null) shared.put(request.hash, variant, until, received, record, sharedClaim);
    }

    /** Stores a record under {@code variant} (its coding in the low bits), fresh until {@code until}; on the I/O thread. */
    private void storeRecord(long hash, CacheStore.Slot claim, byte[] record, int variant, long until, long received) {
        long now = System.currentTimeMillis();
        long position = store.append(record, hash);
        if (position < 0) {
            pass(hash, claim, false);
            return;
        }
        CacheStore.Slot target = claim == null ? null : store.read(claim.index());
        if (target != null && target.version() != claim.version()) target = null;
        if (target == null) target = pick(hash, now);
        if (target == null) return;
        if (!store.write(target, hash, CacheStore.READY, 0, until, received, position, record.length, variant, now)) return;
        if (target != claim) releaseTaken(target, now);
        metrics.cacheStored(record.length);
        // The entry replaces any older one of the same variant (an identity entry also the coded variants
        // made from the response it replaces), and ends a hit-for-miss marker of its key.
        boolean identity = CacheEntry.identity(variant);
        int home = store.home(hash);
        for (int i = 0; i < CacheStore.PROBE; i++) {
            int index = store.probe(home, i);
            if (index == target.index()) continue;
            CacheStore.Slot slot = store.read(index);
            if (slot == null || slot.hash() != hash) continue;
            boolean replaced = identity ? CacheEntry.sameVariant(slot.variant(), variant) : slot.variant() == variant;
            if (slot.state() == CacheStore.READY && replaced) release(slot, false);
            else if (slot.state() == CacheStore.PASS) store.free(slot);
        }
    }

    /**
     * Turns a fill that will store nothing into a hit-for-miss marker: its waiters go to the application at
     * once, those of every replica too when it held the key's fill in the store ({@code sharedClaim}).
     */
    void pass(long hash, CacheStore.Slot claim, boolean sharedClaim) {
        if (sharedClaim) shared.giveBack(hash, true);
        if (claim == null) return;
        CacheStore.Slot current = store.read(claim.index());
        if (current == null || current.version() != claim.version()) return;
        store.write(current, hash, CacheStore.PASS, 0, System.currentTimeMillis() + PASS_MILLIS, 0, 0, 0, 0, 0);
    }

    /** Drops every entry of a URL after a successful unsafe request to it (RFC 9111 §4.4), in every replica; on the I/O thread. */
    void invalidate(long hash) {
        invalidateHere(hash);
        if (shared != null) shared.invalidate(hash);
    }

    /** Drops this host's entries of a URL: after a request here, or when another replica says it invalidated it. */
    private void invalidateHere(long hash) {
        int home = store.home(hash);
        for (int i = 0; i < CacheStore.PROBE; i++) {
            CacheStore.Slot slot = store.read(store.probe(home, i));
            if (slot == null || slot.hash() != hash) continue;
            if (slot.state() == CacheStore.READY) release(slot, false);
            else if (slot.state() == CacheStore.PASS) store.free(slot);
        }
    }
}
