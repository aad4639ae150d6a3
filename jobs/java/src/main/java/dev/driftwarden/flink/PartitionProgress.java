package dev.driftwarden.flink;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The drift job's idleness rule for one Kafka partition ({@code window.idleness}): the partition lets
 * the watermark pass it (is idle) only when it has nothing left to read, its position at the
 * partition's end offset, and has stayed so, with no record in between, through checks spanning
 * {@code idleness}. A partition that is behind (its end past its position), or whose end could not
 * be read (the broker away), holds the watermark back however long it is silent, and an idle one
 * that is found behind, unreadable or reading again holds it back at once.
 *
 * <p>The position is the next offset the job will emit (the last emitted record's offset + 1), or,
 * before the first record, the split's starting offset: a Kafka sentinel (below 0) until the
 * checker resolves it. The source task's thread owns everything but the position, which the
 * checker thread ({@link PartitionEnds}) also reads. Public for the rule's tests.
 */
public final class PartitionProgress {
    /** No answer: the partition's end (or a time) is not known. */
    public static final long UNKNOWN = Long.MIN_VALUE;

    private final AtomicLong position;
    private long confirmedSince = UNKNOWN;  // time of the first check of an unbroken run that found it caught up
    private long confirmedAt = UNKNOWN;  // the position throughout that run
    private long lastConfirmed = UNKNOWN;  // time of the run's latest check
    private boolean idle;

    /** A partition read from {@code startingOffset} (an offset, or a Kafka split's sentinel below 0). */
    public PartitionProgress(long startingOffset) {
        position = new AtomicLong(startingOffset);
    }

    /** A record at {@code offset} was emitted: the position moves past it (the task thread, per record). */
    public void emitted(long offset) {
        position.lazySet(offset + 1);
    }

    /** The next offset to emit; below 0: the split's starting sentinel, not resolved yet. */
    public long position() {
        return position.get();
    }

    /** Replaces the starting sentinel {@code sentinel} by the offset it stands for, unless a record moved it already. */
    public void resolve(long sentinel, long offset) {
        position.compareAndSet(sentinel, offset);
    }

    /**
     * A check's answer, taken at time {@code nanos}: with the position read as {@code observed}
     * (standing for offset {@code effective}), the partition ended at {@code end} ({@link #UNKNOWN}:
     * no answer). Ignored when a record was emitted since the position was read.
     */
    public void checked(long observed, long effective, long end, long nanos) {
        if (observed != position.get()) {
            return;
        }
        if (end == UNKNOWN || effective < 0 || effective < end) {
            confirmedSince = UNKNOWN;
            return;
        }
        if (confirmedSince == UNKNOWN || confirmedAt != observed) {
            confirmedSince = nanos;
            confirmedAt = observed;
        }
        lastConfirmed = nanos;
    }

    /** Whether the partition may be left out of the watermark now ({@code idlenessNanos} 0: never). */
    public boolean idleNow(long idlenessNanos) {
        return idlenessNanos > 0 && confirmedSince != UNKNOWN && confirmedAt == position.get()
                && lastConfirmed - confirmedSince >= idlenessNanos;
    }

    /** Whether the partition is marked idle now (what the source task last told Flink). */
    public boolean idle() {
        return idle;
    }

    void setIdle(boolean idle) {
        this.idle = idle;
    }
}
