package dev.peregrine.cli;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Errors found while parsing: one line {@code peregrine: ...} on stderr, exit status 2, nothing on stdout.
 * Only unknown options are combined with a target; a bad value is given without one, so that if it were
 * ever accepted, call() would stop at the missing target instead of starting a server.
 */
class CommandLineErrorsTest {

    private static String singleErrorLine(Cli.Run run) {
        assertEquals(2, run.exitCode(), () -> "exit code; stderr was: " + run.err());
        List<String> lines = run.errLines();
        assertEquals(1, lines.size(), () -> "expected exactly one line on stderr, got: " + lines);
        String line = lines.getFirst();
        assertTrue(line.startsWith("peregrine: "), () -> "line should start with 'peregrine: ': " + line);
        assertFalse(line.substring("peregrine: ".length()).isBlank(), "the message after the prefix is empty");
        assertEquals("", run.out(), "nothing should go to stdout on an error");
        return line;
    }

    @ParameterizedTest
    @ValueSource(strings = {"--bogus main:app", "--bogus", "main:app --bogus", "--port 9000 --bogus main:app", "--no-such-thing=1 main:app"})
    void unknownOptionIsOneLineAndExitTwo(String argLine) {
        String line = singleErrorLine(Cli.execute(Cli.args(argLine)));
        String option = argLine.contains("--bogus") ? "--bogus" : "--no-such-thing";
        assertTrue(line.contains(option), () -> "the line should name " + option + ": " + line);
        assertTrue(line.toLowerCase().contains("unknown option"), () -> "the line should say the option is unknown: " + line);
    }

    @ParameterizedTest
    @CsvSource({
            "--port, abc",
            "--max-body, -x",
            "--protocol, foo",
            "--log-level, loud",
            "--backlog, 1.5",
            "--keep-alive, soon",
            "--access-log-format, xml",
    })
    void badValueIsOneLineNamingTheOptionAndValue(String option, String value) {
        for (String[] args : List.of(new String[] {option, value}, new String[] {option + "=" + value})) {
            String line = singleErrorLine(Cli.execute(args));
            assertTrue(line.contains(option), () -> "the line should name " + option + ": " + line);
            assertTrue(line.contains("'" + value + "'"), () -> "the line should quote the bad value " + value + ": " + line);
        }
    }

    /**
     * A bad value typed on the command line is the command line's fault: the line must not send the user
     * to look at PEREGRINE_PORT or peregrine.port. (application.properties supplies peregrine.port,
     * peregrine.max-body and peregrine.log-level, which is what makes these three cases interesting.)
     */
    @ParameterizedTest
    @CsvSource({
            "--port, abc",
            "--max-body, -x",
            "--log-level, loud",
            "--protocol, foo",
    })
    void badValueOnTheCommandLineIsNotBlamedOnConfiguration(String option, String value) {
        String line = singleErrorLine(Cli.execute(option, value));
        assertFalse(line.contains("PEREGRINE_") || line.contains("peregrine." + option.substring(2)) || line.contains("(from "),
                () -> "a value given on the command line was attributed to configuration: " + line);
    }

    @Test
    void missingOptionParameterIsOneLine() {
        String line = singleErrorLine(Cli.execute("--port"));
        assertTrue(line.contains("--port"), line);
    }

    @Test
    void secondPositionalIsOneLine() {
        String line = singleErrorLine(Cli.execute("a:b", "c:d"));
        assertTrue(line.contains("c:d"), line);
    }

    @Test
    void booleanOptionTakesNoValue() {
        String line = singleErrorLine(Cli.execute("--reload=maybe"));
        assertTrue(line.contains("--reload") || line.contains("maybe"), line);
    }
}
