package dev.peregrine.cli;

/** A bad or unsupported combination of options: printed as one line, exit status 2. */
public final class UsageException extends RuntimeException {
    public UsageException(String message) {
        super(message, null, false, false);
    }
}
