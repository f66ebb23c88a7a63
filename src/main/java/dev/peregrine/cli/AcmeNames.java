package dev.peregrine.cli;

import dev.peregrine.config.ConfigException;

import java.net.IDN;
import java.util.Locale;

/**
 * Checks an --acme-domain before anything is asked of a CA, which would refuse a bad name only after a
 * round trip and count the refusal against the rate limits. The rules are those of a DNS host name that
 * an ACME CA issues for with tls-alpn-01: no IP address (RFC 8738 needs a reverse-DNS SNI this server
 * does not parse), no wildcard (that needs DNS-01), at least two labels.
 */
final class AcmeNames {
    private AcmeNames() {}

    /** The name in lower-case ASCII (an internationalized name in its xn-- form), or a ConfigException saying why not. */
    static String check(String given) {
        String name = given.trim();
        if (name.endsWith(".")) name = name.substring(0, name.length() - 1);
        if (name.isEmpty()) throw refused(given, "is empty");
        if (name.startsWith("*.")) throw refused(given, "is a wildcard, which needs the DNS-01 challenge; only tls-alpn-01 is supported");
        if (name.contains(":") || name.matches("[0-9.]+")) throw refused(given, "is an IP address; ACME certificates here are for DNS names");
        if (name.contains("..") || name.startsWith(".")) throw refused(given, "has an empty label");
        if (!name.chars().allMatch(ch -> ch < 0x80)) {
            try {
                name = IDN.toASCII(name, IDN.USE_STD3_ASCII_RULES);
            } catch (IllegalArgumentException e) {
                throw refused(given, "is not a valid internationalized DNS name (" + e.getMessage() + ")");
            }
        }
        name = name.toLowerCase(Locale.ROOT);
        if (name.length() > 253) throw refused(given, "is longer than 253 characters");
        String[] labels = name.split("\\.", -1);
        if (labels.length < 2) throw refused(given, "is not a fully qualified domain name");
        for (String label : labels) {
            if (label.isEmpty()) throw refused(given, "has an empty label");
            if (label.length() > 63) throw refused(given, "has a label longer than 63 characters");
            if (!label.matches("[a-z0-9]([a-z0-9-]*[a-z0-9])?")) throw refused(given, "has a label with a character other than letters, digits and inner hyphens");
        }
        if (labels[labels.length - 1].matches("[0-9]+")) throw refused(given, "ends in a numeric label, which no top-level domain has");
        return name;
    }

    private static ConfigException refused(String given, String why) {
        return new ConfigException("invalid value for option '--acme-domain': '" + given + "' " + why);
    }
}
