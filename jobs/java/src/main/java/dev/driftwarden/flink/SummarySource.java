package dev.driftwarden.flink;

import java.util.Properties;
import java.util.regex.Pattern;

import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.KafkaSourceBuilder;
import org.apache.flink.connector.kafka.source.KafkaSourceOptions;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.DataTypes;
import org.apache.flink.table.api.Schema;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.types.Row;

/**
 * The drift job's source task: the Kafka source, its per-partition watermarks on event time, and
 * {@link SourceSummaries} chained to it, registered as two temporary views of the job's table
 * environment: {@code source_partials} (partial window summaries) and {@code source_to_python}
 * (the records Python validates or keeps as dead letters), each with its rows' time as the rowtime
 * {@code et} and the source's watermark. Called once from {@code jobs/drift_job.py}.
 */
public final class SummarySource {
    /** Name of the Kafka source (its operator's metrics carry it) and of the per-event operator. */
    static final String SOURCE_NAME = "kafka";
    static final String OPERATOR_NAME = "SourceSummaries";

    private SummarySource() {}

    /** Builds the source task of {@code settingsJson} (see {@link SourceSettings}) and registers its two views. */
    public static void register(StreamExecutionEnvironment env, StreamTableEnvironment tables, String settingsJson) {
        SourceSettings settings = SourceSettings.parse(settingsJson);
        SingleOutputStreamOperator<Row> partials = env
                .fromSource(caughtUpSource(settings), watermarks(settings), SOURCE_NAME)
                .transform(OPERATOR_NAME, SourceSummaries.PARTIAL_TYPE, new SourceSummaries(settingsJson))
                .uid("source-summaries");
        tables.createTemporaryView("source_partials", tables.fromDataStream(partials, timed()));
        tables.createTemporaryView("source_to_python", tables.fromDataStream(
                partials.getSideOutput(SourceSummaries.TO_PYTHON), timed()));
    }

    /** A view's schema: the row's fields as they are, the record's timestamp as rowtime {@code et}, the source's watermark. */
    private static Schema timed() {
        return Schema.newBuilder().columnByMetadata("et", DataTypes.TIMESTAMP_LTZ(3), "rowtime")
                .watermark("et", "SOURCE_WATERMARK()").build();
    }

    /** The Kafka source with the job's idleness rule: a partition is idle only when caught up ({@link CaughtUpSource}). */
    static CaughtUpSource caughtUpSource(SourceSettings settings) {
        Properties connection = connection(settings);
        return new CaughtUpSource(kafkaSource(settings, connection), connection, settings);
    }

    /** What every Kafka client of the source task connects with (the source's consumers, the partition-end checks). */
    static Properties connection(SourceSettings settings) {
        Properties connection = new Properties();
        connection.setProperty("bootstrap.servers", settings.bootstrapServers);
        settings.kafkaProperties.forEach(connection::setProperty);  // source.security, translated once in Python
        return connection;
    }

    static KafkaSource<KafkaRecord> kafkaSource(SourceSettings settings, Properties connection) {
        KafkaSourceBuilder<KafkaRecord> builder = KafkaSource.<KafkaRecord>builder()
                .setProperties(connection)
                .setGroupId(settings.groupId)
                .setProperty(KafkaSourceOptions.PARTITION_DISCOVERY_INTERVAL_MS.key(),
                        String.valueOf(CaughtUpSource.PARTITION_DISCOVERY_MS))
                .setProperty("auto.offset.reset", "earliest")
                .setStartingOffsets(startingOffsets(settings.start))
                .setDeserializer(new KafkaRecord.Deserializer(settings.envelope, settings.avro));
        if (settings.topicPattern != null) {
            builder.setTopicPattern(Pattern.compile(settings.topicPattern));
        } else {
            builder.setTopics(settings.topics);
        }
        if (settings.bounded) {
            builder.setBounded(OffsetsInitializer.latest());
        }
        return builder.build();
    }

    /** Where reading starts: the source config's {@code start} (jobs/source.py STARTUP_MODES; a number: a timestamp). */
    static OffsetsInitializer startingOffsets(String start) {
        return switch (start) {
            case "earliest" -> OffsetsInitializer.earliest();
            case "latest" -> OffsetsInitializer.latest();
            case "committed" -> OffsetsInitializer.committedOffsets(OffsetResetStrategy.EARLIEST);
            default -> OffsetsInitializer.timestamp(Long.parseLong(start));
        };
    }

    /**
     * Per-partition watermarks as the SQL source's {@code WATERMARK FOR et AS et - out_of_orderness}:
     * the largest event time so far less the out-of-orderness, after every event or periodically.
     * No idleness here (Flink's {@code withIdleness} marks a partition idle when it is merely
     * silent): the source's readers mark a partition idle when it is caught up ({@link CaughtUpReader}).
     */
    static WatermarkStrategy<KafkaRecord> watermarks(SourceSettings settings) {
        long outOfOrdernessMs = settings.outOfOrdernessMs;
        boolean perEvent = settings.watermarkPerEvent;
        long skewMs = settings.maxFutureSkewMs;
        return WatermarkStrategy
                .<KafkaRecord>forGenerator(context -> new LargestLessLateness(outOfOrdernessMs, perEvent))
                .withTimestampAssigner((record, kafkaTime) ->
                        EventTimeRules.eventTime(record.envelope(), record.timestamp, skewMs));
    }

    /**
     * The watermark {@code largest event time - out-of-orderness}, emitted per event or periodically,
     * each value once: an emission makes Flink count the partition active again, so a partition
     * marked idle stays so until a record arrives.
     */
    static final class LargestLessLateness implements WatermarkGenerator<KafkaRecord> {
        private final long outOfOrdernessMs;
        private final boolean perEvent;
        private long largest = Long.MIN_VALUE;
        private long emitted = Long.MIN_VALUE;

        LargestLessLateness(long outOfOrdernessMs, boolean perEvent) {
            this.outOfOrdernessMs = outOfOrdernessMs;
            this.perEvent = perEvent;
        }

        @Override
        public void onEvent(KafkaRecord record, long eventTime, WatermarkOutput output) {
            long candidate = eventTime - outOfOrdernessMs;
            if (candidate > largest) {
                largest = candidate;
                if (perEvent) {
                    output.emitWatermark(new Watermark(largest));
                }
            }
        }

        @Override
        public void onPeriodicEmit(WatermarkOutput output) {
            if (!perEvent && largest > emitted) {
                emitted = largest;
                output.emitWatermark(new Watermark(largest));
            }
        }
    }
}
