package dev.driftwarden.flink;

import java.util.List;
import java.util.Properties;
import java.util.regex.Pattern;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.KafkaSourceEnumState;
import org.apache.flink.connector.kafka.source.split.KafkaPartitionSplit;
import org.apache.flink.core.io.SimpleVersionedSerializer;

/**
 * Flink's Kafka source with the drift job's idleness rule: its readers are {@link CaughtUpReader}s
 * (a partition is idle only when caught up), everything else (enumerator, splits, their state and
 * serializers, so checkpoints and savepoints) is the Kafka source's own.
 */
final class CaughtUpSource implements Source<KafkaRecord, KafkaPartitionSplit, KafkaSourceEnumState>,
        ResultTypeQueryable<KafkaRecord> {
    private static final long serialVersionUID = 1L;
    /** How often the enumerator looks for partitions added to the topics (the connector's default: 5 minutes). */
    static final long PARTITION_DISCOVERY_MS = 10_000;

    private final KafkaSource<KafkaRecord> kafka;
    private final Properties connection;
    private final SourceSettings settings;

    /** {@code kafka} built from {@code settings}, whose client connects with {@code connection}. */
    CaughtUpSource(KafkaSource<KafkaRecord> kafka, Properties connection, SourceSettings settings) {
        this.kafka = kafka;
        this.connection = connection;
        this.settings = settings;
    }

    @Override
    public Boundedness getBoundedness() {
        return kafka.getBoundedness();
    }

    @Override
    public SourceReader<KafkaRecord, KafkaPartitionSplit> createReader(SourceReaderContext context) throws Exception {
        PartitionEnds ends = new PartitionEnds(connection, settings.groupId, List.copyOf(settings.topics),
                settings.topicPattern == null ? null : Pattern.compile(settings.topicPattern), !settings.bounded);
        return new CaughtUpReader(kafka.createReader(context), ends, context, settings.idlenessMs, !settings.bounded);
    }

    @Override
    public SplitEnumerator<KafkaPartitionSplit, KafkaSourceEnumState> createEnumerator(
            SplitEnumeratorContext<KafkaPartitionSplit> context) throws Exception {
        return kafka.createEnumerator(context);
    }

    @Override
    public SplitEnumerator<KafkaPartitionSplit, KafkaSourceEnumState> restoreEnumerator(
            SplitEnumeratorContext<KafkaPartitionSplit> context, KafkaSourceEnumState checkpoint) throws Exception {
        return kafka.restoreEnumerator(context, checkpoint);
    }

    @Override
    public SimpleVersionedSerializer<KafkaPartitionSplit> getSplitSerializer() {
        return kafka.getSplitSerializer();
    }

    @Override
    public SimpleVersionedSerializer<KafkaSourceEnumState> getEnumeratorCheckpointSerializer() {
        return kafka.getEnumeratorCheckpointSerializer();
    }

    @Override
    public TypeInformation<KafkaRecord> getProducedType() {
        return kafka.getProducedType();
    }
}
