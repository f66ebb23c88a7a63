package dev.peregrine.config;

/**
 * {@code --cache-size MIB}, {@code --cache-max-object KIB} and {@code --cache-ttl-max SECONDS}: the
 * shared response cache takes {@code bytes} of shared memory (its index included), keeps no body
 * larger than {@code maxObjectBytes}, and keeps nothing fresh longer than {@code ttlMaxSeconds}.
 */
public record CacheSettings(long bytes, int maxObjectBytes, int ttlMaxSeconds) {
    public static final int MAX_SIZE_MIB = 64 * 1024;
    /** A body may take at most a quarter of the cache: one object must not flush everything else at once. */
    public static final int OBJECT_SHARE = 4;

    public CacheSettings {
        if (bytes < 1024 * 1024 || maxObjectBytes < 1 || maxObjectBytes > bytes / OBJECT_SHARE || ttlMaxSeconds < 1) {
            throw new IllegalArgumentException("cache of " + bytes + " bytes, objects up to " + maxObjectBytes + ", ttl " + ttlMaxSeconds);
        }
    }
}
