package dev.peregrine.config;

import java.net.URI;
import java.net.URISyntaxException;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

/**
 * {@code --shared-store URL}: the Redis or Valkey server through which replicas share their rate limit.
 * {@code user} and {@code password} are null when not given; {@code caFile} (--shared-store-ca) is null
 * when the JDK's roots are trusted, and only set with {@code tls}. {@code timeoutMillis}
 * (--shared-store-timeout) is how long a request waits for the store before it is served without it.
 *
 * <p>The password is a secret: {@link #toString()} and {@link #address()} leave it out, and no message of
 * {@link #parse} repeats the URL it was given, which may hold it.
 */
public record SharedStoreSettings(boolean tls, String host, int port, int database, String user, String password, Path caFile,
                                  long timeoutMillis) {
    public static final int DEFAULT_PORT = 6379;
    /** Redis's own bound on --databases is configurable; 0 to 65535 is far beyond what anyone sets. */
    private static final int MAX_DATABASE = 65535;
    private static final String FORM = "redis://[USER:PASSWORD@]HOST[:PORT][/DB] or rediss://... for TLS";

    /** Where the store is, for logs: scheme, host, port and database, never the credentials. */
    public String address() {
        String literal = host.indexOf(':') >= 0 ? "[" + host + "]" : host;
        return (tls ? "rediss://" : "redis://") + literal + ":" + port + "/" + database;
    }

    @Override
    public String toString() {
        return address() + (user != null ? " as " + user : "") + (password != null ? " with a password" : "");
    }

    /**
     * @param url             the option's value
     * @param caFile          --shared-store-ca, or null (the caller checks it goes with rediss://)
     * @param passwordFromEnv PEREGRINE_SHARED_STORE_PASSWORD, or null: the password when the URL has none
     * @param timeoutMillis   --shared-store-timeout, checked by the caller
     * @throws IllegalArgumentException saying what is wrong, without repeating {@code url}
     */
    public static SharedStoreSettings parse(String url, Path caFile, String passwordFromEnv, long timeoutMillis) {
        URI uri;
        try {
            uri = new URI(url.strip());
        } catch (URISyntaxException e) {
            // The exception's own message quotes the input, password and all.
            throw new IllegalArgumentException("not " + FORM + " (" + e.getReason() + " at index " + e.getIndex() + ")");
        }
        String scheme = uri.getScheme();
        if (scheme == null || !(scheme.equalsIgnoreCase("redis") || scheme.equalsIgnoreCase("rediss"))) {
            throw new IllegalArgumentException("not " + FORM + ": the scheme must be redis or rediss");
        }
        boolean tls = scheme.equalsIgnoreCase("rediss");
        if (uri.getRawAuthority() == null || uri.getHost() == null) {
            throw new IllegalArgumentException("not " + FORM + ": no HOST, or a PORT that is not a number");
        }
        if (uri.getRawQuery() != null || uri.getRawFragment() != null) {
            throw new IllegalArgumentException("not " + FORM + ": it takes no query or fragment");
        }
        String host = uri.getHost();
        if (host.startsWith("[") && host.endsWith("]")) host = host.substring(1, host.length() - 1);
        int port = uri.getPort() < 0 ? DEFAULT_PORT : uri.getPort();
        if (port < 1 || port > 65535) throw new IllegalArgumentException("not " + FORM + ": the port must be 1 to 65535");
        int database = database(uri.getRawPath());
        String user = null, password = null;
        String userInfo = uri.getRawUserInfo();
        if (userInfo != null) {
            int colon = userInfo.indexOf(':');
            user = decode(colon < 0 ? userInfo : userInfo.substring(0, colon));
            password = colon < 0 ? null : decode(userInfo.substring(colon + 1));
            if (user.isEmpty()) user = null;
            if (password != null && password.isEmpty()) password = null;
        }
        if (password == null && passwordFromEnv != null && !passwordFromEnv.isEmpty()) password = passwordFromEnv;
        return new SharedStoreSettings(tls, host, port, database, user, password, caFile, timeoutMillis);
    }

    private static int database(String path) {
        if (path == null || path.isEmpty() || path.equals("/")) return 0;
        String digits = path.substring(1);
        if (digits.isEmpty() || digits.length() > 5 || !digits.chars().allMatch(c -> c >= '0' && c <= '9')
                || Integer.parseInt(digits) > MAX_DATABASE) {
            throw new IllegalArgumentException("not " + FORM + ": the DB after the slash must be a number from 0 to " + MAX_DATABASE);
        }
        return Integer.parseInt(digits);
    }

    private static String decode(String text) {
        try {
            // Percent-decoding only: a '+' in a password is a plus.
            return URLDecoder.decode(text.replace("+", "%2B"), StandardCharsets.UTF_8);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("not " + FORM + ": a malformed %-escape in the credentials");
        }
    }
}
