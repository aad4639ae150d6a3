package dev.driftwarden.flink;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

/**
 * The drift job's source task alone (bench/fused_ceiling.py): how fast its per-event work runs
 * with nothing after it, beside the whole job and plain Flink SQL.
 *
 * <p>Pipelines: {@code fused} is the job's own source task ({@link SummarySource}'s Kafka source and
 * watermarks, {@link SourceSummaries} chained to it, built from the job's settings), its partial
 * summaries collected here; {@code parse} reads each record's envelope and features as it does and
 * stops there (the floor: reading alone). Left out, so that it is a ceiling of the job: the Python
 * path (none of the bench's records need it), the merge of partials, the analysis and the store.
 * The job's engine options: object reuse, parallelism 1; checkpoints off.
 *
 * <p>Arguments: {@code pipeline full-settings empty-settings [dump-file]} (the job's source settings,
 * {@code jobs/drift_job.py source_settings}, for the full and the empty topic). Runs the empty topic
 * twice (the JVM's start, then the start-up timed), then the full one, and prints
 * {@code figures: {...}} (seconds; {@code events}: those summarized, or read by {@code parse}); with
 * a dump file, each window summary's bytes in hex, one per line, by window start.
 */
public final class FusedCeiling {
    private FusedCeiling() {}

    /** What one job counted, read back after it finished (parallelism 1: one operator instance). */
    static final class Counts {
        long events;
        final Map<Long, byte[]> summaries = new TreeMap<>();
    }

    static Counts last = new Counts();

    /** Collects the source task's partial summaries (one a window at parallelism 1) and counts their events. */
    static final class Collect extends AbstractStreamOperator<Row> implements OneInputStreamOperator<Row, Row> {
        private static final long serialVersionUID = 1L;
        private final boolean keep;

        Collect(boolean keep) {
            this.keep = keep;
        }

        @Override
        public void processElement(StreamRecord<Row> element) {
            byte[] part = element.getValue().getFieldAs(4);  // (model, segment, window_start, window_end, part)
            last.events += WindowSummary.fromBytes(part).events();
            if (keep) {
                last.summaries.put(element.getValue().<Long>getFieldAs(2), part);
            }
        }
    }

    /** Reads each record's envelope and features as the source task does, and stops there. */
    static final class ParseOnly extends AbstractStreamOperator<Row> implements OneInputStreamOperator<KafkaRecord, Row> {
        private static final long serialVersionUID = 1L;
        private final String columnsSpec;
        private transient FeatureColumns.Spec columns;

        ParseOnly(String columnsSpec) {
            this.columnsSpec = columnsSpec;
        }

        @Override
        public void open() throws Exception {
            super.open();
            columns = FeatureColumns.Spec.parse(columnsSpec);
        }

        @Override
        public void processElement(StreamRecord<KafkaRecord> element) {
            if (columns.values(element.getValue().envelope()) != null) {  // it checks the event time and model too
                last.events++;
            }
        }
    }

    static void run(String pipeline, String settingsJson, boolean keep) throws Exception {
        Configuration conf = new Configuration();
        conf.setString("pipeline.object-reuse", "true");  // as the drift job (jobs/flink_env.py JOB_TUNING)
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(1);
        SourceSettings settings = SourceSettings.parse(settingsJson);
        DataStream<KafkaRecord> records = env.fromSource(SummarySource.caughtUpSource(settings),
                SummarySource.watermarks(settings), SummarySource.SOURCE_NAME);
        last = new Counts();
        DataStream<Row> out = pipeline.equals("parse")
                ? records.transform("parse", SourceSummaries.PARTIAL_TYPE, new ParseOnly(settings.columns))
                : records.transform(SummarySource.OPERATOR_NAME, SourceSummaries.PARTIAL_TYPE,
                        new SourceSummaries(settingsJson))
                        .transform("collect", Types.ROW(), new Collect(keep));
        out.sinkTo(new DiscardingSink<>());
        env.execute("fused ceiling");
    }

    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3 || !(args[0].equals("fused") || args[0].equals("parse"))) {
            System.err.println("usage: FusedCeiling fused|parse FULL_SETTINGS EMPTY_SETTINGS [DUMP_FILE]");
            System.exit(2);
        }
        String full = Files.readString(Path.of(args[1]));
        String empty = Files.readString(Path.of(args[2]));
        Path dump = args.length > 3 ? Path.of(args[3]) : null;
        double[][] timed = new double[3][];
        String[] settings = {empty, empty, full};
        for (int i = 0; i < settings.length; i++) {
            long wall = System.nanoTime();
            long cpu = cpuNanos();
            run(args[0], settings[i], dump != null && i == 2);
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
