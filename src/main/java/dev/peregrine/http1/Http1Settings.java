package dev.peregrine.http1;

/** What an HTTP/1.1 connection needs to know of the server's configuration. */
public record Http1Settings(
        int maxHeadSize,
        long maxBody,
        long keepAliveMillis,
        long requestTimeoutMillis,
        String scheme,
        boolean accessLog) {
}
