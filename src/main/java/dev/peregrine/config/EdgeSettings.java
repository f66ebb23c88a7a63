package dev.peregrine.config;

import java.nio.file.Path;
import java.util.List;

/**
 * The stages the server runs in front of the application. {@code healthCheckPath} is null when the
 * server answers no health check, {@code rateLimit} when no rate limit applies; {@code staticMounts} is
 * empty when it serves no files itself. {@code compressStatic}: precompressed siblings (FILE.br,
 * FILE.zst, FILE.gz) are sent to clients that accept them. {@code compression} is null when the server
 * compresses no application response (--compress), {@code cache} when responses are not cached.
 */
public record EdgeSettings(String healthCheckPath, RateLimitSettings rateLimit, List<StaticMount> staticMounts,
                           boolean compressStatic, CompressionSettings compression, CacheSettings cache) {

    /**
     * One --static-dir: requests whose path is {@code prefix} or under it ({@code prefix} starts with a
     * slash and never ends with one) are answered from the directory {@code root}.
     */
    public record StaticMount(String prefix, Path root) {}
}
