package dev.driftwarden.flink;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Function;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

/** A JSON object of one entry per model ({@code {"model": {...}, ...}}), each entry read by a function. */
final class PerModelJson {
    private PerModelJson() {}

    /** Each model's entry of {@code json} as {@code read} makes it; bad JSON fails naming {@code what}. */
    static <T> Map<String, T> parse(String json, Function<JsonNode, T> read, String what) {
        try {
            Map<String, T> out = new HashMap<>();
            JsonNode root = new ObjectMapper().readTree(json);
            root.fields().forEachRemaining(e -> out.put(e.getKey(), read.apply(e.getValue())));
            return out;
        } catch (IOException e) {
            throw new UncheckedIOException(what + ": " + e.getMessage(), e);
        }
    }
}
