package dev.peregrine.tls;

import org.jboss.logging.Logger;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Logs refused handshakes: a warning per name and minute, the others at debug, so that a client
 * retrying in a loop (or a scanner) cannot flood the log while a certificate is on its way.
 * Shared by TCP TLS and QUIC.
 */
final class RefusalLog {
    private static final Logger LOG = Logger.getLogger("peregrine");
    private static final long WARNING_INTERVAL_NANOS = 60_000_000_000L;
    /** Names come from clients: the table stops growing at this size, and later names log at debug. */
    private static final int MAX_NAMES = 1024;

    /** When a refusal was last logged as a warning, by the name asked for. */
    private final Map<String, Long> lastWarning = new ConcurrentHashMap<>();

    /** {@code handshake} says which handshake and from whom, e.g. "TLS handshake from /127.0.0.1:4242". */
    void refused(String name, String handshake, String reason) {
        long now = System.nanoTime();
        Long last = lastWarning.get(name);
        if ((last == null || now - last > WARNING_INTERVAL_NANOS) && lastWarning.size() < MAX_NAMES) {
            lastWarning.put(name, now);
            LOG.warnf("%s refused: %s", handshake, reason);
        } else {
            LOG.debugf("%s refused: %s", handshake, reason);
        }
    }
}
