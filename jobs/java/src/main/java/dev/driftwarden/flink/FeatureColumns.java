package dev.driftwarden.flink;

import java.io.IOException;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.Optional;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.table.api.DataTypes;
import org.apache.flink.table.api.ValidationException;
import org.apache.flink.table.catalog.DataTypeFactory;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.binary.BinaryRowData;
import org.apache.flink.table.data.writer.BinaryRowWriter;
import org.apache.flink.table.functions.ScalarFunction;
import org.apache.flink.table.types.DataType;
import org.apache.flink.table.types.inference.TypeInference;

/**
 * {@code DW_FEATURES(value, spec)}: an event's configured feature values as typed columns, read
 * in Java, with a flag {@code ok} saying whether Java vouches for the event.
 *
 * <p>The spec (a literal, written by {@code jobs/feature_spec.py}) is JSON:
 * {@code {"columns": ["numeric", "categorical", ...], "models": {"m": {"x": 0, "c": 1}},
 * "prediction": {"m": 2}}}. The result is {@code ROW<ok BOOLEAN, c0 .. cN>}, column {@code ci} a
 * DOUBLE (numeric) or STRING (categorical); a model listed under {@code prediction} gets the
 * event's top-level prediction (null when absent or null) in that numeric column. {@code ok} is
 * true only when the Python validation would accept the event and take exactly these values from
 * it (the prediction included): a {@link Envelope#plain plain} record of a configured model
 * whose features are exactly that model's, each once, each null or of its kind's JSON type
 * (numbers as doubles, as Python's float64 columns hold them). Every other record, valid or not,
 * gets {@code ok = false} and is validated by Python from its bytes, which decides its fate.
 */
public class FeatureColumns extends ScalarFunction {
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private transient Spec spec;

    public RowData eval(byte[] value, String specText) {
        Spec parsed = spec(specText);
        Envelope envelope = Envelope.parse(value, parsed.mapping);
        if (envelope.cachedFor != parsed) {  // the job reads several columns of one record's row
            envelope.cachedRow = parsed.row(envelope);
            envelope.cachedFor = parsed;
        }
        return (RowData) envelope.cachedRow;
    }

    private Spec spec(String text) {
        if (spec == null || !spec.text.equals(text)) {
            spec = Spec.parse(text);
        }
        return spec;
    }

    @Override
    public TypeInference getTypeInference(DataTypeFactory typeFactory) {
        return TypeInference.newBuilder()
                .typedArguments(DataTypes.BYTES(), DataTypes.STRING())
                .outputTypeStrategy(call -> {
                    String text = call.getArgumentValue(1, String.class).orElseThrow(
                            () -> new ValidationException("DW_FEATURES needs its spec as a string literal"));
                    return Optional.of(Spec.parse(text).rowType());
                })
                .build();
    }

    /** The parsed spec: each column's kind and, per model, the column of each feature. */
    static final class Spec {
        final String text;
        final boolean[] numeric;
        /** Columns of boolean features: a JSON true or false, held as the text "true" or "false". */
        final boolean[] bool;
        /** How a record maps onto an event ({@code "envelope"} in the spec; absent: the contract's). */
        final Envelope.Mapping mapping;
        final Map<String, Map<String, Integer>> models = new HashMap<>();
        final Map<String, Integer> predictionColumn = new HashMap<>();
        /** Models with vector features: Python projects their arrays (core/projection.py), Java never vouches. */
        final java.util.Set<String> pythonOnly = new java.util.HashSet<>();
        // featureColumns' last answer: the model's map, the event's names (as the parser gave them), their columns
        private Map<String, Integer> lastColumnOf;
        private String[] lastNames = new String[0];
        private int[] lastColumns;

        private Spec(String text, boolean[] numeric, boolean[] bool, Envelope.Mapping mapping) {
            this.text = text;
            this.numeric = numeric;
            this.bool = bool;
            this.mapping = mapping;
        }

        static Spec parse(String text) {
            try {
                JsonNode root = MAPPER.readTree(text);
                JsonNode columns = root.get("columns");
                boolean[] numeric = new boolean[columns.size()];
                boolean[] bool = new boolean[columns.size()];
                for (int i = 0; i < numeric.length; i++) {
                    numeric[i] = "numeric".equals(columns.get(i).asText());
                    bool[i] = "boolean".equals(columns.get(i).asText());
                }
                Spec spec = new Spec(text, numeric, bool, Envelope.Mapping.parse(root.get("envelope")));
                for (Iterator<Map.Entry<String, JsonNode>> it = root.get("models").fields(); it.hasNext(); ) {
                    Map.Entry<String, JsonNode> model = it.next();
                    Map<String, Integer> columnOf = new HashMap<>();
                    model.getValue().fields().forEachRemaining(f -> columnOf.put(f.getKey(), f.getValue().asInt()));
                    spec.models.put(model.getKey(), columnOf);
                }
                JsonNode pythonOnly = root.get("python_only");
                if (pythonOnly != null) {
                    pythonOnly.forEach(m -> spec.pythonOnly.add(m.asText()));
                }
                JsonNode prediction = root.get("prediction");
                if (prediction != null) {
                    prediction.fields().forEachRemaining(m -> spec.predictionColumn.put(m.getKey(), m.getValue().asInt()));
                }
                return spec;
            } catch (IOException | RuntimeException e) {
                throw new ValidationException("DW_FEATURES: malformed spec " + text, e);
            }
        }

