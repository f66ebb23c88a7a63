package dev.peregrine.config;

/** The server's version, as --version, the startup line and SERVER_SOFTWARE show it. */
public final class Version {
    public static final String VERSION = "0.1.0";

    private Version() {}
}
