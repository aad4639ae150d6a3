package dev.driftwarden.flink;

import org.apache.flink.table.api.DataTypes;
import org.apache.flink.table.catalog.DataTypeFactory;
import org.apache.flink.table.types.inference.TypeInference;
import org.apache.flink.table.types.inference.TypeStrategies;

/**
 * {@code DW_MERGE_SUMMARIES(summary BYTES)}: merges partial window summaries of one (model, window)
 * into one (sketches/FORMAT.md, kind 17).
 *
 * <p>The job summarizes each (model, Kafka partition, window) with {@link WindowSummaryAgg}, so
 * one hot model's events are summarized on as many subtasks as it has partitions, then merges
 * the partials per (model, window) with this aggregate. The merge is exact and order-independent,
 * so the result is the same bytes as one summary of all the window's events.
 */
public class MergeSummaries extends SummaryAggregate {
    private static final long serialVersionUID = 1L;

    /** Merges one partial summary (its bytes) into the window's. */
    public void accumulate(WindowSummary acc, byte[] partial) {
        if (partial != null) {
            acc.mergeOwned(WindowSummary.fromBytes(partial));
        }
    }

    @Override
    public TypeInference getTypeInference(DataTypeFactory typeFactory) {
        return TypeInference.newBuilder()
                .typedArguments(DataTypes.BYTES())
                .accumulatorTypeStrategy(TypeStrategies.explicit(accumulatorType()))
                .outputTypeStrategy(TypeStrategies.explicit(DataTypes.BYTES()))
                .build();
    }
}
