package dev.peregrine.cli;

import dev.peregrine.config.Version;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;
import picocli.CommandLine.Model.OptionSpec;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class HelpAndVersionTest {

    /** Every option of the "Usage" section of /work/shared/spec/peregrine-spec.txt, in the spec's order. */
    static final List<String> SPEC_OPTIONS = List.of(
            "--host", "--port", "--unix", "--workers", "--free-threaded", "--protocol", "--root-path", "--scheme",
            "--backlog", "--max-connections", "--max-body", "--max-header-size", "--keep-alive", "--request-timeout",
            "--graceful-timeout", "--drain-delay", "--wsgi-threads", "--forwarded-allow-ips", "--factory", "--venv",
            "--no-auto-venv", "--python-path", "--python-home", "--reload", "--no-uvloop", "--no-lifespan",
            "--lifespan-scope", "--tls-cert", "--tls-key", "--tls-ciphers", "--ktls", "--no-http2", "--http2-only",
            "--http3", "--quic-port", "--no-websockets", "--ws-max-message", "--ws-ping-interval", "--ws-ping-timeout",
            "--ws-max-queue", "--ws-max-queue-bytes", "--ws-compress", "--static-dir", "--acme-domain", "--acme-email",
            "--acme-cache", "--acme-staging", "--acme-directory", "--acme-ca-bundle", "--redirect-http", "--hsts",
            "--rate-limit", "--rate-limit-burst", "--cache-size", "--cache-max-object", "--cache-ttl-max", "--compress",
            "--compress-min-size", "--compress-static", "--request-start-header", "--request-id", "--trace-context",
            "--health-check-path", "--access-log", "--access-log-format", "--metrics-port", "--metrics-host",
            "--log-level", "--version");

    /** Options beyond the spec's Usage, each described in README.md and docs/: what going further added. */
    static final List<String> BEYOND_SPEC = List.of("--no-gc-freeze", "--share-core", "--shared-store", "--shared-store-timeout", "--shared-store-ca");

    static final List<String> GROUP_HEADINGS = List.of(
            "Listening", "Application", "Python", "Limits and timeouts", "Workers and lifecycle", "Protocols", "TLS",
            "Edge", "Operations");

    private static final Pattern HEADING = Pattern.compile("^([A-Z][A-Za-z ]*):$");
    /** An option entry: indentation, an optional short name, the long name, then '=', a space or the line's end. */
    private static final Pattern ENTRY = Pattern.compile("^\\s+(?:-[A-Za-z], )?(--[a-z0-9-]+)(?:[= ]|$)");

    /** Option entries of the help, by the heading they appear under ("" before the first heading). */
    private static Map<String, List<String>> entriesByHeading(String help) {
        Map<String, List<String>> sections = new LinkedHashMap<>();
        String heading = "";
        sections.put(heading, new ArrayList<>());
        for (String line : help.lines().toList()) {
            Matcher h = HEADING.matcher(line);
            if (h.matches()) {
                heading = h.group(1);
                assertFalse(sections.containsKey(heading), "heading repeated: " + heading);
                sections.put(heading, new ArrayList<>());
                continue;
            }
            Matcher e = ENTRY.matcher(line);
            if (e.find()) sections.get(heading).add(e.group(1));
        }
        return sections;
    }

    private static Cli.Run help() {
        Cli.Run run = Cli.execute("--help");
        assertEquals(0, run.exitCode(), () -> "--help exit code; stderr: " + run.err());
        assertEquals("", run.err());
        return run;
    }

    @Test
    void helpListsTheGroupHeadingsInOrderAndNoCatchAll() {
        Map<String, List<String>> sections = entriesByHeading(help().out());
        List<String> headings = new ArrayList<>(sections.keySet());
        headings.remove("");
        assertEquals(GROUP_HEADINGS, headings, "group headings of --help, in order (no 'Other' group for stray options)");
        for (String heading : GROUP_HEADINGS) {
            assertFalse(sections.get(heading).isEmpty(), "group " + heading + " has no options");
        }
        assertTrue(sections.get("").isEmpty(), () -> "options listed before the first group: " + sections.get(""));
    }

    @Test
    void helpListsEveryOptionOfTheSpecExactlyOnce() {
        String out = help().out();
        List<String> entries = entriesByHeading(out).values().stream().flatMap(List::stream).toList();
        List<String> missing = SPEC_OPTIONS.stream().filter(o -> !entries.contains(o)).toList();
        assertTrue(missing.isEmpty(), () -> "options of the spec missing from --help: " + missing + "\n" + out);
        Set<String> seen = new TreeSet<>();
        List<String> duplicated = entries.stream().filter(o -> !seen.add(o)).toList();
        assertTrue(duplicated.isEmpty(), () -> "options listed twice: " + duplicated);
        assertTrue(entries.contains("--help"), "--help is listed");
        assertTrue(out.startsWith("Usage: peregrine"), () -> "usage line: " + out.lines().findFirst().orElse(""));
        assertTrue(out.contains("MODULE:ATTRIBUTE"), "the positional parameter is described");
    }

    @Test
    void helpPutsOptionsInTheirGroups() {
        Map<String, List<String>> sections = entriesByHeading(help().out());
        Map<String, String> expected = new LinkedHashMap<>();
        expected.put("--port", "Listening");
        expected.put("--forwarded-allow-ips", "Listening");
        expected.put("--protocol", "Application");
        expected.put("--wsgi-threads", "Application");
        expected.put("--venv", "Python");
        expected.put("--free-threaded", "Python");
        expected.put("--no-gc-freeze", "Python");
        expected.put("--max-body", "Limits and timeouts");
        expected.put("--request-timeout", "Limits and timeouts");
        expected.put("--workers", "Workers and lifecycle");
        expected.put("--graceful-timeout", "Workers and lifecycle");
        expected.put("--share-core", "Workers and lifecycle");
        expected.put("--http3", "Protocols");
        expected.put("--ws-compress", "Protocols");
        expected.put("--tls-cert", "TLS");
        expected.put("--acme-domain", "TLS");
        expected.put("--static-dir", "Edge");
        expected.put("--compress", "Edge");
        expected.put("--shared-store", "Edge");
        expected.put("--log-level", "Operations");
        expected.put("--version", "Operations");
        expected.forEach((option, group) -> assertTrue(sections.get(group).contains(option),
                () -> option + " should be under " + group + ": " + sections));
    }

    @Test
    void everyOptionOfTheCommandIsInTheSpecOrListedBeyondIt() {
        CommandLine cl = CommandLineSetup.configure(new CommandLine(Cli.command()));
        List<String> undocumented = cl.getCommandSpec().options().stream()
                .map(OptionSpec::longestName)
                .filter(name -> !name.equals("--help") && !SPEC_OPTIONS.contains(name) && !BEYOND_SPEC.contains(name))
                .toList();
        assertTrue(undocumented.isEmpty(), () -> "options the spec's Usage does not list: " + undocumented);
    }

    @Test
    void helpShowsDefaultsFromConfiguration() {
        String out = help().out();
        assertTrue(out.matches("(?s).*--port=PORT\\s+Port to bind \\(default 8000\\).*"), out);
        assertTrue(out.matches("(?s).*--host=HOST\\s+Interface to bind \\(default 127\\.0\\.0\\.1\\).*"), out);
        String overridden = Cli.withSystemProperties(Map.of("peregrine.port", "9123"), () -> help().out());
        assertTrue(overridden.matches("(?s).*Port to bind \\(default 9123\\).*"), overridden);
    }

    @Test
    void shortHelpOptionWorksToo() {
        Cli.Run run = Cli.execute("-h");
        assertEquals(0, run.exitCode());
        assertTrue(run.out().contains("Listening:"), run.out());
    }

    @Test
    void versionPrintsNameAndVersion() {
        for (String flag : List.of("--version", "-V")) {
            Cli.Run run = Cli.execute(flag);
            assertEquals(0, run.exitCode(), () -> flag + " exit code; stderr: " + run.err());
            assertEquals("", run.err());
            List<String> lines = run.out().lines().toList();
            assertEquals(1, lines.size(), () -> "one line of version: " + lines);
            assertTrue(lines.getFirst().matches("peregrine \\d+\\.\\d+\\.\\d+\\S*"), () -> "version line: " + lines.getFirst());
            assertEquals("peregrine " + Version.VERSION, lines.getFirst());
        }
    }
}
