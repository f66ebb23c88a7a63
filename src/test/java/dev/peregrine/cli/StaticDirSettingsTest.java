package dev.peregrine.cli;

import dev.peregrine.config.ConfigException;
import dev.peregrine.config.EdgeSettings.StaticMount;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** --static-dir PREFIX=DIR: repeatable, comma-separated, from the environment, and its refusals; --compress-static with it. */
class StaticDirSettingsTest {
    @TempDir Path dir;

    private List<StaticMount> mounts(String... args) {
        return Cli.settings(args).edge().staticMounts();
    }

    @Test
    void noneByDefault() {
        assertEquals(List.of(), mounts("main:app"));
    }

    @Test
    void repeatableAndCommaSeparated() throws Exception {
        Path media = Files.createDirectory(dir.resolve("media"));
        assertEquals(List.of(new StaticMount("/static", dir), new StaticMount("/media", media)),
                mounts("--static-dir", "/static=" + dir, "--static-dir", "/media=" + media, "main:app"));
        assertEquals(List.of(new StaticMount("/static", dir), new StaticMount("/media", media)),
                mounts("--static-dir", "/static=" + dir + ",/media=" + media, "main:app"));
    }

    @Test
    void trailingSlashOfThePrefixIsDroppedAndRelativeDirectoriesMadeAbsolute() {
        List<StaticMount> mounts = mounts("--static-dir", "/static/=.", "--static-dir", "/=.", "main:app");
        assertEquals("/static", mounts.get(0).prefix());
        assertEquals("/", mounts.get(1).prefix());
        assertTrue(mounts.get(0).root().isAbsolute());
    }

    @Test
    void fromTheEnvironment() {
        List<StaticMount> mounts = Cli.withConfig(Map.of(), Map.of("PEREGRINE_STATIC_DIR", "/a=" + dir + ",/b=" + dir), false,
                () -> mounts("main:app"));
        assertEquals(List.of(new StaticMount("/a", dir), new StaticMount("/b", dir)), mounts);
    }

    @Test
    void badPairsAreRefused() {
        assertRefused("is not PREFIX=DIR", "--static-dir", "static", "main:app");
        assertRefused("must start with /", "--static-dir", "static=" + dir, "main:app");
        assertRefused("is not a directory", "--static-dir", "/static=" + dir.resolve("missing"), "main:app");
        assertRefused("is not a directory", "--static-dir", "/static=", "main:app");
    }

    @Test
    void aFileIsNotADirectory() throws Exception {
        Path file = Files.writeString(dir.resolve("f.txt"), "x");
        assertRefused("is not a directory", "--static-dir", "/static=" + file, "main:app");
    }

    @Test
    void compressStaticNeedsAStaticDir() {
        assertTrue(Cli.settings("--static-dir", "/s=" + dir, "--compress-static", "main:app").edge().compressStatic());
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--compress-static", "main:app"));
        assertEquals("option '--compress-static' needs --static-dir", e.getMessage());
    }

    private static void assertRefused(String says, String... args) {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings(args));
        assertTrue(e.getMessage().contains("--static-dir") && e.getMessage().contains(says), e.getMessage());
        assertEquals(1, e.getMessage().lines().count());
    }
}
