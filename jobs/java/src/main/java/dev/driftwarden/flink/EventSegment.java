package dev.driftwarden.flink;

import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.table.functions.ScalarFunction;

/**
 * {@code dw_segment(model STRING, v0 STRING, ..., vN STRING)}: the segment of an event, as the
 * index of its key among its model's segment keys (the last index: the other segment), or -1 for a
 * model without segments. One hash lookup per event.
 *
 * <p>Built with the JSON {@code {"m": {"args": [0], "keys": [["US"], [null], ...]}}}: per segmented
 * model, which of the arguments {@code v0..vN} hold its {@code by} features (in {@code by} order),
 * and its top segments' keys as the values they stand for, in index order (null: the value is
 * missing; jobs/segments.py turns segment names into these values). A tuple of values that is no
 * top key is the other segment, {@code keys.length}.
 */
public class EventSegment extends ScalarFunction {
    private static final long serialVersionUID = 1L;

    private final String specText;
    private transient Map<String, Model> models;

    /** One segmented model: which arguments form its key, and each top key's index. */
    private static final class Model {
        final int[] args;
        final Map<List<String>, Integer> index = new HashMap<>();

        Model(JsonNode node) {
            JsonNode argNodes = node.get("args");
            args = new int[argNodes.size()];
            for (int i = 0; i < args.length; i++) {
                args[i] = argNodes.get(i).asInt();
            }
            for (JsonNode key : node.get("keys")) {
                String[] values = new String[key.size()];
                for (int i = 0; i < values.length; i++) {
                    values[i] = key.get(i).isNull() ? null : key.get(i).asText();
                }
                if (values.length != args.length || index.putIfAbsent(Arrays.asList(values), index.size()) != null) {
                    throw new IllegalArgumentException("segment spec: key " + key + " repeated or not "
                            + args.length + " values long");
                }
            }
        }
    }

    /** A function for {@code specJson}; a bad document fails here. */
    public EventSegment(String specJson) {
        this.specText = specJson;
        this.models = parse(specJson);
    }

    private static Map<String, Model> parse(String json) {
        return PerModelJson.parse(json, Model::new, "segment spec");
    }

    /** The segment index of an event of {@code model} whose segment arguments are {@code values}. */
    public int eval(String model, String... values) {
        if (models == null) {
            models = parse(specText);
        }
        Model segmented = model == null ? null : models.get(model);
        if (segmented == null) {
            return -1;
        }
        String[] key = new String[segmented.args.length];
        for (int i = 0; i < key.length; i++) {
            key[i] = values[segmented.args[i]];
        }
        return segmented.index.getOrDefault(Arrays.asList(key), segmented.index.size());
    }
}
