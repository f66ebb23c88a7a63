package dev.peregrine.cli;

import dev.peregrine.config.ServerSettings;
import org.junit.jupiter.api.Test;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.lang.reflect.ParameterizedType;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** What a supervisor hands its workers gives them the options it resolved, every layer included. */
class WorkerOptionsTest {

    @Test
    void everyOptionComesBackAsTheSupervisorResolvedIt() throws IllegalAccessException {
        PeregrineCommand resolved = Cli.withSystemProperties(Map.of("peregrine.max-body", "1234"), () -> Cli.parse(
                "--workers", "3", "--host", "0.0.0.0", "--python-path", "/a b,/c=d", "--static-dir", "/s=/srv/static files",
                "--log-level", "debug", "--access-log-format", "json", "--protocol", "wsgi", "--no-http2", "--tls-ciphers", "A:B\nC",
                "--root-path", "/ü#!x", "main:app"));
        PeregrineCommand decoded = WorkerOptions.decode(WorkerOptions.encode(resolved));
        for (Field field : PeregrineCommand.class.getFields()) {
            if (Modifier.isStatic(field.getModifiers())) continue;
            assertEquals(field.get(resolved), field.get(decoded), field.getName());
        }
        assertEquals(1234L, decoded.maxBody, "a value from configuration, not the command line, goes along too");
        assertEquals(List.of(Path.of("/a b"), Path.of("/c=d")), decoded.pythonPath);
        assertEquals("A:B\nC", decoded.tlsCiphers);
        assertNull(decoded.reload, "an option left off stays off");
    }

    @Test
    void theWorkerBuildsTheSameSettings() {
        PeregrineCommand resolved = Cli.parse("--workers", "2", "--rate-limit", "100/s", "--cache-size", "8", "--compress", "main:app");
        ServerSettings direct = CommandLineSettings.read(resolved);
        ServerSettings handed = WorkerOptions.settings(WorkerOptions.encode(resolved));
        assertEquals(direct.limits(), handed.limits());
        assertEquals(direct.edge().rateLimit(), handed.edge().rateLimit());
        assertEquals(direct.edge().cache(), handed.edge().cache());
        assertEquals(direct.workers(), handed.workers());
        assertEquals(direct.app(), handed.app());
    }

    @Test
    void nettysTuningGoesAlong() {
        String encoded = Cli.withSystemProperties(Map.of("io.netty.allocator.maxOrder", "3"), () -> WorkerOptions.encode(Cli.parse("main:app")));
        System.clearProperty("io.netty.allocator.maxOrder");
        WorkerOptions.decode(encoded);
        try {
            assertEquals("3", System.getProperty("io.netty.allocator.maxOrder"));
        } finally {
            System.clearProperty("io.netty.allocator.maxOrder");
        }
    }

    /** An option of a type the codec does not know would reach a worker as an error at its start, not here. */
    @Test
    void everyOptionIsOfATypeThatCanBeHandedOn() {
        Set<Class<?>> plain = Set.of(String.class, Integer.class, Long.class, Boolean.class, Path.class);
        for (Field field : PeregrineCommand.class.getFields()) {
            if (Modifier.isStatic(field.getModifiers())) continue;
            Class<?> type = field.getType();
            if (type == List.class) type = (Class<?>) ((ParameterizedType) field.getGenericType()).getActualTypeArguments()[0];
            assertTrue(plain.contains(type) || type.isEnum(), field.getName() + " is a " + type.getName());
        }
    }
}
