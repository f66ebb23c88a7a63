package dev.peregrine.http1;

/**
 * A request the server must refuse. {@link #status()} is the response status to send before closing the
 * connection (400, 413, 414, 417, 431, 501 or 505); the message is a short phrase naming the fault, meant for
 * logs and for the body of the error response.
 */
public final class HttpParseException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final int status;

    public HttpParseException(int status, String reason) {
        super(reason, null, false, false);
        this.status = status;
    }

    public int status() {
        return status;
    }

    /** Malformed requests are routine input, not bugs: a stack trace would only cost time. */
    @Override
    public synchronized Throwable fillInStackTrace() {
        return this;
    }

    @Override
    public String toString() {
        return status + " " + getMessage();
    }
}
