package dev.peregrine.python;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@link PythonInstall#probe} against stand-ins that answer as real interpreters do. */
class PythonInstallTest {
    @TempDir
    Path dir;

    /** An executable that prints the probe's ten lines, whatever it is asked. */
    private Path fakePython(String version, String libdir, String ldlibrary, String basePrefix, String abiflags, String gilDisabled)
            throws IOException {
        Path python = dir.resolve("python3");
        String answer = String.join("\n", python.toString(), version, basePrefix, "1", libdir, ldlibrary, ldlibrary + ".1.0",
                basePrefix, abiflags, gilDisabled);
        Files.writeString(python, "#!/bin/sh\ncat <<'END'\n" + answer + "\nEND\n");
        Files.setPosixFilePermissions(python, PosixFilePermissions.fromString("rwxr-xr-x"));
        return python;
    }

    @Test
    void findsTheLibraryUnderThePrefixWhenLibdirNamesTheBuildMachine() throws IOException {
        Path prefix = Files.createDirectories(dir.resolve("cpython"));
        Path library = Files.createFile(Files.createDirectories(prefix.resolve("lib")).resolve("libpython3.14.so"));
        Path python = fakePython("3.14.3", "/home/runner/work/cppbuild/lib", "libpython3.14.so", prefix.toString(), "", "0");

        PythonInstall install = PythonInstall.probe(python);

        assertEquals(library, install.library());
        assertFalse(install.freeThreaded());
    }

    @Test
    void aFreeThreadedBuildIsToldApart() throws IOException {
        Path lib = Files.createDirectories(dir.resolve("lib"));
        Files.createFile(lib.resolve("libpython3.13t.so"));
        Path python = fakePython("3.13.5", lib.toString(), "libpython3.13t.so", dir.toString(), "t", "1");

        PythonInstall install = PythonInstall.probe(python);

        assertEquals(lib.resolve("libpython3.13t.so"), install.library());
        assertTrue(install.freeThreaded());
    }

    @Test
    void noLibraryAnywhereNamesBothPlacesLookedAt() throws IOException {
        Path python = fakePython("3.14.3", "/nonexistent/lib", "libpython3.14.so", dir.toString(), "", "0");

        PythonInstall.Unusable refusal = assertThrows(PythonInstall.Unusable.class, () -> PythonInstall.probe(python));

        assertTrue(refusal.getMessage().contains("/nonexistent/lib or " + dir.resolve("lib")), refusal.getMessage());
    }

    /** A supervisor's workers take the install it found, and run no probe of their own. */
    @Test
    void whatTheSupervisorFoundIsTakenAsItIs() throws IOException {
        Path lib = Files.createDirectories(dir.resolve("lib"));
        Files.createFile(lib.resolve("libpython3.13t.so"));
        PythonInstall found = PythonInstall.probe(fakePython("3.13.5", lib.toString(), "libpython3.13t.so", dir.toString(), "t", "1"));
        Files.delete(dir.resolve("python3")); // a probe now would fail

        PythonInstall handed = PythonInstall.locate(null, true, java.util.Map.of(PythonInstall.LOCATED_ENV, found.encode(), "PATH", ""));

        assertEquals(found, handed);
    }
}
