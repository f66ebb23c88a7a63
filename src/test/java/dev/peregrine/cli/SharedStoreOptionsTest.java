package dev.peregrine.cli;

import dev.peregrine.config.ConfigException;
import dev.peregrine.config.SharedStoreSettings;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class SharedStoreOptionsTest {
    private static final String SECRET = "s3cr%2Bt:pa ss";

    private static SharedStoreSettings store(String envPassword, String... args) {
        String[] all = new String[args.length + 3];
        System.arraycopy(args, 0, all, 0, args.length);
        all[args.length] = "--rate-limit";
        all[args.length + 1] = "10/s";
        all[args.length + 2] = "main:app";
        return CommandLineSettings.sharedStore(Cli.parse(all), envPassword);
    }

    @Test
    void withoutTheOptionNothingIsShared() {
        assertNull(Cli.settings("main:app").sharedStore());
    }

    @Test
    void aFullUrlIsTakenApart() {
        SharedStoreSettings s = store(null, "--shared-store", "redis://app:pw%40x@cache.internal:6380/3");
        assertFalse(s.tls());
        assertEquals("cache.internal", s.host());
        assertEquals(6380, s.port());
        assertEquals(3, s.database());
        assertEquals("app", s.user());
        assertEquals("pw@x", s.password());
        assertEquals(50, s.timeoutMillis());
        assertEquals("redis://cache.internal:6380/3", s.address());
    }

    @Test
    void theDefaultsArePort6379AndDatabase0() {
        SharedStoreSettings s = store(null, "--shared-store", "rediss://[::1]", "--shared-store-timeout", "20");
        assertTrue(s.tls());
        assertEquals("::1", s.host());
        assertEquals(6379, s.port());
        assertEquals(0, s.database());
        assertNull(s.user());
        assertNull(s.password());
        assertEquals(20, s.timeoutMillis());
        assertEquals("rediss://[::1]:6379/0", s.address());
    }

    @Test
    void thePasswordComesFromTheEnvironmentWhenTheUrlHasNone() {
        assertEquals("from-env", store("from-env", "--shared-store", "redis://h:1").password());
        assertEquals("in-url", store("from-env", "--shared-store", "redis://:in-url@h:1").password());
        assertEquals("from-env", store("from-env", "--shared-store", "redis://someone@h:1").password());
        assertEquals("someone", store("from-env", "--shared-store", "redis://someone@h:1").user());
    }

    @Test
    void thePasswordIsInNoStringOfTheSettings() {
        SharedStoreSettings s = store(null, "--shared-store", "redis://u:" + SECRET.replace(" ", "%20") + "@h:1");
        assertEquals("s3cr+t:pa ss", s.password());
        assertFalse(s.toString().contains("s3cr"), s.toString());
        assertFalse(s.address().contains("s3cr"), s.address());
    }

    @ParameterizedTest
    @ValueSource(strings = {"http://h:1", "redis://:hunter2@h:notaport", "redis://:hunter2@h:1/abc", "redis://:hunter2@h:1/0?x=1",
            "redis://:hunter2@h:0", "redis:///0", "hunter2", "redis://:hunter2@h:1/99999999", "redis://:hunt%zzer2@h:1"})
    void aMalformedUrlIsOneLineNamingTheOptionWithoutThePassword(String url) {
        ConfigException e = assertThrows(ConfigException.class, () -> store(null, "--shared-store", url));
        assertTrue(e.getMessage().startsWith("invalid value for option '--shared-store': "), e.getMessage());
        assertFalse(e.getMessage().contains("hunter2") || e.getMessage().contains("hunt%zz"), e.getMessage());
        assertFalse(e.getMessage().contains("\n"), e.getMessage());
    }

    @Test
    void theCaNeedsATlsStoreAndAReadableFile(@TempDir Path dir) throws IOException {
        Path ca = Files.writeString(dir.resolve("ca.pem"), "-----BEGIN CERTIFICATE-----\n");
        assertEquals(ca, store(null, "--shared-store", "rediss://h:1", "--shared-store-ca", ca.toString()).caFile());
        ConfigException plain = assertThrows(ConfigException.class,
                () -> store(null, "--shared-store", "redis://h:1", "--shared-store-ca", ca.toString()));
        assertTrue(plain.getMessage().contains("'--shared-store-ca' needs a rediss://"), plain.getMessage());
        ConfigException missing = assertThrows(ConfigException.class,
                () -> store(null, "--shared-store", "rediss://h:1", "--shared-store-ca", dir.resolve("none.pem").toString()));
        assertTrue(missing.getMessage().contains("'--shared-store-ca'"), missing.getMessage());
        ConfigException alone = assertThrows(ConfigException.class, () -> store(null, "--shared-store-ca", ca.toString()));
        assertTrue(alone.getMessage().contains("'--shared-store-ca' needs --shared-store"), alone.getMessage());
    }

    @Test
    void aStoreWithNothingToShareIsRefused() {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--shared-store", "redis://h:1", "main:app"));
        assertTrue(e.getMessage().contains("'--shared-store' needs --rate-limit, --cache-size or --acme-domain"), e.getMessage());
        assertEquals("h", Cli.settings("--shared-store", "redis://h:1", "--cache-size", "4", "main:app").sharedStore().host());
    }

    @Test
    void theTimeoutIsBounded() {
        ConfigException e = assertThrows(ConfigException.class,
                () -> store(null, "--shared-store", "redis://h:1", "--shared-store-timeout", "0"));
        assertTrue(e.getMessage().contains("'--shared-store-timeout'"), e.getMessage());
    }
}
