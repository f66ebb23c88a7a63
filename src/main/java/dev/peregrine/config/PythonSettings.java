package dev.peregrine.config;

import java.nio.file.Path;
import java.util.List;

/** Which interpreter runs the application, and what goes in front of its {@code sys.path}. */
public record PythonSettings(Path venv, boolean autoVenv, List<Path> pythonPath) {
}
