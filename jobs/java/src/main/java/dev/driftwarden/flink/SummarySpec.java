package dev.driftwarden.flink;

import java.io.IOException;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.Map;
import java.util.Set;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The window summary spec (JSON): {@code {"window_ms": 10000, "columns": ["numeric", "categorical"],
 * "models": {"m": {"features": [["x", 0], ["c", 1]], "sample_size": 2000, "precision": 7,
 * "max_buckets": 1024, "max_exact": 1000}}}}. Bad input raises {@link IllegalArgumentException}
 * naming what was wrong.
 */
public final class SummarySpec {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    /** One configured model: its features in configured order, the column of each, its sketch parameters. */
    public static final class Model {
        public final String name;
        public final String[] features;
        public final int[] columns;
        public final boolean[] numeric;
        /** Per feature: a boolean feature (its column holds "true" / "false"; summarized as a categorical one). */
        public final boolean[] bool;
        public final int sampleSize;
        public final int precision;
        public final int maxBuckets;
        public final int maxExact;
        /** The sampled features (the categorical ones, in configured order) and each feature's column in the sample (-1: not sampled). */
        public final String[] sampled;
        public final int[] sampleColumn;
        /** The multivariate groups (sketches/moments.py): each one's name and its features' indices in {@link #features}. */
        public String[] groupNames = new String[0];
        public int[][] groupFeatures = new int[0][];

        Model(String name, String[] features, int[] columns, boolean[] numeric, boolean[] bool, int sampleSize,
              int precision, int maxBuckets, int maxExact) {
            this.name = name;
            this.features = features;
            this.columns = columns;
            this.numeric = numeric;
            this.bool = bool;
            this.sampleSize = sampleSize;
            this.precision = precision;
            this.maxBuckets = maxBuckets;
            this.maxExact = maxExact;
            this.sampleColumn = new int[features.length];
            int sampledCount = 0;
            for (int f = 0; f < features.length; f++) {
                sampleColumn[f] = numeric[f] ? -1 : sampledCount++;
            }
            this.sampled = EventSample.sampledNames(features, numeric);
        }
    }

    public final String text;
    public final long windowMs;
    public final boolean[] numericColumns;
    public final boolean[] booleanColumns;
    public final Map<String, Model> models;

    private SummarySpec(String text, long windowMs, boolean[] numericColumns, boolean[] booleanColumns,
                        Map<String, Model> models) {
        this.text = text;
        this.windowMs = windowMs;
        this.numericColumns = numericColumns;
        this.booleanColumns = booleanColumns;
        this.models = models;
    }

