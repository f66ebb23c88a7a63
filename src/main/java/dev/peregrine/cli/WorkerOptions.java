package dev.peregrine.cli;

import dev.peregrine.config.ServerSettings;

import java.io.IOException;
import java.io.StringReader;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.lang.reflect.ParameterizedType;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

/**
 * The command line as the supervisor resolved it (arguments, {@code PEREGRINE_*} variables,
 * {@code application.properties} and defaults alike), handed to each of its workers in the environment.
 * A worker then builds the very same settings without booting Quarkus, SmallRye Config and picocli,
 * which were most of the CPU a worker's start took (docs/benchmarks/respawn.md); that start is all that a killed
 * worker's successor, a SIGHUP's replacements and {@code --workers 4} wait for.
 *
 * <p>Each option field of {@link PeregrineCommand} that holds a value is one entry, a list one entry per
 * element; {@link java.util.Properties} does the quoting. The system properties that Quarkus's boot set
 * for Netty go along too, since the worker's Netty must be tuned as the supervisor's is.
 */
public final class WorkerOptions {
    /** The variable a supervised worker finds its options in. */
    public static final String ENV = "PEREGRINE_WORKER_OPTIONS";
    private static final String SYSTEM_PROPERTY = "system.";
    private static final String ELEMENT = "#";

    private WorkerOptions() {}

    public static String encode(PeregrineCommand command) {
        Properties out = new Properties();
        try {
            for (Field field : optionFields()) {
                Object value = field.get(command);
                if (value instanceof List<?> list) {
                    for (int i = 0; i < list.size(); i++) out.setProperty(field.getName() + ELEMENT + i, list.get(i).toString());
                } else if (value instanceof Enum<?> e) {
                    out.setProperty(field.getName(), e.name());
                } else if (value != null) {
                    out.setProperty(field.getName(), value.toString());
                }
            }
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
        for (String name : System.getProperties().stringPropertyNames()) {
            if (name.startsWith("io.netty.")) out.setProperty(SYSTEM_PROPERTY + name, System.getProperty(name));
        }
        StringWriter text = new StringWriter();
        try {
            out.store(text, null);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return text.toString();
    }

    /** The settings of {@code encoded}, after setting the system properties it carries. */
    public static ServerSettings settings(String encoded) {
        return CommandLineSettings.read(decode(encoded));
    }

    static PeregrineCommand decode(String encoded) {
        Properties in = new Properties();
        try {
            in.load(new StringReader(encoded));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        for (String key : in.stringPropertyNames()) {
            if (key.startsWith(SYSTEM_PROPERTY)) System.setProperty(key.substring(SYSTEM_PROPERTY.length()), in.getProperty(key));
        }
        PeregrineCommand command = new PeregrineCommand(null);
        try {
            for (Field field : optionFields()) {
                if (field.getType() == List.class) {
                    Class<?> element = (Class<?>) ((ParameterizedType) field.getGenericType()).getActualTypeArguments()[0];
                    List<Object> values = new ArrayList<>();
                    for (String value; (value = in.getProperty(field.getName() + ELEMENT + values.size())) != null; ) {
                        values.add(convert(element, value));
                    }
                    field.set(command, values);
                } else {
                    String value = in.getProperty(field.getName());
                    field.set(command, value == null ? null : convert(field.getType(), value));
                }
            }
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
        return command;
    }

    /** The public fields picocli fills: the options and the target. */
    private static List<Field> optionFields() {
        List<Field> fields = new ArrayList<>();
        for (Field field : PeregrineCommand.class.getFields()) {
            if (!Modifier.isStatic(field.getModifiers())) fields.add(field);
        }
        return fields;
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static Object convert(Class<?> type, String value) {
        if (type == String.class) return value;
        if (type == Integer.class) return Integer.valueOf(value);
        if (type == Long.class) return Long.valueOf(value);
        if (type == Boolean.class) return Boolean.valueOf(value);
        if (type == Path.class) return Path.of(value);
        if (type.isEnum()) return Enum.valueOf((Class<Enum>) type, value);
        throw new IllegalStateException("an option of type " + type.getName() + " cannot be handed to a worker");
    }
}
