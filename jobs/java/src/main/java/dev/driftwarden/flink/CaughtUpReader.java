package dev.driftwarden.flink;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.SourceEvent;
import org.apache.flink.api.connector.source.SourceOutput;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.connector.kafka.source.split.KafkaPartitionSplit;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Kafka source reader of the drift job, with the job's idleness rule ({@link PartitionProgress}):
 * Flink's own reader reads, and this one tells Flink which partitions are idle. It tracks each
 * partition's position as records are emitted, has {@link PartitionEnds} read the partitions' ends,
 * and marks a partition idle only once it has been caught up (nothing left to read) for
 * {@code idleness}; behind or unreadable, it is marked active again. A reader with no partition goes
 * idle after {@code idleness} too.
 *
 * <p>A partition added to a subscribed topic while the job runs is read only once the enumerator
 * discovers it and assigns it ({@link CaughtUpSource#PARTITION_DISCOVERY_MS}); until then, the
 * reader that will own it (the enumerator's rule, {@link SplitOwner}) holds its watermark with an
 * output of its own that never advances, so the other partitions do not carry the watermark past
 * the new partition's first records. Such a hold ends when the partition is assigned, or after
 * {@link #HOLD_LIMIT_MS} (logged), so a wrong guess only delays windows.
 *
 * <p>Everything else (reading, checkpoints, splits, alignment's pauses) is Flink's reader's.
 */
final class CaughtUpReader implements SourceReader<KafkaRecord, KafkaPartitionSplit> {
    private static final Logger LOG = LoggerFactory.getLogger(CaughtUpReader.class);
    /** The longest a new partition is held for before it is assigned to this reader. */
    static final long HOLD_LIMIT_MS = 6 * CaughtUpSource.PARTITION_DISCOVERY_MS;
    private static final String HOLD_PREFIX = "held-for-new-partition:";

    private final SourceReader<KafkaRecord, KafkaPartitionSplit> kafka;
    private final PartitionEnds ends;
    private final SourceReaderContext context;
    private final long idlenessNanos;
    private final boolean holdNewPartitions;
    private final Map<String, Split> splits = new ConcurrentHashMap<>();
    private final Set<TopicPartition> everAssigned = new HashSet<>();
    private final Map<TopicPartition, Long> holds = new HashMap<>();  // partition -> since (nanos)
    private final AtomicReference<CompletableFuture<Void>> news = new AtomicReference<>(new CompletableFuture<>());
    private volatile PartitionEnds.Check latest;
    private Set<TopicPartition> knownAtStart;
    private ReaderOutput<KafkaRecord> output;
    private Tracking tracking;
    private boolean readerIdle;
    private long noSplitsSince;

    /** A partition this reader reads, and how far it has read it. */
    private static final class Split {
        final TopicPartition partition;
        final PartitionProgress progress;

        Split(TopicPartition partition, long startingOffset) {
            this.partition = partition;
            this.progress = new PartitionProgress(startingOffset);
        }
    }

    CaughtUpReader(SourceReader<KafkaRecord, KafkaPartitionSplit> kafka, PartitionEnds ends,
                   SourceReaderContext context, long idlenessMs, boolean holdNewPartitions) {
        this.kafka = kafka;
        this.ends = ends;
        this.context = context;
        this.idlenessNanos = TimeUnit.MILLISECONDS.toNanos(idlenessMs);
        this.holdNewPartitions = holdNewPartitions;
        this.noSplitsSince = System.nanoTime();
    }

    @Override
    public void start() {
        kafka.start();
        ends.start("driftwarden-partition-ends-" + context.getIndexOfSubtask(), this::watched, check -> {
            latest = check;
            news.get().complete(null);
        });
    }

    private Collection<PartitionEnds.Watched> watched() {
        List<PartitionEnds.Watched> out = new ArrayList<>(splits.size());
        splits.forEach((id, split) -> out.add(new PartitionEnds.Watched(id, split.partition, split.progress)));
        return out;
    }

    @Override
    public InputStatus pollNext(ReaderOutput<KafkaRecord> readerOutput) throws Exception {
        if (tracking == null || output != readerOutput) {
            output = readerOutput;
            tracking = new Tracking(readerOutput);
        }
        if (news.get().isDone()) {
            news.set(new CompletableFuture<>());
            apply(latest);
        }
        return kafka.pollNext(tracking);
    }

    /** Applies a check's answers: each partition's idleness, the holds for new partitions, the reader's idleness. */
    private void apply(PartitionEnds.Check check) {
        if (check == null) {
            return;
        }
        check.ends().forEach((id, answer) -> {
            Split split = splits.get(id);
            if (split != null) {
                split.progress.checked(answer[0], answer[1], answer[2], check.nanos());
            }
        });
        if (holdNewPartitions && check.partitions() != null) {
            holdNewPartitions(check.partitions(), check.nanos());
        }
        boolean allIdle = markPartitions() && holds.isEmpty();
        if (splits.isEmpty() && holds.isEmpty()) {
            allIdle = idlenessNanos > 0 && check.nanos() - noSplitsSince >= idlenessNanos;
        }
        setReaderIdle(allIdle);
    }

    /** Marks each partition idle or active as the rule now says (through Flink's output for it); whether all are. */
    private boolean markPartitions() {
        boolean allIdle = true;
        for (Map.Entry<String, Split> entry : splits.entrySet()) {
            PartitionProgress progress = entry.getValue().progress;
            boolean idle = progress.idleNow(idlenessNanos);
            if (idle != progress.idle()) {
                progress.setIdle(idle);
                SourceOutput<KafkaRecord> split = output.createOutputForSplit(entry.getKey());  // Flink's, made already
                if (idle) {
                    split.markIdle();
                } else {
                    split.markActive();
                }
            }
            allIdle &= idle;
        }
        return allIdle;
    }

    /**
     * Flink marks the task's output idle when every partition is, but not active again when one
     * is (only a watermark above the last one does that): the reader's own output does both.
     */
    private void setReaderIdle(boolean idle) {
        if (idle != readerIdle) {
            readerIdle = idle;
            if (idle) {
                output.markIdle();
            } else {
                output.markActive();
            }
        }
    }

    /** Holds the watermark for each partition added since the reader started that it will own and does not read yet. */
    private void holdNewPartitions(Set<TopicPartition> partitions, long nanos) {
        if (knownAtStart == null) {
            knownAtStart = new HashSet<>(partitions);
        }
        for (TopicPartition partition : partitions) {
            if (!knownAtStart.contains(partition) && !everAssigned.contains(partition) && !holds.containsKey(partition)
                    && SplitOwner.of(partition.topic(), partition.partition(), context.currentParallelism())
                    == context.getIndexOfSubtask()) {
                LOG.info("new partition {}: the watermark is held until it is assigned", partition);
                holds.put(partition, nanos);
                output.createOutputForSplit(HOLD_PREFIX + partition);  // an output that never advances
            }
        }
        for (TopicPartition partition : new ArrayList<>(holds.keySet())) {
            if (nanos - holds.get(partition) >= TimeUnit.MILLISECONDS.toNanos(HOLD_LIMIT_MS)) {
                LOG.warn("new partition {} was not assigned to this reader within {} ms: the watermark moves on",
                        partition, HOLD_LIMIT_MS);
                release(partition);
            }
        }
    }

    private void release(TopicPartition partition) {
        if (holds.remove(partition) != null) {
            output.releaseOutputForSplit(HOLD_PREFIX + partition);
        }
    }

    @Override
    public CompletableFuture<Void> isAvailable() {
        CompletableFuture<Void> data = kafka.isAvailable();
        CompletableFuture<Void> checked = news.get();
        if (data.isDone() || checked.isDone()) {
            return CompletableFuture.completedFuture(null);
        }
        return CompletableFuture.anyOf(data, checked).thenApply(ignored -> null);
    }

    @Override
    public void addSplits(List<KafkaPartitionSplit> added) {
        for (KafkaPartitionSplit split : added) {
            splits.put(split.splitId(), new Split(split.getTopicPartition(), split.getStartingOffset()));
            everAssigned.add(split.getTopicPartition());
            release(split.getTopicPartition());
        }
        if (readerIdle) {  // a partition to read: active before its first record
            setReaderIdle(false);
        }
        kafka.addSplits(added);
    }

    @Override
    public List<KafkaPartitionSplit> snapshotState(long checkpointId) {
        return kafka.snapshotState(checkpointId);
    }

    @Override
    public void notifyNoMoreSplits() {
        kafka.notifyNoMoreSplits();
    }

    @Override
    public void handleSourceEvents(SourceEvent sourceEvent) {
        kafka.handleSourceEvents(sourceEvent);
    }

    @Override
    public void notifyCheckpointComplete(long checkpointId) throws Exception {
        kafka.notifyCheckpointComplete(checkpointId);
    }

    @Override
    public void notifyCheckpointAborted(long checkpointId) throws Exception {
        kafka.notifyCheckpointAborted(checkpointId);
    }

    @Override
    public void pauseOrResumeSplits(Collection<String> toPause, Collection<String> toResume) {
        kafka.pauseOrResumeSplits(toPause.stream().filter(id -> !id.startsWith(HOLD_PREFIX)).toList(),
                toResume.stream().filter(id -> !id.startsWith(HOLD_PREFIX)).toList());
    }

    @Override
    public void close() throws Exception {
        try {
            ends.close();
        } finally {
            kafka.close();
        }
    }

    /** An output that hands watermarks and idleness to Flink's output {@code flink} unchanged. */
    private abstract static class Forwarding<O extends SourceOutput<KafkaRecord>> implements SourceOutput<KafkaRecord> {
        final O flink;

        Forwarding(O flink) {
            this.flink = flink;
        }

        @Override
        public void emitWatermark(Watermark watermark) {
            flink.emitWatermark(watermark);
        }

        @Override
        public void markIdle() {
            flink.markIdle();
        }

        @Override
        public void markActive() {
            flink.markActive();
        }
    }

    /** The reader output Flink's reader writes to: per partition, an output that moves its position per record. */
    private final class Tracking extends Forwarding<ReaderOutput<KafkaRecord>> implements ReaderOutput<KafkaRecord> {
        Tracking(ReaderOutput<KafkaRecord> flink) {
            super(flink);
        }

        @Override
        public void collect(KafkaRecord record) {
            flink.collect(record);
        }

        @Override
        public void collect(KafkaRecord record, long timestamp) {
            flink.collect(record, timestamp);
        }

        @Override
        public SourceOutput<KafkaRecord> createOutputForSplit(String splitId) {
            SourceOutput<KafkaRecord> split = flink.createOutputForSplit(splitId);
            Split tracked = splits.get(splitId);
            return tracked == null ? split : new Positioned(tracked.progress, split);
        }

        @Override
        public void releaseOutputForSplit(String splitId) {
            splits.remove(splitId);
            if (splits.isEmpty()) {
                noSplitsSince = System.nanoTime();
            }
            flink.releaseOutputForSplit(splitId);
        }
    }

    /** One partition's output: each record moves the partition's position; one on an idle partition activates it first. */
    private final class Positioned extends Forwarding<SourceOutput<KafkaRecord>> {
        private final PartitionProgress progress;

        Positioned(PartitionProgress progress, SourceOutput<KafkaRecord> flink) {
            super(flink);
            this.progress = progress;
        }

        @Override
        public void collect(KafkaRecord record) {
            activate();
            flink.collect(record);
            progress.emitted(record.offset);
        }

        @Override
        public void collect(KafkaRecord record, long timestamp) {
            activate();
            flink.collect(record, timestamp);
            progress.emitted(record.offset);
        }

        private void activate() {
            if (progress.idle()) {
                progress.setIdle(false);
                flink.markActive();
                setReaderIdle(false);
            }
        }
    }
}
