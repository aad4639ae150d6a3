package dev.driftwarden.flink;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Command-line harness of {@link WindowSummaryAgg} for the cross-language tests and a micro-benchmark.
 *
 * <pre>
 * SummaryDump SPEC_FILE [--partials N] [--segments SEGMENTS_FILE]   &lt; records.jsonl
 * SummaryDump --bench EVENTS [--segments N]
 * SummaryDump --segment-lookup SEGMENT_SPEC_FILE   &lt; {"model": ..., "values": [...]} lines
 * </pre>
 *
 * Each stdin line is {@code {"model", "event_ms", "topic", "partition", "offset", "unknown", "values": [c0..cN]}}
 * and, for an event with values of the wrong type, {@code "invalid": [[column, reason, preview], ...]}
 * (NaN/Infinity allowed, as Python's json writes them). Records are grouped by (model, window
 * start); record i of a group goes to partial accumulator i mod N; each partial goes through the
 * state serializer and back, then all are merged into an empty accumulator. Prints one line per
 * window: {@code JSON-quoted model TAB start TAB base64(summary bytes)}.
 *
 * <p>With {@code --segments} (the JSON {@link MergeSegments} is built with) each record also has a
 * {@code segment} (its index among its model's segment keys): each segment's records are summarized
 * so, in N partials, and the partials' bytes merged by {@link MergeSegments} as the job merges the
 * source task's, its accumulator through its state serializer part way and at the end.
 */
public final class SummaryDump {
    private static final ObjectMapper MAPPER = new ObjectMapper().enable(JsonParser.Feature.ALLOW_NON_NUMERIC_NUMBERS);

    private static final ThreadMXBean CPU = ManagementFactory.getThreadMXBean();

    private SummaryDump() {}

    public static void main(String[] args) throws IOException {
        if (args.length == 2 && args[0].equals("--bench")) {
            bench(Integer.parseInt(args[1]));
            return;
        }
        if (args.length == 4 && args[0].equals("--bench") && args[2].equals("--segments")) {
            benchSegments(Integer.parseInt(args[1]), Integer.parseInt(args[3]));
            return;
        }
        if (args.length == 2 && args[0].equals("--segment-lookup")) {
            segmentLookup(Files.readString(Path.of(args[1])));
            return;
        }
        int partials = 1;
        String specPath = null;
        String segmentsPath = null;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--partials") && i + 1 < args.length) {
                partials = Integer.parseInt(args[++i]);
            } else if (args[i].equals("--segments") && i + 1 < args.length) {
                segmentsPath = args[++i];
            } else if (specPath == null && !args[i].startsWith("--")) {
                specPath = args[i];
            } else {
                usage("unexpected argument " + args[i]);
            }
        }
        if (specPath == null || partials < 1) {
            usage(specPath == null ? "missing SPEC_FILE" : "--partials must be >= 1");
        }
        String specJson = Files.readString(Path.of(specPath));
        WindowSummaryAgg agg = new WindowSummaryAgg(specJson);
        SummarySpec spec = SummarySpec.parse(specJson);
        MergeSegments merge = segmentsPath == null ? null : new MergeSegments(Files.readString(Path.of(segmentsPath)));
        Map<String, TreeMap<Long, List<JsonNode>>> groups = new TreeMap<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        int lineNo = 0;
        for (String line; (line = in.readLine()) != null; ) {
            lineNo++;
            if (line.isBlank()) {
                continue;
            }
            JsonNode r = MAPPER.readTree(line);
            long start = spec.windowStart(field(r, "event_ms", lineNo).asLong());
            groups.computeIfAbsent(field(r, "model", lineNo).asText(), m -> new TreeMap<>())
                    .computeIfAbsent(start, s -> new ArrayList<>()).add(r);
        }
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        for (Map.Entry<String, TreeMap<Long, List<JsonNode>>> model : groups.entrySet()) {
            for (Map.Entry<Long, List<JsonNode>> window : model.getValue().entrySet()) {
                byte[] bytes = merge == null ? summarize(agg, spec, window.getValue(), partials)
                        : summarizeSegments(agg, merge, spec, window.getValue(), partials);
                out.println(MAPPER.writeValueAsString(model.getKey()) + "\t" + window.getKey() + "\t"
                        + Base64.getEncoder().encodeToString(bytes));
            }
        }
        out.flush();
    }

    private static void usage(String problem) {
        System.err.println("SummaryDump: " + problem + "\nusage: SummaryDump SPEC_FILE [--partials N] [--segments FILE]"
                + " < records.jsonl"
                + "\n       SummaryDump --bench EVENTS [--segments N]");
        System.exit(2);
    }

    private static JsonNode field(JsonNode record, String name, int lineNo) {
        JsonNode v = record.get(name);
        if (v == null || v.isNull()) {
            throw new IllegalArgumentException("stdin line " + lineNo + ": missing " + name);
        }
        return v;
    }

    /**
     * One window's records, spread over {@code partials} accumulators, merged. Each accumulator goes
     * through state and back halfway (as after a restore, the rest of its events update it as read) and
     * at the end.
     */
    private static byte[] summarize(WindowSummaryAgg agg, SummarySpec spec, List<JsonNode> records, int partials)
            throws IOException {
        List<WindowSummary> accs = new ArrayList<>();
        for (int i = 0; i < partials; i++) {
            accs.add(agg.createAccumulator());
        }
        for (int i = 0; i < records.size(); i++) {
            if (i == records.size() / 2) {
                accs.replaceAll(SummaryDump::throughStateUnchecked);
            }
            JsonNode r = records.get(i);
            int line = i + 1;
            agg.accumulate(accs.get(i % partials), field(r, "model", line).asText(), field(r, "event_ms", line).asLong(),
                    field(r, "topic", line).asText(), field(r, "partition", line).asInt(),
                    field(r, "offset", line).asLong(), r.path("unknown").asInt(0),
                    r.hasNonNull("invalid") ? r.get("invalid").toString() : null, values(r, spec, line));
        }
        List<WindowSummary> restored = new ArrayList<>();
        for (WindowSummary acc : accs) {
            restored.add(throughState(acc));
        }
        WindowSummary merged = agg.createAccumulator();
        agg.merge(merged, restored);
        return agg.getValue(merged);
    }

    /**
     * One window's records summarized per segment ({@link #summarize} in {@code partials} partials, each
     * partial's bytes a part), the parts merged by {@link MergeSegments}, its accumulator through state
     * part way (as after a restore) and at the end.
     */
    private static byte[] summarizeSegments(WindowSummaryAgg agg, MergeSegments merge, SummarySpec spec,
                                            List<JsonNode> records, int partials) throws IOException {
        Map<Integer, List<List<JsonNode>>> bySegment = new TreeMap<>();
        for (int i = 0; i < records.size(); i++) {
            int segment = field(records.get(i), "segment", i + 1).asInt();
            List<List<JsonNode>> shares = bySegment.computeIfAbsent(segment, s -> new ArrayList<>());
            if (shares.isEmpty()) {
                for (int p = 0; p < partials; p++) {
                    shares.add(new ArrayList<>());
                }
            }
            shares.get(i % partials).add(records.get(i));
        }
        SegmentPartials acc = merge.createAccumulator();
        int parts = 0;
        for (Map.Entry<Integer, List<List<JsonNode>>> segment : bySegment.entrySet()) {
            for (List<JsonNode> share : segment.getValue()) {
                if (!share.isEmpty()) {
                    merge.accumulate(acc, summarize(agg, spec, share, 1), segment.getKey());
                    if (++parts == bySegment.size() / 2 + 1) {
                        acc = throughState(acc);
                    }
                }
            }
        }
        return merge.getValue(throughState(acc));
    }

    private static Object[] values(JsonNode record, SummarySpec spec, int line) {
        JsonNode values = field(record, "values", line);
        int columns = spec.numericColumns.length;
        if (!values.isArray() || values.size() != columns) {
            throw new IllegalArgumentException("record " + line + ": values must be a list of " + columns + " columns");
        }
        Object[] out = new Object[columns];
        for (int c = 0; c < columns; c++) {
            JsonNode v = values.get(c);
            if (v.isNull()) {
                continue;
            }
            if (spec.numericColumns[c] ? !v.isNumber() : !v.isTextual()) {
                throw new IllegalArgumentException("record " + line + ": column c" + c + " must be "
                        + (spec.numericColumns[c] ? "a number" : "a string") + ", got " + v);
            }
            out[c] = spec.numericColumns[c] ? (Object) v.asDouble() : v.asText();
        }
        return out;
    }

    private static WindowSummary throughStateUnchecked(WindowSummary acc) {
        try {
            return throughState(acc);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The accumulator after a trip through its Flink state serializer. */
    static WindowSummary throughState(WindowSummary acc) throws IOException {
        return throughState(acc, WindowSummarySerializer.INSTANCE);
    }

    /** The merge's accumulator after a trip through its Flink state serializer. */
    static SegmentPartials throughState(SegmentPartials acc) throws IOException {
        return throughState(acc, SegmentPartialsSerializer.INSTANCE);
    }

    /** {@code value} written by {@code serializer} and read back, as after a checkpoint and a restore. */
    private static <T> T throughState(T value, TypeSerializer<T> serializer) throws IOException {
        DataOutputSerializer out = new DataOutputSerializer(4096);
        serializer.serialize(value, out);
        return serializer.deserialize(new DataInputDeserializer(out.getCopyOfBuffer()));
    }

    /** ns/event of accumulate for 20 numeric + 5 categorical columns (FORMAT.md defaults), one window; run 0 warms up. */
    private static void bench(int events) throws IOException {
        WindowSummaryAgg agg = new WindowSummaryAgg(benchSpec());
        Random random = new Random(7);
        double[][] numbers = new double[4096][20];
        char[][][] texts = new char[4096][5][];
        for (int r = 0; r < numbers.length; r++) {
            for (int c = 0; c < 20; c++) {
                numbers[r][c] = random.nextGaussian() * (c + 1) + c;
            }
            for (int c = 0; c < 5; c++) {
                texts[r][c] = ("cat-" + random.nextInt(50)).toCharArray();
            }
        }
        for (int run = 0; run < 3; run++) {
            WindowSummary acc = agg.createAccumulator();
            long c0 = CPU.getCurrentThreadCpuTime();
            long t0 = System.nanoTime();
            for (int i = 0; i < events; i++) {
                // a fresh row per event, as Flink's conversion hands one over (boxed doubles, decoded strings)
                Object[] row = new Object[25];
                double[] n = numbers[i & 4095];
                char[][] t = texts[i & 4095];
                for (int c = 0; c < 20; c++) {
                    row[c] = n[c];
                }
                for (int c = 0; c < 5; c++) {
                    row[20 + c] = new String(t[c]);
                }
                agg.accumulate(acc, "m", 1_000L + (i & 1023), "events", i & 3, (long) i, 0, null, row);
            }
            long t1 = System.nanoTime();
            long c1 = CPU.getCurrentThreadCpuTime();
            byte[] bytes = agg.getValue(acc);
            WindowSummary back = throughState(acc);
            long t2 = System.nanoTime();
            System.out.printf("run %d: %d events, accumulate %.1f ns/event wall, %.1f ns/event CPU; getValue + state round trip %.2f ms;"
                    + " summary %d bytes (%.0f per feature), state %d events%n", run, events,
                    (t1 - t0) / (double) events, (c1 - c0) / (double) events, (t2 - t1) / 1e6, bytes.length, bytes.length / 25.0, back.events());
        }
    }

    /**
     * Each stdin line {@code {"model": ..., "values": [v0, ..., vN]}} (the {@link EventSegment} arguments; null
     * values allowed): its segment as the source task looks it up ({@link EventSegment#segmentOf}), one per line.
     */
    private static void segmentLookup(String specJson) throws IOException {
        EventSegment segments = new EventSegment(specJson);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            JsonNode row = MAPPER.readTree(line);
            JsonNode values = row.get("values");
            Object[] args = new Object[values.size()];
            int[] columns = new int[values.size()];
            for (int i = 0; i < args.length; i++) {
                args[i] = values.get(i).isNull() ? null : values.get(i).asText();
                columns[i] = i;
            }
            out.append(segments.segmentOf(row.get("model").isNull() ? null : row.get("model").asText(), args, columns))
                    .append('\n');
        }
        System.out.print(out);
    }

    /** The bench spec: model m, 20 numeric + 5 categorical columns (FORMAT.md defaults), one-hour windows. */
    private static String benchSpec() {
        StringBuilder spec = new StringBuilder("{\"window_ms\": 3600000, \"columns\": [");
        StringBuilder features = new StringBuilder();
        for (int c = 0; c < 25; c++) {
            spec.append(c > 0 ? ", " : "").append(c < 20 ? "\"numeric\"" : "\"categorical\"");
            features.append(c > 0 ? ", " : "").append("[\"f").append(c).append("\", ").append(c).append(']');
        }
        return spec.append("], \"models\": {\"m\": {\"features\": [").append(features).append("]}}}").toString();
    }

    /**
     * A segmented window as the job builds it at parallelism 1: EVENTS events (20 normal values
     * rounded to 5 decimals, as bench/bench_job.py sends, and 5 categories) in N + 1 segments
     * (segment j gets a share ~ 1 / (j + 1), the last gathers the rest as "other" does), one
     * accumulator per segment, each summary's bytes, then MergeSegments; 12 windows, the first
     * ones warm the JIT. Per window: accumulate us/event, segment getValue ms and merge ms (CPU).
     */
    private static void benchSegments(int events, int segments) {
        WindowSummaryAgg agg = new WindowSummaryAgg(benchSpec());
        StringBuilder keys = new StringBuilder();
        for (int s = 0; s <= segments; s++) {
            keys.append(s > 0 ? ", " : "").append("[\"s").append(s).append("\"]");
        }
        MergeSegments merge = new MergeSegments("{\"m\": {\"by\": [\"f24\"], \"keys\": [" + keys + "]}}");
        Random random = new Random(7);
        Object[][] rows = new Object[events][];
        int[] segmentOf = new int[events];
        for (int i = 0; i < events; i++) {
            segmentOf[i] = Math.min(segments, (int) Math.floor(Math.exp(random.nextDouble() * Math.log(2.0 * segments + 1))) - 1);
            rows[i] = new Object[25];
            for (int c = 0; c < 20; c++) {
                rows[i][c] = Math.round(random.nextGaussian() * 1e5) / 1e5;
            }
            for (int c = 20; c < 25; c++) {
                rows[i][c] = "cat-" + random.nextInt(8);
            }
        }
        for (int run = 0; run < 12; run++) {
            long c0 = CPU.getCurrentThreadCpuTime();
            WindowSummary[] parts = new WindowSummary[segments + 1];
            for (int s = 0; s <= segments; s++) {
                parts[s] = agg.createAccumulator();
            }
            for (int i = 0; i < events; i++) {
                agg.accumulate(parts[segmentOf[i]], "m", 1_000L, "events", 0, (long) run * events + i, 0, null, rows[i]);
            }
            long c1 = CPU.getCurrentThreadCpuTime();
            SegmentPartials acc = merge.createAccumulator();
            long bytes = 0;
            for (int s = 0; s <= segments; s++) {
                byte[] part = agg.getValue(parts[s]);
                bytes += part.length;
                merge.accumulate(acc, part, s);
            }
            long c2 = CPU.getCurrentThreadCpuTime();
            byte[] window = merge.getValue(acc);
            long c3 = CPU.getCurrentThreadCpuTime();
            System.out.printf("run %d: %d events in %d segments: accumulate %.2f us/event, segment summaries %.1f ms"
                    + " (%d KiB), merge %.1f ms (%d KiB) CPU%n", run, events, segments + 1, (c1 - c0) / 1e3 / events,
                    (c2 - c1) / 1e6, bytes / 1024, (c3 - c2) / 1e6, window.length / 1024);
        }
    }
}
