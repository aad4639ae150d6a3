package dev.driftwarden.flink;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.table.annotation.ArgumentHint;
import org.apache.flink.table.annotation.ArgumentTrait;
import org.apache.flink.table.annotation.DataTypeHint;
import org.apache.flink.table.annotation.StateHint;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.functions.ProcessTableFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * The ceiling of a fused per-event path (bench/fused_ceiling.py): how fast the drift job's per-event
 * work can run when it is one operator chained to the Kafka source.
 *
 * <p>Pipelines: {@code fused} reads each record's envelope and features as the job does
 * ({@link Envelope}, {@link FeatureColumns.Spec#row}), keeps each Kafka partition's lateness mark
 * ({@code jobs/drift_job.py}'s rule) and adds the event to its window's summary
 * ({@link Summaries#accumulate}, the job's own update), all in the source task; a window's summary
 * is serialized when the watermark passes its end. {@code parse} stops after the features (the
 * floor: reading alone). {@code function} is the same work as a process table function (SQL-native:
 * see {@link FusedFunction}). Left out of {@code fused}, so that it is a ceiling: checkpointed state,
 * the Python path of records Java does not vouch for and the dead letters, the merge of partials,
 * the analysis and the store. The job's engine options: object reuse, parallelism 1.
 *
 * <p>Arguments: {@code pipeline full-topic empty-topic spec-dir out-of-orderness-ms [dump-file]}
 * (spec-dir holds the job's {@code columns.json} and {@code aggregate.json}). Runs the empty topic
 * twice (the JVM's start, then the start-up timed), then the full one, and prints
 * {@code figures: {...}} (seconds; {@code events}: those summarized, or read by {@code parse}); with
 * a dump file, each window summary's bytes in hex, one per line, by window start.
 */
public final class FusedCeiling {
    private static final String BOOTSTRAP = System.getenv().getOrDefault("BENCH_BOOTSTRAP", "127.0.0.1:59092");

    private FusedCeiling() {}

    /** A Kafka record as the fused operator reads it. */
    public static final class Rec {
        public byte[] value;
        public String topic;
        public int partition;
        public long offset;
    }

    /** What one job counted, read back after it finished (parallelism 1: one operator instance). */
    static final class Counts {
        long events;
        final Map<Long, byte[]> summaries = new TreeMap<>();
    }

    static Counts last = new Counts();

    /** Envelope, features, the partition's lateness mark and the window summary, per event, in the source task. */
    static final class Fused extends AbstractStreamOperator<byte[]> implements OneInputStreamOperator<Rec, byte[]> {
        private static final long serialVersionUID = 1L;
        private final String columnsSpec;
        private final String aggregateSpec;
        private final long outOfOrdernessMs;
        private final boolean parseOnly;
        private final boolean keep;
        private transient EventStep step;
        private transient Map<Integer, Long> marks;
        private transient Map<Long, WindowSummary> open;
        private transient Counts counts;

        Fused(String columnsSpec, String aggregateSpec, long outOfOrdernessMs, boolean parseOnly, boolean keep) {
            this.columnsSpec = columnsSpec;
            this.aggregateSpec = aggregateSpec;
            this.outOfOrdernessMs = outOfOrdernessMs;
            this.parseOnly = parseOnly;
            this.keep = keep;
        }

        @Override
        public void open() throws Exception {
            super.open();
            step = new EventStep(columnsSpec, aggregateSpec, outOfOrdernessMs, parseOnly);
            marks = new HashMap<>();
            open = new HashMap<>();
            counts = new Counts();
            last = counts;
        }

        @Override
        public void processElement(StreamRecord<Rec> element) {
            Rec record = element.getValue();
            Long start = step.add(record.value, record.topic, record.partition, record.offset, marks, open);
            if (start != null) {
                counts.events++;
            }
        }

        @Override
        public void processWatermark(Watermark watermark) throws Exception {
            for (Iterator<Map.Entry<Long, WindowSummary>> it = open.entrySet().iterator(); it.hasNext(); ) {
                Map.Entry<Long, WindowSummary> window = it.next();
                if (window.getKey() + step.spec.windowMs - 1 <= watermark.getTimestamp()) {
                    byte[] bytes = window.getValue().toBytes();
                    if (keep) {
                        counts.summaries.put(window.getKey(), bytes);
                    }
                    output.collect(new StreamRecord<>(bytes));
                    it.remove();
                }
            }
            super.processWatermark(watermark);
        }
    }

    /** The per-event work both ways of running it share: envelope, features, lateness mark, window summary. */
    static final class EventStep {
        final FeatureColumns.Spec columns;
        final SummarySpec spec;
        private final long outOfOrdernessMs;
        private final boolean parseOnly;
        private String lastTopic;
        private long topicCrc;

        EventStep(String columnsSpec, String aggregateSpec, long outOfOrdernessMs, boolean parseOnly) {
            this.columns = FeatureColumns.Spec.parse(columnsSpec);
            this.spec = SummarySpec.parse(aggregateSpec);
            this.outOfOrdernessMs = outOfOrdernessMs;
            this.parseOnly = parseOnly;
        }

        /**
         * Adds one record to its window's summary in {@code open} (created there when new), its partition's mark
         * in {@code marks} moved on; returns the window's start, or null when the record is not summarized (no
         * event time or model, late, or not vouched for: the job's Python path). {@code parseOnly}: stops after
         * the features, the window's start returned.
         */
        Long add(byte[] value, String topic, int partition, long offset, Map<Integer, Long> marks,
                 Map<Long, WindowSummary> open) {
            Envelope envelope = Envelope.parse(value);
            Long eventMs = envelope.eventMillis();
            if (eventMs == null || envelope.model == null) {
                return null;
            }
            long start = spec.windowStart(eventMs);
            long mark = marks.getOrDefault(partition, Long.MIN_VALUE);
            marks.put(partition, Math.max(mark, eventMs - outOfOrdernessMs));
            if (start + spec.windowMs - 1 <= mark) {
                return null;  // late
            }
            RowData row = columns.row(envelope);
            if (!row.getBoolean(0)) {
                return null;  // the job's Python path
            }
            Object[] values = new Object[columns.numeric.length];
            for (int i = 0; i < values.length; i++) {
                if (!row.isNullAt(i + 1)) {
                    values[i] = columns.numeric[i] ? (Object) row.getDouble(i + 1) : row.getString(i + 1).toString();
                }
            }
            if (parseOnly) {
                return start;
            }
            if (!topic.equals(lastTopic)) {
                lastTopic = topic;
                topicCrc = Hashing.crc32(topic);
            }
            WindowSummary summary = open.computeIfAbsent(start, k -> new WindowSummary());
            Summaries.accumulate(summary, spec, envelope.model, eventMs, topicCrc, partition, offset, 0, values);
            return start;
        }
    }

    /** The process table function's state per Kafka partition: its lateness mark. */
    public static class PartitionMark {
        public Long mark;
    }

    /**
     * The same per-event work as a process table function over the Kafka table, partitioned by (topic,
     * partition), so SQL-native: one exchange of each raw record, the mark in the function's state, a timer per
     * window. Its open summaries stay outside the state (not checkpointed), which flatters it: in state, as a
     * RAW field, a 1,000,000-event run did not finish in 280 s.
     */
    @DataTypeHint("ROW<window_start BIGINT, summary BYTES>")
    public static final class FusedFunction extends ProcessTableFunction<Row> {
        private static final long serialVersionUID = 1L;
        private final String columnsSpec;
        private final String aggregateSpec;
        private final long outOfOrdernessMs;
        private transient EventStep step;
        private transient Map<Integer, Long> marks;  // the current partition's mark, from and back to the state
        private transient Map<Integer, Map<Long, WindowSummary>> open;

        public FusedFunction(String columnsSpec, String aggregateSpec, long outOfOrdernessMs) {
            this.columnsSpec = columnsSpec;
            this.aggregateSpec = aggregateSpec;
            this.outOfOrdernessMs = outOfOrdernessMs;
        }

        public void eval(Context ctx, @StateHint(name = "partition") PartitionMark state,
                         @ArgumentHint(name = "input", value = {ArgumentTrait.SET_SEMANTIC_TABLE, ArgumentTrait.REQUIRE_ON_TIME}) Row input) {
            if (step == null) {
                step = new EventStep(columnsSpec, aggregateSpec, outOfOrdernessMs, false);
                marks = new HashMap<>();
                open = new HashMap<>();
            }
            int partition = input.<Integer>getFieldAs("partition");
            if (state.mark == null) {
                marks.remove(partition);
            } else {
                marks.put(partition, state.mark);
            }
            Map<Long, WindowSummary> windows = open.computeIfAbsent(partition, p -> new HashMap<>());
            int before = windows.size();
            Long start = step.add(input.getFieldAs("value"), input.getFieldAs("topic"), partition,
                    input.<Long>getFieldAs("offset"), marks, windows);
            state.mark = marks.get(partition);
            if (start != null) {
                last.events++;
                if (windows.size() > before) {
                    ctx.timeContext(Long.class).registerOnTime(partition + "/" + start, start + step.spec.windowMs - 1);
                }
            }
        }

        public void onTimer(OnTimerContext ctx, PartitionMark state) {
            String[] timer = ctx.currentTimer().split("/");
            WindowSummary summary = open.get(Integer.parseInt(timer[0])).remove(Long.parseLong(timer[1]));
            collect(Row.of(Long.parseLong(timer[1]), summary.toBytes()));
        }
    }

    static KafkaSource<Rec> source(String topic) {
        return KafkaSource.<Rec>builder().setBootstrapServers(BOOTSTRAP).setTopics(topic)
                .setGroupId("fused-ceiling-" + System.nanoTime()).setStartingOffsets(OffsetsInitializer.earliest())
                .setBounded(OffsetsInitializer.latest())
                .setDeserializer(new KafkaRecordDeserializationSchema<Rec>() {
                    @Override
                    public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<Rec> out) {
                        Rec rec = new Rec();
                        rec.value = record.value();
                        rec.topic = record.topic();
                        rec.partition = record.partition();
                        rec.offset = record.offset();
                        out.collect(rec);
                    }

                    @Override
                    public TypeInformation<Rec> getProducedType() {
                        return TypeInformation.of(Rec.class);
                    }
                }).build();
    }

    static void runFused(String topic, String columnsSpec, String aggregateSpec, long outOfOrdernessMs,
                         boolean parseOnly, boolean keep) throws Exception {
        Configuration conf = new Configuration();
        conf.setString("pipeline.object-reuse", "true");  // as the drift job (jobs/flink_env.py JOB_TUNING)
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(1);
        // the watermark on event time read by the same Envelope (a record read twice is parsed once)
        WatermarkStrategy<Rec> watermarks = WatermarkStrategy.<Rec>forBoundedOutOfOrderness(
                Duration.ofMillis(outOfOrdernessMs)).withTimestampAssigner((rec, kafkaTime) -> {
                    Long eventMs = Envelope.parse(rec.value).eventMillis();
                    return eventMs == null ? Long.MIN_VALUE : eventMs;
                });
        env.fromSource(source(topic), watermarks, "kafka")
                .transform("fused", PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO,
                        new Fused(columnsSpec, aggregateSpec, outOfOrdernessMs, parseOnly, keep))
                .sinkTo(new DiscardingSink<>());
        env.execute("fused ceiling");
    }

    static void runFunction(String topic, String columnsSpec, String aggregateSpec, long outOfOrdernessMs)
            throws Exception {
        Configuration conf = new Configuration();
        conf.setString("pipeline.object-reuse", "true");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(1);
        StreamTableEnvironment tables = StreamTableEnvironment.create(env);
        last = new Counts();
        tables.createTemporarySystemFunction("DW_EVENT_MILLIS", EventTimeMillis.class);
        tables.createTemporarySystemFunction("DW_FUSED", new FusedFunction(columnsSpec, aggregateSpec, outOfOrdernessMs));
        tables.executeSql("CREATE TEMPORARY TABLE src (`value` BYTES, `topic` STRING METADATA VIRTUAL, "
                + "`partition` INT METADATA VIRTUAL, `offset` BIGINT METADATA VIRTUAL, "
                + "et AS TO_TIMESTAMP_LTZ(COALESCE(DW_EVENT_MILLIS(`value`), 0), 3), WATERMARK FOR et AS et - INTERVAL '"
                + String.format("%.3f", outOfOrdernessMs / 1000.0) + "' SECOND) WITH ('connector' = 'kafka', 'topic' = '" + topic
                + "', 'properties.bootstrap.servers' = '" + BOOTSTRAP + "', 'properties.group.id' = 'fused-ceiling-"
                + System.nanoTime() + "', 'scan.startup.mode' = 'earliest-offset', "
                + "'scan.bounded.mode' = 'latest-offset', 'format' = 'raw')");
        tables.executeSql("CREATE TEMPORARY TABLE out_t (`topic` STRING, `partition` INT, window_start BIGINT, "
                + "summary BYTES, et TIMESTAMP_LTZ(3)) WITH ('connector' = 'blackhole')");
        tables.executeSql("INSERT INTO out_t SELECT * FROM DW_FUSED(input => TABLE src PARTITION BY (`topic`, "
                + "`partition`), on_time => DESCRIPTOR(et))").await();
    }

    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 5) {
            System.err.println("usage: FusedCeiling fused|parse|function FULL_TOPIC EMPTY_TOPIC SPEC_DIR "
                    + "OUT_OF_ORDERNESS_MS [DUMP_FILE]");
            System.exit(2);
        }
        String pipeline = args[0];
        String columnsSpec = Files.readString(Path.of(args[3], "columns.json"));
        String aggregateSpec = Files.readString(Path.of(args[3], "aggregate.json"));
        long outOfOrdernessMs = Long.parseLong(args[4]);
        Path dump = args.length > 5 ? Path.of(args[5]) : null;
        double[][] timed = new double[3][];
        String[] topics = {args[2], args[2], args[1]};
        for (int i = 0; i < topics.length; i++) {
            long wall = System.nanoTime();
            long cpu = cpuNanos();
            switch (pipeline) {
                case "function" -> runFunction(topics[i], columnsSpec, aggregateSpec, outOfOrdernessMs);
                case "fused", "parse" -> runFused(topics[i], columnsSpec, aggregateSpec, outOfOrdernessMs,
                        pipeline.equals("parse"), dump != null && i == 2);
                default -> throw new IllegalArgumentException("unknown pipeline " + pipeline + ": fused, parse or function");
            }
            timed[i] = new double[] {(System.nanoTime() - wall) / 1e9, (cpuNanos() - cpu) / 1e9};
        }
        if (dump != null) {
            writeDump(dump, last.summaries);
        }
        System.out.printf("figures: {\"startup\": %.4f, \"startup_cpu\": %.4f, \"wall\": %.4f, \"cpu\": %.4f, "
                + "\"events\": %d}%n", timed[1][0], timed[1][1], timed[2][0], timed[2][1], last.events);
        System.exit(0);
    }

    private static void writeDump(Path dump, Map<Long, byte[]> summaries) throws IOException {
        List<String> lines = new ArrayList<>();
        for (byte[] bytes : summaries.values()) {
            lines.add(HexFormat.of().formatHex(bytes));
        }
        Files.write(dump, lines);
    }
}
