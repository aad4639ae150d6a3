package dev.driftwarden.flink;

import org.apache.flink.table.functions.AggregateFunction;

/**
 * The largest watermark candidate of the records before this one, as an OVER aggregate
 * ({@code PARTITION BY topic, partition ORDER BY proctime}): a Kafka partition's own watermark
 * just before the record arrives. The job's late rule reads it instead of the job-wide
 * {@code CURRENT_WATERMARK}, which Flink neither checkpoints nor advances at the same moment on
 * every run. This one lives in keyed state, so it is restored with the Kafka offsets after a
 * restart, and it depends only on the partition's order: a record is late, or not, the same way
 * on every run, after a resume and in replay ({@code replay/windowing.py}).
 *
 * <p>Returns null for a partition's first record.
 */
public class PreviousMark extends AggregateFunction<Long, PreviousMark.Marks> {
    private static final long serialVersionUID = 1L;

    /** The partition's mark before the latest record, and after it. */
    public static class Marks {
        public Long before;
        public Long after;
    }

    @Override
    public Marks createAccumulator() {
        return new Marks();
    }

    /** The record's own candidate ({@code event time - out-of-orderness}) moves the mark after it. */
    public void accumulate(Marks marks, Long candidate) {
        marks.before = marks.after;
        if (candidate != null && (marks.after == null || candidate > marks.after)) {
            marks.after = candidate;
        }
    }

    @Override
    public Long getValue(Marks marks) {
        return marks.before;
    }
}
