package dev.driftwarden.flink;

import java.util.HashMap;
import java.util.Map;
import java.util.function.ObjLongConsumer;

/**
 * The drift job's event-time rules, per record in its source task ({@link SourceSummaries}): the
 * time a record is windowed and watermarked by, its Kafka partition's lateness mark, and why the
 * record does not go to its window (null: it does). The Python twin is {@code pipeline/event_time.py}
 * (the rules) with {@code pipeline/windowing.py} (the marks), which replay and the notebook front door
 * use; {@code tests/test_event_time_java.py} runs both over the same records and compares them record
 * by record ({@link EventTimeDump} is its harness).
 *
 * <p>In order: a record whose event time or model cannot be read is turned away ({@code envelope});
 * a record whose event time is more than the allowed skew ahead of its Kafka record's timestamp is a
 * bad clock ({@code future}); otherwise its window is late when the window's last millisecond is at or
 * below its partition's mark before it, or the job's watermark ({@code late}). Every record whose
 * event time can be read and is no bad clock moves its partition's mark to {@code event time -
 * out-of-orderness} when higher, whatever the rest of the record holds: Python validates it later.
 */
public final class EventTimeRules {
    /** The mark of a partition before its first record: below every candidate. */
    static final long NO_MARK = Long.MIN_VALUE;

    /** A Kafka partition. */
    record PartitionKey(String topic, int partition) {}

    private final long windowMs;
    private final long outOfOrdernessMs;
    private final long maxFutureSkewMs;
    private final String envelopeReason;
    private final String futureReason;
    private final String lateReason;
    private final Map<PartitionKey, long[]> marks = new HashMap<>();  // each partition's mark, in a cell changed in place
    private PartitionKey lastPartition;
    private long[] lastMark;
    private long watermark = Long.MIN_VALUE;

    public EventTimeRules(long windowMs, long outOfOrdernessMs, long maxFutureSkewMs, String envelopeReason,
                          String futureReason, String lateReason) {
        this.windowMs = windowMs;
        this.outOfOrdernessMs = outOfOrdernessMs;
        this.maxFutureSkewMs = maxFutureSkewMs;
        this.envelopeReason = envelopeReason;
        this.futureReason = futureReason;
        this.lateReason = lateReason;
    }

    /** The rules of a job's source settings, for windows of {@code windowMs}. */
    static EventTimeRules of(SourceSettings settings, long windowMs) {
        return new EventTimeRules(windowMs, settings.outOfOrdernessMs, settings.maxFutureSkewMs,
                settings.envelopeReason, settings.futureReason, settings.lateReason);
    }

    /**
     * Why the record does not go to its window (null: it does); moves its partition's mark on first
     * (see the class comment).
     */
    public String turnedAway(KafkaRecord record) {
        Envelope envelope = record.envelope();
        Long eventMs = envelope.eventMillis();
        long mark = advanceMark(record, eventTime(envelope, record.timestamp, maxFutureSkewMs) - outOfOrdernessMs);
        if (eventMs == null || envelope.model == null || envelope.model.isEmpty()) {
            return envelopeReason;
        }
        if (isFuture(eventMs, record.timestamp, maxFutureSkewMs)) {
            return futureReason;
        }
        long last = windowStart(eventMs) + windowMs - 1;
        if ((mark != NO_MARK && last <= mark) || last <= watermark) {
            return lateReason;
        }
        return null;
    }

    /** Start (epoch ms) of the epoch-aligned tumbling window holding {@code eventMs}. */
    public long windowStart(long eventMs) {
        return eventMs - Math.floorMod(eventMs, windowMs);
    }

    /** The job's watermark moves on to {@code timestamp} (never back). */
    public void advanceWatermark(long timestamp) {
        watermark = Math.max(watermark, timestamp);
    }

    /** The job's watermark (Long.MIN_VALUE before the first). */
    public long watermark() {
        return watermark;
    }

    /** Each partition's mark, for the operator's state. */
    void forEachMark(ObjLongConsumer<PartitionKey> action) {
        marks.forEach((key, mark) -> action.accept(key, mark[0]));
    }

    /** Restores a partition's mark from state (the largest of several copies wins). */
    void restoreMark(String topic, int partition, long mark) {
        long[] cell = marks.computeIfAbsent(new PartitionKey(topic, partition), key -> new long[] {NO_MARK});
        cell[0] = Math.max(cell[0], mark);
    }

    /**
     * The event time a record is windowed and watermarked by: its own, or 0 when it has none that
     * can be read or it is further than the allowed skew ahead of its Kafka record's timestamp (a
     * bad clock: it never moves the watermark). The rule of {@code pipeline.event_time.is_future}.
     */
    static long eventTime(Envelope envelope, long kafkaTimestamp, long maxFutureSkewMs) {
        Long eventMs = envelope.eventMillis();
        return eventMs == null || isFuture(eventMs, kafkaTimestamp, maxFutureSkewMs) ? 0 : eventMs;
    }

    static boolean isFuture(long eventMs, long kafkaTimestamp, long maxFutureSkewMs) {
        return kafkaTimestamp > 0 && eventMs > kafkaTimestamp + maxFutureSkewMs;
    }

    /**
     * Moves the record's partition's mark on by its candidate; returns the mark before it
     * ({@link #NO_MARK}: the partition's first record). A source subtask reads its partitions'
     * records in runs, so the last partition's mark is at hand without a lookup.
     */
    private long advanceMark(KafkaRecord record, long candidate) {
        if (lastMark == null || record.partition != lastPartition.partition() || !record.topic.equals(lastPartition.topic())) {
            lastPartition = new PartitionKey(record.topic, record.partition);
            lastMark = marks.computeIfAbsent(lastPartition, key -> new long[] {NO_MARK});
        }
        long before = lastMark[0];
        if (candidate > before) {
            lastMark[0] = candidate;
        }
        return before;
    }
}