    /** Parses and checks a spec. */
    public static SummarySpec parse(String text) {
        JsonNode root;
        try {
            root = MAPPER.readTree(text);
        } catch (IOException e) {
            throw new IllegalArgumentException("window summary spec is not JSON: " + e.getMessage(), e);
        }
        if (root == null || !root.isObject()) {
            throw new IllegalArgumentException("window summary spec must be a JSON object");
        }
        long windowMs = integer(root, "window_ms", "spec", -1);
        if (windowMs <= 0) {
            throw new IllegalArgumentException("spec window_ms must be a positive integer, got " + root.get("window_ms"));
        }
        JsonNode columns = root.get("columns");
        if (columns == null || !columns.isArray()) {
            throw new IllegalArgumentException("spec columns must be a list of \"numeric\"/\"categorical\"");
        }
        boolean[] numeric = new boolean[columns.size()];
        boolean[] bool = new boolean[columns.size()];
        for (int i = 0; i < numeric.length; i++) {
            String kind = columns.get(i).asText();
            if (!kind.equals("numeric") && !kind.equals("categorical") && !kind.equals("boolean")) {
                throw new IllegalArgumentException("spec columns[" + i + "] must be numeric, categorical or boolean, got "
                        + columns.get(i));
            }
            numeric[i] = kind.equals("numeric");
            bool[i] = kind.equals("boolean");
        }
        JsonNode models = root.get("models");
        if (models == null || !models.isObject()) {
            throw new IllegalArgumentException("spec models must be an object of model name -> settings");
        }
        Map<String, Model> parsed = new HashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = models.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            parsed.put(e.getKey(), model(e.getKey(), e.getValue(), numeric, bool));
        }
        return new SummarySpec(text, windowMs, numeric, bool, parsed);
    }

    private static Model model(String name, JsonNode node, boolean[] numericColumns, boolean[] booleanColumns) {
        String where = "spec model " + name;
        JsonNode features = node.get("features");
        if (features == null || !features.isArray()) {
            throw new IllegalArgumentException(where + ": features must be a list of [name, column]");
        }
        String[] names = new String[features.size()];
        int[] columns = new int[names.length];
        boolean[] numeric = new boolean[names.length];
        boolean[] bool = new boolean[names.length];
        Set<String> seen = new HashSet<>();
        for (int f = 0; f < names.length; f++) {
            JsonNode pair = features.get(f);
            if (!pair.isArray() || pair.size() != 2 || !pair.get(0).isTextual() || !pair.get(1).canConvertToInt()) {
                throw new IllegalArgumentException(where + ": features[" + f + "] must be [name, column], got " + pair);
            }
            names[f] = pair.get(0).asText();
            columns[f] = pair.get(1).asInt();
            if (columns[f] < 0 || columns[f] >= numericColumns.length) {
                throw new IllegalArgumentException(where + ": feature " + names[f] + " has column " + columns[f]
                        + ", there are " + numericColumns.length + " columns");
            }
            if (!seen.add(names[f])) {
                throw new IllegalArgumentException(where + ": feature " + names[f] + " listed twice");
            }
            numeric[f] = numericColumns[columns[f]];
            bool[f] = booleanColumns[columns[f]];
        }
        int sampleSize = (int) integer(node, "sample_size", where, 2000);
        int precision = (int) integer(node, "precision", where, 52);
        int maxBuckets = (int) integer(node, "max_buckets", where, 1024);
        int maxExact = (int) integer(node, "max_exact", where, 1000);
        if (sampleSize < 0 || precision < 0 || precision > 52 || maxBuckets < 16 || maxExact < 1) {
            throw new IllegalArgumentException(where + ": need sample_size >= 0, precision in 0..52, max_buckets >= 16,"
                    + " max_exact >= 1; got " + sampleSize + ", " + precision + ", " + maxBuckets + ", " + maxExact);
        }
        Model model = new Model(name, names, columns, numeric, bool, sampleSize, precision, maxBuckets, maxExact);
        groups(model, node.get("groups"), where);
        return model;
    }

    /** Reads {@code "groups": [[name, [feature index, ...]], ...]} (absent: none): each index a numeric feature. */
    private static void groups(Model model, JsonNode groups, String where) {
        if (groups == null) {
            return;
        }
        if (!groups.isArray()) {
            throw new IllegalArgumentException(where + ": groups must be a list of [name, [feature index, ...]]");
        }
        model.groupNames = new String[groups.size()];
        model.groupFeatures = new int[groups.size()][];
        for (int g = 0; g < groups.size(); g++) {
            JsonNode pair = groups.get(g);
            if (!pair.isArray() || pair.size() != 2 || !pair.get(0).isTextual() || !pair.get(1).isArray()) {
                throw new IllegalArgumentException(where + ": groups[" + g + "] must be [name, [feature index, ...]], got "
                        + pair);
            }
            model.groupNames[g] = pair.get(0).asText();
            int[] members = new int[pair.get(1).size()];
            for (int k = 0; k < members.length; k++) {
                JsonNode index = pair.get(1).get(k);
                int f = index.canConvertToInt() ? index.asInt() : -1;
                if (f < 0 || f >= model.features.length || !model.numeric[f]) {
                    throw new IllegalArgumentException(where + ": group " + model.groupNames[g] + " member " + index
                            + " is not the index of a numeric feature");
                }
                members[k] = f;
            }
            model.groupFeatures[g] = members;
        }
    }

    private static long integer(JsonNode node, String field, String where, long fallback) {
        JsonNode v = node.get(field);
        if (v == null && fallback >= 0) {
            return fallback;
        }
        if (v == null || !v.canConvertToInt() && !v.canConvertToLong() || !v.isIntegralNumber()) {
            throw new IllegalArgumentException(where + ": " + field + " must be an integer, got " + v);
        }
        long value = v.asLong();
        if (fallback >= 0 && value > Integer.MAX_VALUE) {
            throw new IllegalArgumentException(where + ": " + field + " too large: " + value);
        }
        return value;
    }

    /** The start of the window holding {@code eventMs}. */
    public long windowStart(long eventMs) {
        return eventMs - Math.floorMod(eventMs, windowMs);
    }
}
