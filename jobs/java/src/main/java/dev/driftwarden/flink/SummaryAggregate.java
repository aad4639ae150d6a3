package dev.driftwarden.flink;

import org.apache.flink.table.api.DataTypes;
import org.apache.flink.table.functions.AggregateFunction;
import org.apache.flink.table.types.DataType;

/**
 * What the job's window-summary aggregates share: a {@link WindowSummary} accumulator (a RAW type
 * with its own {@link WindowSummarySerializer}), the exact merge of partials, and the summary's
 * bytes (sketches/FORMAT.md, kind 17) as the result.
 */
public abstract class SummaryAggregate extends AggregateFunction<byte[], WindowSummary> {
    private static final long serialVersionUID = 1L;

    /** The accumulator's type, for each aggregate's type inference. */
    static DataType accumulatorType() {
        return DataTypes.RAW(WindowSummary.class, WindowSummarySerializer.INSTANCE);
    }

    @Override
    public WindowSummary createAccumulator() {
        return new WindowSummary();
    }

    /** Adds other accumulators of the same window into {@code acc}. */
    public void merge(WindowSummary acc, Iterable<WindowSummary> others) {
        for (WindowSummary other : others) {
            acc.merge(other);
        }
    }

    @Override
    public byte[] getValue(WindowSummary acc) {
        return acc.isEmpty() ? null : acc.toBytes();
    }
}
