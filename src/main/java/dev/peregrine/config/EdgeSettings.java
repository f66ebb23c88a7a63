package dev.peregrine.config;

/**
 * The stages the server runs in front of the application. {@code healthCheckPath} is null when the
 * server answers no health check, {@code rateLimit} when no rate limit applies, {@code cache} when
 * responses are not cached.
 */
public record EdgeSettings(String healthCheckPath, RateLimitSettings rateLimit, CacheSettings cache) {
}