        DataType rowType() {
            DataTypes.Field[] fields = new DataTypes.Field[numeric.length + 1];
            fields[0] = DataTypes.FIELD("ok", DataTypes.BOOLEAN().notNull());
            for (int i = 0; i < numeric.length; i++) {
                fields[i + 1] = DataTypes.FIELD("c" + i, numeric[i] ? DataTypes.DOUBLE() : DataTypes.STRING());
            }
            return DataTypes.ROW(fields).notNull().bridgedTo(RowData.class);
        }

        /**
         * The record's values by column when Java vouches for it: a {@link Double} or null in a numeric
         * column, a {@link String} or null in a categorical one ("true" or "false" in a boolean one), a
         * column of another model (or no prediction) null; null when Java does not vouch for the record
         * (a monitored value of the wrong type among others: Python counts it invalid). Features no model
         * monitors are ignored, their non-null values counted in {@link Envelope#unknownFeatures}. The one
         * rule {@link #row} writes and the drift job's source task ({@link SourceSummaries}) summarizes.
         */
        Object[] values(Envelope envelope) {
            Map<String, Integer> columnOf = envelope.plain ? models.get(envelope.model) : null;
            EventFeatures features = envelope.features;
            if (columnOf == null || envelope.eventMillis() == null || pythonOnly.contains(envelope.model)) {
                return null;
            }
            int[] columnOfField = featureColumns(columnOf, features);
            Object[] values = new Object[numeric.length];
            int unknown = 0;
            for (int i = 0; i < features.count; i++) {
                if (columnOfField[i] < 0) {
                    unknown += features.kinds[i] == EventFeatures.NULL ? 0 : 1;
                } else if (!fill(values, columnOfField[i], features, i)) {
                    return null;
                }
            }
            envelope.unknownFeatures = unknown;
            Integer prediction = predictionColumn.get(envelope.model);
            if (prediction != null && envelope.prediction != null) {
                values[prediction] = envelope.prediction;
            }
            return values;
        }

        /**
         * The column of each of the event's features, in the event's order (-1: not the model's; the names
         * are distinct, {@link Envelope#plain}). Events of a stream name their features alike, and the parser
         * hands out one String per name it has seen: the last answer is kept, and reused while the names
         * are the same objects in the same order (the map is asked only when they are not).
         */
        private int[] featureColumns(Map<String, Integer> columnOf, EventFeatures features) {
            if (columnOf == lastColumnOf && features.count == lastNames.length) {
                boolean same = true;
                for (int i = 0; i < features.count && same; i++) {
                    same = features.names[i] == lastNames[i];
                }
                if (same) {
                    return lastColumns;
                }
            }
            int[] columns = new int[features.count];
            for (int i = 0; i < features.count; i++) {
                Integer column = columnOf.get(features.names[i]);
                columns[i] = column == null ? -1 : column;
            }
            lastColumnOf = columnOf;
            lastNames = Arrays.copyOf(features.names, features.count);
            lastColumns = columns;
            return columns;
        }

        /** Feature {@code i}'s value (or null) into its column; false when its JSON type is not the column's kind. */
        private boolean fill(Object[] values, int column, EventFeatures features, int i) {
            byte kind = features.kinds[i];
            if (kind == EventFeatures.NULL) {
                return true;
            }
            byte wanted = numeric[column] ? EventFeatures.NUMBER : bool[column] ? EventFeatures.BOOLEAN : EventFeatures.TEXT;
            if (kind != wanted) {
                return false;
            }
            values[column] = numeric[column] ? (Object) features.numbers[i]
                    : bool[column] ? (features.booleans[i] ? "true" : "false") : features.texts[i];
            return true;
        }

        /**
         * The record's row: {@link #values} when Java vouches for it, else {@code ok = false} and nulls.
         * Written in Flink's binary row format, as the SQL steps hold rows: copied on as bytes.
         */
        RowData row(Envelope envelope) {
            Object[] values = values(envelope);
            if (values == null) {
                return notVouched();
            }
            BinaryRowData row = new BinaryRowData(numeric.length + 1);
            BinaryRowWriter writer = new BinaryRowWriter(row, 16 * numeric.length);
            writer.writeBoolean(0, true);
            for (int column = 0; column < numeric.length; column++) {
                if (values[column] == null) {
                    writer.setNullAt(column + 1);
                } else if (numeric[column]) {
                    writer.writeDouble(column + 1, (Double) values[column]);
                } else {
                    writer.writeString(column + 1, StringData.fromString((String) values[column]));
                }
            }
            writer.complete();
            return row;
        }

        private RowData notVouched() {
            GenericRowData row = new GenericRowData(numeric.length + 1);
            row.setField(0, false);
            return row;
        }
    }
}
