package dev.peregrine.cli;

import dev.peregrine.config.CompressionSettings;
import dev.peregrine.config.ConfigException;
import org.junit.jupiter.api.Test;

import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class CompressionOptionsTest {

    @Test
    void offByDefault() {
        assertNull(Cli.settings("main:app").edge().compression());
    }

    @Test
    void compressWithTheDefaultMinimumSize() {
        assertEquals(new CompressionSettings(1024), Cli.settings("--compress", "main:app").edge().compression());
    }

    @Test
    void minimumSizeFromTheCommandLineAndTheEnvironment() {
        assertEquals(new CompressionSettings(0), Cli.settings("--compress", "--compress-min-size", "0", "main:app").edge().compression());
        CompressionSettings fromEnv = Cli.withConfig(Map.of(), Map.of("PEREGRINE_COMPRESS", "true", "PEREGRINE_COMPRESS_MIN_SIZE", "256"), true,
                () -> Cli.settings("main:app")).edge().compression();
        assertEquals(new CompressionSettings(256), fromEnv);
    }

    @Test
    void minimumSizeAloneCompressesNothing() {
        assertNull(Cli.settings("--compress-min-size", "10", "main:app").edge().compression());
    }

    @Test
    void negativeMinimumSizeIsRefused() {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--compress", "--compress-min-size", "-1", "main:app"));
        assertTrue(e.getMessage().contains("--compress-min-size"), e.getMessage());
    }
}
