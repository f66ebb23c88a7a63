package dev.peregrine.config;

/**
 * What the server tells its operators and adds to requests. {@code metricsPort} is null without a
 * metrics listener.
 */
public record OperationsSettings(
        Integer metricsPort,
        String metricsHost,
        boolean accessLog,
        boolean accessLogJson,
        boolean requestId,
        boolean requestStartHeader,
        boolean traceContext,
        LogLevel logLevel,
        TrustedProxies forwardedAllowIps) {
}
