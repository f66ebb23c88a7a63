package dev.peregrine.edge.cache;

import dev.peregrine.edge.ExchangeWrapper;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.http.WakeupBatch;
import io.netty.buffer.ByteBuf;

import java.util.Arrays;
import java.util.List;

/**
 * A request the cache passed to the application, and its response on the way out: the head gets its
 * Cache-Status, and a storable response is copied as it passes (head, then each body chunk: the
 * buffers themselves go on to the transport untouched) and stored once it is complete. For an unsafe
 * request, a 2xx or 3xx answer invalidates the URL instead.
 *
 * <p>{@code send} only hands each piece to the connection's I/O thread ({@link HttpExchange#runOnLoop},
 * its bytes counted against the high-water mark until then), in order: the judgement of the head, the
 * copy of the body, the passing on and everything that touches the shared memory happen there, never on
 * the application's thread. The fields below are touched on the I/O thread only.
 */
final class CacheExchange extends ExchangeWrapper {
    private final ResponseCache cache;
    private final CacheRequest request;
    /** The fill marker this request holds for its key, or null. */
    private final CacheStore.Slot claim;
    /** The request holds its key's fill in --shared-store too. */
    private final boolean sharedClaim;
    private final boolean unsafe;
    private boolean headSeen;
    /** The response being copied, null once it is known not to be stored. */
    private ResponseHead stored;
    private CacheStorability.Verdict verdict;
    private List<String> varyNames;
    private byte[] body;
    private int bodyLength;
    private long receivedMillis;

    CacheExchange(HttpExchange wrapped, ResponseCache cache, CacheRequest request, CacheStore.Slot claim, boolean sharedClaim,
                  boolean unsafe) {
        super(wrapped);
        this.cache = cache;
        this.request = request;
        this.claim = claim;
        this.sharedClaim = sharedClaim;
        this.unsafe = unsafe;
    }

    @Override
    public void send(ResponseHead head, ByteBuf chunk, boolean last, WakeupBatch batch) {
        wrapped.runOnLoop(() -> sendOnLoop(head, chunk, last), chunk == null ? 0 : chunk.readableBytes(), batch);
    }

    /** One piece of the response, on the I/O thread: judged or copied, then passed on (with its buffer) downstream. */
    private void sendOnLoop(ResponseHead head, ByteBuf chunk, boolean last) {
        ResponseHead out = head;
        if (head != null && !headSeen) {
            headSeen = true;
            out = unsafe ? invalidating(head) : judged(head);
        }
        if (stored != null && chunk != null && chunk.readableBytes() > 0) copy(chunk);
        if (last && stored != null) {
            byte[] record = CacheEntry.build(request, stored, varyNames, body == null ? new byte[0] : body, bodyLength);
            int variant = CacheEntry.variantHash(CacheEntry.variant(request, varyNames));
            long fresh = verdict.freshMillis(), received = receivedMillis - verdict.ageSeconds() * 1000;
            stored = null;
            body = null;
            cache.publish(request, claim, sharedClaim, record, variant, fresh, received);
        }
        wrapped.send(out, chunk, last);
    }

    @Override
    public void abort() {
        wrapped.runOnLoop(this::forget, 0, null);
        wrapped.abort();
    }

    /** The response was cut: nothing is stored, and the requests waiting for this fill stop waiting. */
    private void forget() {
        if (stored != null || (claim != null || sharedClaim) && !headSeen) {
            stored = null;
            body = null;
            cache.pass(request.hash, claim, sharedClaim);
        }
    }

    private ResponseHead invalidating(ResponseHead head) {
        if (head.status() >= 200 && head.status() < 400) cache.invalidate(request.hash);
        return head;
    }

    private ResponseHead judged(ResponseHead head) {
        receivedMillis = System.currentTimeMillis();
        verdict = CacheStorability.judge(request, head, receivedMillis, cache.settings.ttlMaxSeconds());
        boolean fits = head.contentLength() <= cache.settings.maxObjectBytes();
        if (verdict.storable() && fits) {
            stored = head;
            varyNames = CacheEntry.varyNames(CacheStorability.value(head, "vary"));
            if (head.contentLength() > 0) body = new byte[(int) head.contentLength()];
        } else {
            cache.pass(request.hash, claim, sharedClaim);
        }
        ResponseHead out = new ResponseHead(head.status());
        out.reasonOf(head);
        out.addAll(head);
        // "stored" only when the length is known to fit: a streamed body may still pass --cache-max-object.
        out.add("cache-status", "Peregrine; fwd=" + (request.noCache || request.noStore ? "request" : "miss")
                + (stored != null && head.contentLength() >= 0 ? "; stored" : ""));
        return out;
    }

    private void copy(ByteBuf chunk) {
        int size = chunk.readableBytes();
        if ((long) bodyLength + size > cache.settings.maxObjectBytes()) {
            // Past --cache-max-object: the client still gets it all; the cache forgets it, and its waiters stop waiting.
            stored = null;
            body = null;
            cache.pass(request.hash, claim, sharedClaim);
            return;
        }
        if (body == null) body = new byte[Math.max(size, 4096)];
        else if (bodyLength + size > body.length) body = Arrays.copyOf(body, Math.min(cache.settings.maxObjectBytes(), Math.max(body.length * 2, bodyLength + size)));
        chunk.getBytes(chunk.readerIndex(), body, bodyLength, size);
        bodyLength += size;
    }
}
