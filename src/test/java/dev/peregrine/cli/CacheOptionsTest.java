package dev.peregrine.cli;

import dev.peregrine.config.CacheSettings;
import dev.peregrine.config.ConfigException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class CacheOptionsTest {
    @Test
    void withoutCacheSizeThereIsNoCache() {
        assertNull(Cli.settings("main:app").edge().cache());
    }

    @Test
    void cacheSizeTurnsItOnWithTheDefaults() {
        CacheSettings cache = Cli.settings("--cache-size", "64", "main:app").edge().cache();
        assertEquals(64L * 1024 * 1024, cache.bytes());
        assertEquals(1024 * 1024, cache.maxObjectBytes());
        assertEquals(300, cache.ttlMaxSeconds());
    }

    @Test
    void everyOptionIsTaken() {
        CacheSettings cache = Cli.settings("--cache-size", "8", "--cache-max-object", "16", "--cache-ttl-max", "5", "main:app").edge().cache();
        assertEquals(8L * 1024 * 1024, cache.bytes());
        assertEquals(16 * 1024, cache.maxObjectBytes());
        assertEquals(5, cache.ttlMaxSeconds());
    }

    @ParameterizedTest(name = "{0} {1}")
    @CsvSource({
            "--cache-size, 0, --cache-size",
            "--cache-size, 70000, --cache-size",
            "--cache-max-object, 0, --cache-max-object",
            "--cache-max-object, 2048, --cache-max-object",
            "--cache-ttl-max, 0, --cache-ttl-max",
    })
    void badValuesNameTheOption(String option, String value, String named) {
        String[] args = option.equals("--cache-size")
                ? new String[] {option, value, "main:app"}
                : new String[] {"--cache-size", "4", option, value, "main:app"};
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings(args));
        assertTrue(e.getMessage().contains("'" + named + "'"), e.getMessage());
    }
}
