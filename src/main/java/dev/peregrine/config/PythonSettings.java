package dev.peregrine.config;

import java.nio.file.Path;
import java.util.List;

/**
 * Which interpreter runs the application, what goes in front of its {@code sys.path}, and whether the
 * objects of the application's start are frozen out of Python's full garbage collections.
 */
public record PythonSettings(Path venv, boolean autoVenv, List<Path> pythonPath, boolean gcFreeze) {
}
