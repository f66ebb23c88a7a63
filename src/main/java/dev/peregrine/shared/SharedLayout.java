package dev.peregrine.shared;

import dev.peregrine.config.CacheSettings;
import dev.peregrine.config.EdgeSettings;
import dev.peregrine.config.RateLimitSettings;

import java.io.IOException;
import java.nio.file.Path;
import java.util.Map;

/**
 * Where each user of the {@link SharedRegion} lives in it, computed from the options alone, so that
 * the supervisor (which creates the area) and every worker (which maps it) agree without telling each
 * other more than the file's name. The rate limit's table of clients, at offset 0, then the response
 * cache (its index and data, as --cache-size gives), each on a 64-byte line of its own.
 * The fingerprint written in the header names this map: {@link #VERSION} and every size in it.
 */
public record SharedLayout(long rateLimitOffset, long rateLimitBytes, long cacheOffset, long cacheBytes, long size) {
    /** The file the supervisor created, given to its workers. */
    public static final String FILE_ENV = "PEREGRINE_SHARED_FILE";
    /** Changes whenever a section's place or the format of what is in it changes. */
    static final long VERSION = 3;
    /** One client of the rate limit: its key and its theoretical arrival time, two longs. */
    public static final int RATE_LIMIT_ENTRY_BYTES = 16;

    /** Null when no option needs shared memory. */
    public static SharedLayout of(EdgeSettings edge) {
        RateLimitSettings rate = edge.rateLimit();
        CacheSettings cache = edge.cache();
        if (rate == null && cache == null) return null;
        long rateBytes = rate == null ? 0 : (long) rate.tableEntries() * RATE_LIMIT_ENTRY_BYTES;
        long cacheOffset = roundUp(rateBytes);
        long cacheBytes = cache == null ? 0 : roundUp(cache.bytes());
        return new SharedLayout(0, rateBytes, cacheOffset, cacheBytes, cacheOffset + cacheBytes);
    }

    long fingerprint() {
        return VERSION << 56 ^ rateLimitBytes ^ Long.rotateLeft(cacheBytes, 20);
    }

    public SharedRegion create(Path file) throws IOException {
        return SharedRegion.create(file, size, fingerprint());
    }

    /** The supervisor's area when {@value #FILE_ENV} names one, else one of this process's own. */
    public SharedRegion forWorker(Map<String, String> environment) throws IOException {
        String file = environment.get(FILE_ENV);
        return file == null ? SharedRegion.inProcess(size, fingerprint()) : SharedRegion.open(Path.of(file), size, fingerprint());
    }

    /** The rate limit's section of {@code region}; null when the layout has none. */
    public SharedRegion rateLimitTable(SharedRegion region) {
        return rateLimitBytes == 0 ? null : region.slice(rateLimitOffset, rateLimitBytes);
    }

    /** The response cache's section of {@code region}; null when the layout has none. */
    public SharedRegion cacheArea(SharedRegion region) {
        return cacheBytes == 0 ? null : region.slice(cacheOffset, cacheBytes);
    }

    private static long roundUp(long bytes) {
        return (bytes + 63) / 64 * 64;
    }
}
