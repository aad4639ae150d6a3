package dev.driftwarden.flink;

/** The per-event update of a {@link WindowSummary}: the one rule both the Flink aggregate and the harness use. */
public final class Summaries {
    private Summaries() {}

    /**
     * Adds one event to {@code acc}: its model's configured features only (an unconfigured model
     * counts events only). {@code values[i]} is column ci: a {@link Number} or null (numeric), a
     * {@link String} or null (categorical, boolean).
     */
    public static void accumulate(WindowSummary acc, SummarySpec spec, String model, long eventMs, long topicCrc,
                                  long partition, long offset, long unknown, Object[] values) {
        accumulate(acc, spec, model, eventMs, topicCrc, partition, offset, unknown, values, null, null);
    }

    /**
     * {@link #accumulate} of an event some of whose monitored values had the wrong type: {@code invalid[i]},
     * when not null, is column ci's {reason, preview} (its value in {@code values} is null, and its sketch does
     * not see it); counted, with an example, for the feature of that column ({@code topic}: the record's).
     */
    public static void accumulate(WindowSummary acc, SummarySpec spec, String model, long eventMs, long topicCrc,
                                  long partition, long offset, long unknown, Object[] values, String[][] invalid,
                                  String topic) {
        long start = spec.windowStart(eventMs);
        if (acc.isEmpty()) {
            acc.begin(model, start, spec.windowMs, spec.models.get(model));
        } else if (acc.start != start || !acc.model.equals(model)) {
            throw new IllegalStateException("event of " + model + " at " + eventMs + " (window " + start
                    + ") given to the summary of " + acc.model + "@" + acc.start);
        } else if (!acc.boundChecked) {
            acc.bind(spec);
        }
        acc.events++;
        acc.unknownFeatures += unknown;
        SummarySpec.Model config = acc.bound;
        if (config == null) {
            return;
        }
        if (values.length != spec.numericColumns.length) {
            throw new IllegalArgumentException("window summary: " + values.length + " feature columns, the spec has "
                    + spec.numericColumns.length);
        }
        long key = Hashing.eventKey(acc.seed, topicCrc, partition, offset);
        int slot = acc.sample.offer(key);
        int[] columns = config.columns;
        for (int f = 0; f < columns.length; f++) {
            String[] why = invalid == null ? null : invalid[columns[f]];
            if (why != null) {
                acc.addInvalid(f, key, why[0], why[1], InvalidValues.where(topic, partition, offset));
                if (slot >= 0 && !config.numeric[f]) {
                    acc.sample.setText(slot, config.sampleColumn[f], null);  // a reused slot keeps no old value
                }
                continue;
            }
            Object v = values[columns[f]];
            if (config.numeric[f]) {
                if (v == null) {
                    acc.histograms[f].updateNull();
                } else {
                    acc.histograms[f].update(((Number) v).doubleValue());
                }
            } else {
                String s = acc.counts[f].update((String) v);
                if (slot >= 0) {
                    acc.sample.setText(slot, config.sampleColumn[f], s);
                }
            }
        }
        for (int g = 0; g < acc.groups.length; g++) {
            addRow(acc.groups[g], config.groupFeatures[g], columns, values, invalid, acc.groupRow);
        }
    }

    /** The event's row of one group into its moments, or counted incomplete (a null, invalid or out-of-range value). */
    private static void addRow(GroupMoments moments, int[] members, int[] columns, Object[] values, String[][] invalid,
                               double[] row) {
        for (int k = 0; k < members.length; k++) {
            int column = columns[members[k]];
            Object v = values[column];
            if (v == null || invalid != null && invalid[column] != null) {
                moments.addIncomplete();
                return;
            }
            row[k] = ((Number) v).doubleValue();
            if (!GroupMoments.inRange(row[k])) {
                moments.addIncomplete();
                return;
            }
        }
        moments.add(row);
    }
}
