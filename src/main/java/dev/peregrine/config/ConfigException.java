package dev.peregrine.config;

/** A bad or unsupported combination of options: printed as one line, exit status 2. */
public final class ConfigException extends RuntimeException {
    public ConfigException(String message) {
        super(message, null, false, false);
    }
}
