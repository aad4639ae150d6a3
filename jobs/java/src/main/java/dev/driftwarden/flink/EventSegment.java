package dev.driftwarden.flink;

import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;

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
    /** {@code 0..n-1}: {@link #eval}'s arguments are their own columns. */
    private transient int[] identity;

    /**
     * One segmented model: which arguments form its key, and each top key's index. A one-value key is looked up
     * by its value ({@link #single}); a longer one through {@link #probe}, a key holder refilled per event (a
     * function instance serves one task thread), so a lookup allocates nothing.
     */
    private static final class Model {
        final int[] args;
        final Map<List<String>, Integer> index = new HashMap<>();
        final Map<String, Integer> single = new HashMap<>();
        final Map<Key, Integer> multi = new HashMap<>();
        final Key probe;

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
            index.forEach((key, i) -> {
                if (args.length == 1) {
                    single.put(key.get(0), i);
                } else {
                    multi.put(new Key(key.toArray(new String[0])), i);
                }
            });
            probe = new Key(new String[args.length]);
        }

        /** The index of the key whose values are {@code values[columns[args[i]]]}; the other segment when none. */
        int lookup(Object[] values, int[] columns) {
            if (args.length == 1) {
                return single.getOrDefault((String) values[columns[args[0]]], index.size());
            }
            for (int i = 0; i < args.length; i++) {
                probe.values[i] = (String) values[columns[args[i]]];
            }
            probe.rehash();
            return multi.getOrDefault(probe, index.size());
        }
    }

    /** A key of several values, equal to another with the same values (nulls included). */
    private static final class Key {
        final String[] values;
        int hash;

        Key(String[] values) {
            this.values = values;
            rehash();
        }

        void rehash() {
            hash = Arrays.hashCode(values);
        }

        @Override
        public int hashCode() {
            return hash;
        }

        @Override
        public boolean equals(Object other) {
            return other instanceof Key k && Arrays.equals(values, k.values);
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
        if (identity == null || identity.length != values.length) {
            identity = IntStream.range(0, values.length).toArray();
        }
        return segmentOf(model, values, identity);
    }

    /**
     * {@link #eval} of an event whose argument {@code i} is {@code values[columns[i]]} (a String or null), without
     * copying the arguments out: the source task's per-event lookup.
     */
    int segmentOf(String model, Object[] values, int[] columns) {
        if (models == null) {
            models = parse(specText);
        }
        Model segmented = model == null ? null : models.get(model);
        return segmented == null ? -1 : segmented.lookup(values, columns);
    }
}
