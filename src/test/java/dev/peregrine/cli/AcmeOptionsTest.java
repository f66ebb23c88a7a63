package dev.peregrine.cli;

import dev.peregrine.config.AcmeSettings;
import dev.peregrine.config.ConfigException;
import dev.peregrine.config.ServerSettings;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The --acme-* options: what they fill in, and what is refused before a CA is asked anything. */
class AcmeOptionsTest {
    @TempDir
    Path tmp;

    @Test
    void aDomainAloneTurnsTlsOnWithLetsEncryptAndTheDefaultCache() {
        ServerSettings s = Cli.settings("--acme-domain", "Example.COM.", "main:app");
        AcmeSettings acme = s.tls().acme();
        assertEquals(List.of("example.com"), acme.domains());
        assertEquals(Path.of("acme"), acme.cache());
        assertEquals(AcmeSettings.LETS_ENCRYPT, acme.directory());
        assertNull(acme.email());
        assertNull(acme.caBundle());
        assertTrue(s.tls().enabled());
        assertTrue(s.tls().certificates().isEmpty());
        assertEquals("https", s.app().scheme());
    }

    @Test
    void everyOptionIsCarried() throws IOException {
        Path bundle = Files.writeString(tmp.resolve("roots.pem"), "");
        AcmeSettings acme = Cli.settings("--acme-domain", "a.example,b.example", "--acme-domain", "a.example", "--acme-email", "ops@example.com",
                "--acme-cache", tmp.resolve("cache").toString(), "--acme-directory", "https://127.0.0.1:14000/dir",
                "--acme-ca-bundle", bundle.toString(), "main:app").tls().acme();
        assertEquals(List.of("a.example", "b.example"), acme.domains(), "in order, once each");
        assertEquals("ops@example.com", acme.email());
        assertEquals(tmp.resolve("cache"), acme.cache());
        assertEquals(URI.create("https://127.0.0.1:14000/dir"), acme.directory());
        assertEquals(bundle, acme.caBundle());
        assertEquals(AcmeSettings.LETS_ENCRYPT_STAGING, Cli.settings("--acme-domain", "a.example", "--acme-staging", "main:app").tls().acme().directory());
    }

    @Test
    void anInternationalizedNameIsKeptInItsAsciiForm() {
        assertEquals(List.of("xn--bcher-kva.example"), Cli.settings("--acme-domain", "bücher.example", "main:app").tls().acme().domains());
    }

    @Test
    void withoutADomainAcmeIsOff() {
        assertNull(Cli.settings("main:app").tls().acme());
    }

    @ParameterizedTest
    @ValueSource(strings = {"192.0.2.1|is an IP address", "::1|is an IP address", "[2001:db8::1]|is an IP address",
            "*.example.com|is a wildcard", "a..example.com|has an empty label", ".example.com|has an empty label",
            "localhost|is not a fully qualified domain name", "-a.example.com|inner hyphens", "a_b.example.com|inner hyphens",
            "example.123|numeric label", "|is empty"})
    void aNameThatIsNotADnsHostNameIsRefused(String caseText) {
        String[] parts = caseText.split("\\|", -1);
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--acme-domain=" + parts[0], "main:app"));
        assertTrue(e.getMessage().startsWith("invalid value for option '--acme-domain': '" + parts[0] + "'"), e.getMessage());
        assertTrue(e.getMessage().contains(parts[1]), e.getMessage());
    }

    @Test
    void aLabelOver63CharactersIsRefused() {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--acme-domain", "a".repeat(64) + ".example", "main:app"));
        assertTrue(e.getMessage().contains("63"), e.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"--acme-email=a@example.com", "--acme-cache=/tmp/x", "--acme-staging", "--acme-directory=https://ca.example/dir",
            "--acme-ca-bundle=ca.pem"})
    void anAcmeOptionWithoutADomainIsRefused(String option) {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings(option, "main:app"));
        assertEquals("option '" + option.split("=")[0] + "' needs --acme-domain", e.getMessage());
    }

    @Test
    void stagingAndAnotherDirectoryExcludeEachOther() {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--acme-domain", "a.example", "--acme-staging",
                "--acme-directory", "https://ca.example/dir", "main:app"));
        assertEquals("options '--acme-staging' and '--acme-directory' exclude each other", e.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"http://ca.example/dir", "ca.example/dir", "https://", "not a url"})
    void theDirectoryMustBeAnHttpsUrl(String url) {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--acme-domain", "a.example", "--acme-directory", url, "main:app"));
        assertTrue(e.getMessage().startsWith("invalid value for option '--acme-directory'"), e.getMessage());
    }

    @Test
    void aCacheThatIsAFileOrCannotBeCreatedIsRefused() throws IOException {
        Path file = Files.writeString(tmp.resolve("file"), "");
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--acme-domain", "a.example", "--acme-cache", file.toString(), "main:app"));
        assertEquals("option '--acme-cache': " + file + " is not a directory", e.getMessage());
        e = assertThrows(ConfigException.class, () -> Cli.settings("--acme-domain", "a.example", "--acme-cache", file.resolve("sub").toString(), "main:app"));
        assertTrue(e.getMessage().startsWith("option '--acme-cache': cannot create"), e.getMessage());
    }

    @Test
    void anUnreadableCaBundleIsRefused() {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--acme-domain", "a.example", "--acme-ca-bundle",
                tmp.resolve("missing.pem").toString(), "main:app"));
        assertEquals("option '--acme-ca-bundle': cannot read " + tmp.resolve("missing.pem"), e.getMessage());
    }

    @Test
    void anAddressThatIsNotOneIsRefused() {
        ConfigException e = assertThrows(ConfigException.class, () -> Cli.settings("--acme-domain", "a.example", "--acme-email", "ops", "main:app"));
        assertEquals("invalid value for option '--acme-email': 'ops' is not an e-mail address", e.getMessage());
    }

    @Test
    void acmeCountsAsTlsForTheRedirectHstsAndQuic() {
        ServerSettings s = Cli.settings("--acme-domain", "a.example", "--redirect-http", "8080", "--hsts", "60", "main:app");
        assertEquals(8080, s.tls().redirectHttpPort());
        ServerSettings h3 = Cli.settings("--acme-domain", "a.example", "--http3", "--port", "8443", "main:app");
        assertTrue(h3.protocols().http3());
        assertEquals(8443, h3.protocols().quicPort());
        ConfigException ciphers = assertThrows(ConfigException.class, () -> Cli.settings("--acme-domain", "a.example", "--tls-ciphers", "ECDHE-RSA-AES128-GCM-SHA256", "main:app"));
        assertEquals("option '--tls-ciphers' needs --tls-cert and --tls-key", ciphers.getMessage());
    }

    @Test
    void eachOptionIsAlsoAnEnvironmentVariable() {
        ServerSettings s = Cli.withConfig(java.util.Map.of(), java.util.Map.of("PEREGRINE_ACME_DOMAIN", "env.example", "PEREGRINE_ACME_EMAIL", "ops@example.com"), false,
                () -> Cli.settings("main:app"));
        assertEquals(List.of("env.example"), s.tls().acme().domains());
        assertEquals("ops@example.com", s.tls().acme().email());
    }
}
