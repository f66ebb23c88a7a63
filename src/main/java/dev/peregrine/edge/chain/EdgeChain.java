package dev.peregrine.edge.chain;

import dev.peregrine.config.EdgeSettings;
import dev.peregrine.edge.EdgeStage;
import dev.peregrine.edge.cache.ResponseCache;
import dev.peregrine.edge.compress.Compression;
import dev.peregrine.edge.files.StaticFiles;
import dev.peregrine.edge.ratelimit.RateLimit;
import dev.peregrine.http.Application;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.UpgradeGate;
import dev.peregrine.metrics.RequestMetrics;
import dev.peregrine.shared.SharedLayout;
import dev.peregrine.shared.SharedRegion;
import dev.peregrine.store.SharedStore;

import java.util.ArrayList;
import java.util.List;

/**
 * The seam between the transports and the application: the stages every request passes through, in
 * one order, written down here and nowhere else. A transport hands each request to {@link #entry()};
 * the last link is the application adapter (ASGI or WSGI). Without any stage, the entry is the
 * adapter itself and the chain costs nothing.
 *
 * <p>The order, and why:
 * <ol>
 *   <li>the health check: a probe is answered before anything could refuse or delay it, and is never
 *       rate limited;</li>
 *   <li>the rate limit: a client past its budget costs the server as little as possible; everything
 *       after it, static files included, counts against the budget;</li>
 *   <li>static files ({@link StaticFiles}, --static-dir): answered from disk on the I/O thread, never by
 *       the application;</li>
 *   <li>compression (--compress), on the way out: it wraps the exchange, so it sees the responses of the
 *       application and of the stages after it; static files, before it, go out as they are on disk
 *       (or as their precompressed siblings, --compress-static), keeping sendfile;</li>
 *   <li>the response cache, after compression, so that it stores what the application sent; a hit is
 *       answered without the application, a miss is stored on its way out. With --compress it also
 *       keeps each coding's variant of an entry, made once by the compression stage, and sends it
 *       as it is: compression passes on a response that already has a Content-Encoding.</li>
 * </ol>
 */
public final class EdgeChain {
    private final HealthCheck health;
    private final RateLimit rateLimit;
    private final Application entry;

    /**
     * @param shared  the area of {@link SharedLayout#of} this settings' layout, mapped by this worker; null when it has none
     * @param store   --shared-store, or null
     * @param metrics where the stages count
     */
    public EdgeChain(EdgeSettings settings, SharedRegion shared, SharedStore store, RequestMetrics metrics, Application application) {
        List<EdgeStage> stages = new ArrayList<>();
        health = settings.healthCheckPath() == null ? null : new HealthCheck(settings.healthCheckPath());
        if (health != null) stages.add(health);
        rateLimit = settings.rateLimit() == null ? null
                : new RateLimit(settings.rateLimit(), SharedLayout.of(settings).rateLimitTable(shared), store, metrics);
        if (rateLimit != null) stages.add(rateLimit);
        if (!settings.staticMounts().isEmpty()) stages.add(new StaticFiles(settings.staticMounts(), settings.compressStatic()));
        Compression compression = settings.compression() == null ? null : new Compression(settings.compression(), metrics);
        if (compression != null) stages.add(compression);
        if (settings.cache() != null) {
            stages.add(new ResponseCache(settings.cache(), SharedLayout.of(settings).cacheArea(shared), store, metrics, compression));
        }
        entry = link(stages, application);
    }

    /** What WebSocket handshakes, which leave the chain before its stages, must pass: the rate limit. */
    public UpgradeGate upgradeGate() {
        return rateLimit != null ? rateLimit : UpgradeGate.OPEN;
    }

    /** Where transports hand requests. */
    public Application entry() {
        return entry;
    }

    /** The server drains: from now on the health check answers 503. */
    public void failHealthCheck() {
        if (health != null) health.fail();
    }

    /** The stages, first to last, in front of {@code application}. */
    static Application link(List<EdgeStage> stages, Application application) {
        Application next = application;
        for (int i = stages.size() - 1; i >= 0; i--) next = new Link(stages.get(i), next);
        return next;
    }

    private record Link(EdgeStage stage, Application next) implements Application {
        @Override
        public void dispatch(HttpExchange exchange) {
            stage.handle(exchange, next);
        }
    }
}
