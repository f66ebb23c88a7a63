package dev.peregrine.config;

/** {@code --protocol}: detect the interface from the callable, or force one. */
public enum ApplicationProtocol { auto, asgi, wsgi }
