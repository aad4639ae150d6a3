package dev.driftwarden.flink;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.flink.table.api.DataTypes;
import org.apache.flink.table.catalog.DataTypeFactory;
import org.apache.flink.table.types.DataType;
import org.apache.flink.table.types.inference.TypeInference;
import org.apache.flink.table.types.inference.TypeStrategies;

/**
 * The window summary aggregate (sketches/FORMAT.md, kind 17), one event at a time in the JVM.
 *
 * <p>Built with the spec JSON (see {@link SummarySpec}); arguments per row: {@code (model STRING,
 * event_ms BIGINT, topic STRING, partition INT, offset BIGINT, unknown INT, invalid STRING, c0, ..., cN)},
 * column {@code ci} DOUBLE (numeric) or STRING (categorical, boolean), nullable; {@code invalid} null, or
 * the event's values of the wrong type as JSON {@code [[column, reason, preview], ...]} (jobs/udfs.py). The result is the window
 * summary's bytes. {@link #merge} makes it usable in Flink's local-global (two-phase) window
 * aggregation; the accumulator is a RAW type with its own {@link WindowSummarySerializer}.
 */
public class WindowSummaryAgg extends SummaryAggregate {
    private static final long serialVersionUID = 1L;
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private final String specText;
    private transient SummarySpec spec;
    private transient Hashing.TopicCrc topicCrc;

    /** An aggregate for {@code specJson}; a bad spec fails here, naming what was wrong. */
    public WindowSummaryAgg(String specJson) {
        this.specText = specJson;
        this.spec = SummarySpec.parse(specJson);
    }

    private SummarySpec spec() {
        if (spec == null) {
            spec = SummarySpec.parse(specText);
        }
        return spec;
    }

    /** Adds one valid event of {@code model} to its window's summary. */
    public void accumulate(WindowSummary acc, String model, Long eventMs, String topic, Integer partition, Long offset,
                           Integer unknown, String invalid, Object... values) {
        if (model == null || eventMs == null || topic == null || partition == null || offset == null) {
            throw new IllegalArgumentException("window summary: model, event_ms, topic, partition and offset must not"
                    + " be null (got " + model + ", " + eventMs + ", " + topic + ", " + partition + ", " + offset + ")");
        }
        if (topicCrc == null) {
            topicCrc = new Hashing.TopicCrc();
        }
        Summaries.accumulate(acc, spec(), model, eventMs, topicCrc.of(topic), partition, offset,
                unknown == null ? 0 : unknown, values, invalid == null ? null : invalidByColumn(invalid, values.length),
                topic);
    }

    /** {@code [[column, reason, preview], ...]} as {reason, preview} by column. */
    static String[][] invalidByColumn(String json, int columns) {
        try {
            String[][] byColumn = new String[columns][];
            for (JsonNode entry : MAPPER.readTree(json)) {
                byColumn[entry.get(0).asInt()] = new String[] {entry.get(1).asText(), entry.get(2).asText()};
            }
            return byColumn;
        } catch (IOException | RuntimeException e) {
            throw new IllegalArgumentException("window summary: malformed invalid values " + json, e);
        }
    }

    @Override
    public TypeInference getTypeInference(DataTypeFactory typeFactory) {
        List<DataType> arguments = new ArrayList<>(List.of(DataTypes.STRING(), DataTypes.BIGINT(), DataTypes.STRING(),
                DataTypes.INT(), DataTypes.BIGINT(), DataTypes.INT(), DataTypes.STRING()));
        for (boolean numeric : spec().numericColumns) {
            arguments.add(numeric ? DataTypes.DOUBLE() : DataTypes.STRING());
        }
        return TypeInference.newBuilder()
                .typedArguments(arguments)
                .accumulatorTypeStrategy(TypeStrategies.explicit(accumulatorType()))
                .outputTypeStrategy(TypeStrategies.explicit(DataTypes.BYTES()))
                .build();
    }
}
