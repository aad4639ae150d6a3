package dev.driftwarden.flink;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;

import org.apache.flink.kafka.shaded.org.apache.kafka.common.config.ConfigData;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.config.ConfigException;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.config.provider.ConfigProvider;

/**
 * The secrets of the monitor config's {@code source.security}, read by the Kafka client where it runs (the
 * TaskManager), so that the job itself holds only references: {@code ${dwsecret:env:NAME}} is environment variable
 * NAME, {@code ${dwsecret:file:/path}} the file's text (UTF-8), each without its final line breaks, and the kinds
 * {@code env-jaas} / {@code file-jaas} the same text quoted for a JAAS option value (backslash, double quote and
 * control characters escaped), as {@code sasl.jaas.config} needs it. Written by
 * {@code driftwarden.core.kafka_security.java_properties}; the same rules as its {@code read_secret}.
 */
public final class KafkaSecretProvider implements ConfigProvider {
    /** The provider's name in {@code config.providers} and in every reference. */
    public static final String NAME = "dwsecret";

    @Override
    public void configure(Map<String, ?> configs) {}

    @Override
    public ConfigData get(String path) {
        return new ConfigData(Map.of());
    }

    @Override
    public ConfigData get(String kind, Set<String> keys) {
        Map<String, String> values = new HashMap<>();
        for (String key : keys) {
            values.put(key, value(kind, key));
        }
        return new ConfigData(values);
    }

    @Override
    public void close() {}

    /** The secret that {@code kind} ({@code env}, {@code file}, {@code env-jaas}, {@code file-jaas}) and {@code locator} name. */
    static String value(String kind, String locator) {
        return switch (kind) {
            case "env" -> fromEnvironment(locator);
            case "file" -> fromFile(locator);
            case "env-jaas" -> jaasQuoted(fromEnvironment(locator));
            case "file-jaas" -> jaasQuoted(fromFile(locator));
            default -> throw new ConfigException("source.security: unknown secret kind '" + kind
                    + "' (env, file, env-jaas, file-jaas)");
        };
    }

    private static String fromEnvironment(String name) {
        String value = System.getenv(name);
        if (value == null) {
            throw new ConfigException("source.security: environment variable " + name
                    + " is not set in this process (on a Flink cluster: in every TaskManager's environment)");
        }
        return withoutFinalLineBreaks(value);
    }

    private static String fromFile(String path) {
        try {
            return withoutFinalLineBreaks(new String(Files.readAllBytes(Path.of(path)), StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new ConfigException("source.security: cannot read " + path + " (" + e.getClass().getSimpleName()
                    + "; on a Flink cluster the file must exist on every TaskManager)");
        }
    }

    /** {@code text} without the line breaks (CR, LF) it ends with: a final newline is never part of a secret. */
    static String withoutFinalLineBreaks(String text) {
        int end = text.length();
        while (end > 0 && (text.charAt(end - 1) == '\n' || text.charAt(end - 1) == '\r')) {
            end--;
        }
        return text.substring(0, end);
    }

    /** {@code text} escaped for a double-quoted JAAS option value (Kafka parses it with a StreamTokenizer). */
    static String jaasQuoted(String text) {
        StringBuilder out = new StringBuilder(text.length() + 8);
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '\\' || c == '"') {
                out.append('\\').append(c);
            } else if (c < 0x20 || c == 0x7f) {
                out.append('\\').append(String.format("%03o", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.toString();
    }
}
