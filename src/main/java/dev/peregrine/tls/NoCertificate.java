package dev.peregrine.tls;

/**
 * Why no certificate answers a ClientHello (or none may: the client offered only protocols the server does not
 * serve), and the TLS alert (RFC 8446 6.2) that tells the client.
 */
final class NoCertificate extends Exception {
    static final byte HANDSHAKE_FAILURE = 40;
    static final byte UNRECOGNIZED_NAME = 112;
    /** RFC 7301 3.2: the client offered ALPN, and nothing it offered is served. */
    static final byte NO_APPLICATION_PROTOCOL = 120;
    private final byte description;

    NoCertificate(byte description, String message) {
        super(message, null, false, false);
        this.description = description;
    }

    /** A plaintext fatal alert record: no TLS engine exists yet to send one. */
    byte[] alert() {
        return new byte[] {21, 3, 3, 0, 2, 2, description};
    }
}
