package dev.peregrine.cli;

import picocli.CommandLine;
import picocli.CommandLine.Help;
import picocli.CommandLine.Model.ArgSpec;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.UnmatchedArgumentException;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The picocli command line as Peregrine wants it: config defaults, one-line errors, grouped help. */
public final class CommandLineSetup {
    private CommandLineSetup() {}


    /** Help groups, in order; an option not listed falls into the last group. */
    private static final Map<String, List<String>> GROUPS = new LinkedHashMap<>();
    static {
        GROUPS.put("Listening", List.of("--host", "--port", "--unix", "--backlog", "--max-connections", "--forwarded-allow-ips"));
        GROUPS.put("Application", List.of("--protocol", "--factory", "--root-path", "--scheme", "--wsgi-threads", "--no-lifespan", "--no-uvloop"));
        GROUPS.put("Python", List.of("--venv", "--no-auto-venv", "--python-path", "--python-home", "--no-gc-freeze", "--free-threaded", "--lifespan-scope"));
        GROUPS.put("Limits and timeouts", List.of("--max-body", "--max-header-size", "--keep-alive", "--request-timeout"));
        GROUPS.put("Workers and lifecycle", List.of("--workers", "--graceful-timeout", "--drain-delay", "--reload", "--share-core"));
        GROUPS.put("Protocols", List.of("--no-http2", "--http2-only", "--http3", "--quic-port", "--no-websockets", "--ws-max-message",
                "--ws-ping-interval", "--ws-ping-timeout", "--ws-max-queue", "--ws-max-queue-bytes", "--ws-compress"));
        GROUPS.put("TLS", List.of("--tls-cert", "--tls-key", "--tls-ciphers", "--ktls", "--acme-domain", "--acme-email", "--acme-cache",
                "--acme-staging", "--acme-directory", "--acme-ca-bundle", "--redirect-http", "--hsts"));
        GROUPS.put("Edge", List.of("--static-dir", "--rate-limit", "--rate-limit-burst", "--cache-size", "--cache-max-object",
                "--cache-ttl-max", "--compress", "--compress-min-size", "--compress-static", "--shared-store", "--shared-store-timeout", "--shared-store-ca"));
        GROUPS.put("Operations", List.of("--health-check-path", "--metrics-port", "--metrics-host", "--access-log", "--access-log-format",
                "--request-id", "--request-start-header", "--trace-context", "--log-level", "--help", "--version"));
    }

    public static CommandLine configure(CommandLine commandLine) {
        ConfigDefaults defaults = new ConfigDefaults();
        commandLine.setDefaultValueProvider(defaults);
        commandLine.setParameterExceptionHandler((ex, args) -> {
            ex.getCommandLine().getErr().println("peregrine: " + describe(ex, args, defaults));
            return 2;
        });
        commandLine.getHelpSectionMap().put(CommandLine.Model.UsageMessageSpec.SECTION_KEY_OPTION_LIST, CommandLineSetup::groupedOptions);
        commandLine.getHelpSectionMap().remove(CommandLine.Model.UsageMessageSpec.SECTION_KEY_OPTION_LIST_HEADING);
        return commandLine;
    }

    /** One line; when the bad value came from the environment or a properties file, say where to look. */
    private static String describe(ParameterException ex, String[] args, ConfigDefaults defaults) {
        if (ex instanceof UnmatchedArgumentException unmatched && unmatched.isUnknownOption()) return unknownOption(unmatched);
        String message = ex.getMessage();
        ArgSpec arg = ex.getArgSpec();
        if (arg instanceof OptionSpec option && defaults.suppliedBy(option) && !typed(option, args)) {
            message = message + " (from " + ConfigDefaults.environmentName(option) + " or " + ConfigDefaults.key(option) + ")";
        }
        return message.replace(System.lineSeparator(), " ").strip();
    }

    /**
     * Names the unknown options only: picocli also lists what an unknown option left unconsumed (in
     * {@code --prot wsgi app:app}, "wsgi" becomes the target and "app:app" looks unknown too), which
     * points at the wrong argument. The suggestion is picocli's (the options sharing the typed name's
     * first two letters), narrowed to the one that shares the most of it, and only when that is three letters or more and half the name.
     */
    private static String unknownOption(UnmatchedArgumentException ex) {
        List<String> unknown = ex.getUnmatched().stream()
                .filter(arg -> arg.startsWith("-"))
                .map(arg -> arg.contains("=") ? arg.substring(0, arg.indexOf('=')) : arg)
                .toList();
        StringBuilder message = new StringBuilder(unknown.size() == 1 ? "Unknown option: " : "Unknown options: ");
        for (int i = 0; i < unknown.size(); i++) message.append(i == 0 ? "'" : ", '").append(unknown.get(i)).append('\'');
        String typed = unknown.getFirst(), best = null;
        int shared = -1;
        for (String candidate : ex.getSuggestions()) {
            String name = candidate.startsWith("-") ? candidate : "--" + candidate;
            int common = 0;
            while (common < Math.min(name.length(), typed.length()) && name.charAt(common) == typed.charAt(common)) common++;
            if (common > shared) {
                shared = common;
                best = name;
            }
        }
        // Two letters in common is what picocli's candidates all have; a guess needs a third, and half the typed
        // name ("--no-such-option" shares only "--no-" with "--no-lifespan": no guess).
        if (best != null && unknown.size() == 1 && shared >= "--".length() + 3 && 2 * shared >= typed.length()) message.append(" (did you mean '").append(best).append("'?)");
        return message.toString();
    }

    /** Whether the option appears among the arguments (its value may not be recorded yet when conversion fails). */
    private static boolean typed(OptionSpec option, String[] args) {
        for (String arg : args) {
            for (String name : option.names()) {
                if (arg.equals(name) || arg.startsWith(name + "=")) return true;
            }
        }
        return false;
    }

    private static String groupedOptions(Help help) {
        StringBuilder out = new StringBuilder();
        Map<String, OptionSpec> byName = new LinkedHashMap<>();
        for (OptionSpec option : help.commandSpec().options()) byName.put(option.longestName(), option);
        for (Map.Entry<String, List<String>> group : GROUPS.entrySet()) {
            Help.Layout layout = help.createDefaultLayout();
            for (String name : group.getValue()) {
                OptionSpec option = byName.remove(name);
                if (option != null) layout.addOption(option, help.createDefaultParamLabelRenderer());
            }
            out.append('\n').append(group.getKey()).append(":\n").append(layout);
        }
        if (!byName.isEmpty()) {
            Help.Layout layout = help.createDefaultLayout();
            byName.values().forEach(option -> layout.addOption(option, help.createDefaultParamLabelRenderer()));
            out.append("\nOther:\n").append(layout);
        }
        return out.toString();
    }
}
