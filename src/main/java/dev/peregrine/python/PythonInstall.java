package dev.peregrine.python;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * The interpreter the application was installed for, and the shared libpython that embeds it: the
 * virtualenv of --venv, else the interpreter named by $PEREGRINE_PYTHON, else $VIRTUAL_ENV (unless
 * --no-auto-venv), else the python3 on PATH.
 *
 * <p>The launcher of the pip package sets PEREGRINE_PYTHON to the interpreter it was installed into
 * (its sys.executable), so that `peregrine` serves with that interpreter's packages as uvicorn does,
 * whichever virtualenv happens to be active.
 *
 * <p>{@code freeThreaded} is a build without the GIL (PEP 703, {@code Py_GIL_DISABLED}, "3.13t"): its
 * objects have a larger header, which {@link Py} must know before it reads any of them.
 */
public record PythonInstall(Path executable, Path library, String version, String prefix, boolean freeThreaded) {

    /** Why --free-threaded cannot run on this interpreter, or null when it can. */
    public String freeThreadingRefusal() {
        return freeThreaded ? null : "--free-threaded needs a free-threaded CPython (such as python3.13t): " + executable + " is built with the GIL";
    }

    /** Asked of the interpreter itself, so that pyenv shims and venvs resolve as they do for the user. */
    private static final String PROBE = String.join("\n",
            "import sys, sysconfig, os",
            "print(sys.executable)",
            "print('%d.%d.%d' % sys.version_info[:3])",
            "print(sys.prefix)",
            "print(sysconfig.get_config_var('Py_ENABLE_SHARED') or 0)",
            "print(sysconfig.get_config_var('LIBDIR') or '')",
            "print(sysconfig.get_config_var('LDLIBRARY') or '')",
            "print(sysconfig.get_config_var('INSTSONAME') or '')",
            "print(sys.base_prefix)",
            "print(getattr(sys, 'abiflags', ''))",
            "print(sysconfig.get_config_var('Py_GIL_DISABLED') or 0)");

    /** Why an interpreter cannot be used; the message is the one line the user sees. */
    public static final class Unusable extends RuntimeException {
        public Unusable(String message) {
            super(message, null, false, false);
        }
    }

    /** The interpreter chosen by whoever started the server (the pip package's launcher). */
    public static final String PYTHON_ENV = "PEREGRINE_PYTHON";
    /**
     * What a supervisor found ({@link #encode}), in its workers' environment: each worker would otherwise
     * run the same probe, a Python process of its own, while it starts.
     */
    public static final String LOCATED_ENV = "PEREGRINE_PYTHON_INSTALL";

    public static PythonInstall locate(Path venv, boolean autoVenv, Map<String, String> environment) {
        String located = environment.get(LOCATED_ENV);
        if (located != null) return decode(located);
        Path python;
        String chosen = environment.get(PYTHON_ENV);
        if (venv != null) {
            python = venvPython(venv, "--venv");
        } else if (chosen != null && !chosen.isBlank()) {
            python = Path.of(chosen);
            if (!Files.isExecutable(python)) throw new Unusable(PYTHON_ENV + " " + chosen + " is not an executable Python");
        } else if (autoVenv && environment.get("VIRTUAL_ENV") != null && !environment.get("VIRTUAL_ENV").isBlank()) {
            python = venvPython(Path.of(environment.get("VIRTUAL_ENV")), "VIRTUAL_ENV");
        } else {
            python = onPath(environment.getOrDefault("PATH", ""));
        }
        return probe(python);
    }

    /** This install as one line per field, for {@link #LOCATED_ENV}. */
    public String encode() {
        return String.join("\n", executable.toString(), library.toString(), version, prefix, Boolean.toString(freeThreaded));
    }

    static PythonInstall decode(String encoded) {
        String[] fields = encoded.split("\n", -1);
        if (fields.length != 5) throw new Unusable(LOCATED_ENV + " is not what a Peregrine supervisor writes");
        return new PythonInstall(Path.of(fields[0]), Path.of(fields[1]), fields[2], fields[3], Boolean.parseBoolean(fields[4]));
    }

    private static Path venvPython(Path venv, String source) {
        for (String name : List.of("bin/python3", "bin/python")) {
            Path candidate = venv.resolve(name);
            if (Files.isExecutable(candidate)) return candidate.toAbsolutePath();
        }
        throw new Unusable(source + " " + venv + " is not a virtualenv: it has no bin/python3");
    }

    private static Path onPath(String path) {
        for (String dir : path.split(":")) {
            if (dir.isEmpty()) continue;
            Path candidate = Path.of(dir, "python3");
            if (Files.isExecutable(candidate)) return candidate;
        }
        throw new Unusable("no python3 on PATH: install Python 3.10 or newer, or point --venv at a virtualenv");
    }

    static PythonInstall probe(Path python) {
        List<String> lines;
        try {
            Process process = new ProcessBuilder(python.toString(), "-I", "-c", PROBE)
                    .redirectErrorStream(true).start();
            process.getOutputStream().close();
            String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!process.waitFor(30, TimeUnit.SECONDS) || process.exitValue() != 0) {
                throw new Unusable(python + " did not run: " + out.strip().lines().reduce((a, b) -> b).orElse(""));
            }
            lines = out.lines().toList();
        } catch (IOException e) {
            throw new Unusable("cannot run " + python + ": " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Unusable("interrupted while asking " + python + " about itself");
        }
        if (lines.size() < 10) throw new Unusable(python + " gave an unexpected answer about itself");
        Path executable = Path.of(lines.get(0));
        String version = lines.get(1);
        String[] parts = version.split("\\.");
        int major = Integer.parseInt(parts[0]), minor = Integer.parseInt(parts[1]);
        if (major != 3 || minor < 10) {
            throw new Unusable(executable + " is Python " + version + "; Peregrine needs CPython 3.10 or newer");
        }
        if (!"1".equals(lines.get(3).strip())) {
            throw new Unusable(executable + " (Python " + version + ") was built without a shared libpython, so it cannot be embedded;"
                    + " use a Python built with --enable-shared (pyenv: PYTHON_CONFIGURE_OPTS=--enable-shared)");
        }
        boolean freeThreaded = "1".equals(lines.get(9).strip());
        String abiflags = lines.get(8).strip();
        // LIBDIR is where the library was installed when CPython was built. Relocatable builds
        // (python-build-standalone's, uv's, bytedeco's 3.14 from Maven Central) keep the build machine's
        // path there, so the library is also looked for under the prefix the interpreter runs from.
        List<Path> libdirs = new ArrayList<>();
        if (!lines.get(4).isBlank()) libdirs.add(Path.of(lines.get(4)));
        libdirs.add(Path.of(lines.get(7)).resolve("lib"));
        List<String> names = List.of(lines.get(5), lines.get(6), "libpython" + major + "." + minor + abiflags + ".so");
        for (Path libdir : libdirs) {
            for (String name : names) {
                if (name.isBlank() || !name.contains(".so")) continue;
                Path library = libdir.resolve(name);
                if (Files.exists(library)) return new PythonInstall(executable, library, version, lines.get(2), freeThreaded);
            }
        }
        throw new Unusable(executable + " (Python " + version + ") names no shared libpython that exists in "
                + libdirs.stream().map(Path::toString).distinct().collect(Collectors.joining(" or ")));
    }
}
