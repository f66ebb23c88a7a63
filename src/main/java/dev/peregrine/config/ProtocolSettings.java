package dev.peregrine.config;

/** Which HTTP versions are served; {@code quicPort} is the UDP port of HTTP/3 when it is on. */
public record ProtocolSettings(boolean http2, boolean http2Only, boolean http3, int quicPort) {
}
