package dev.driftwarden.flink;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.table.api.DataTypes;
import org.apache.flink.table.catalog.DataTypeFactory;
import org.apache.flink.table.functions.AggregateFunction;
import org.apache.flink.table.types.inference.TypeInference;
import org.apache.flink.table.types.inference.TypeStrategies;

/**
 * {@code dw_merge_segments(part BYTES, segment INT)}: merges the partial summaries of one
 * (model, window) that were kept per segment into the window's summary (sketches/FORMAT.md):
 * kind 17 for a model without segments (every partial has segment -1), else kind 18: the whole
 * window's kind 17 frame (all segments merged), the {@code by} features, then each segment that
 * had events, its key and its own kind 17 frame, keys in code-point order (as Python sorts them); a
 * segment's numeric histograms are written at its window's resolution ({@link WindowSummary#coarsenToWhole}) and
 * its event sample cut to its bottom {@code sample_size} events ({@link WindowSummary#cutSample}).
 *
 * <p>Built with the segments JSON {@code {"model": {"by": [...], "keys": [[...], ...], "sample_size": n}}}: segment i
 * is {@code keys[i]}; the last key is the other segment; {@code sample_size} (the model's segments.sample_size,
 * {@link EventSample#SEGMENT_SAMPLE_SIZE} when absent) the most events a segment's sample keeps. The accumulator ({@link SegmentPartials})
 * maps a segment to its merged summary's bytes (a few per window; merged exactly, in any order).
 */
public class MergeSegments extends AggregateFunction<byte[], SegmentPartials> {
    private static final long serialVersionUID = 1L;
    private static final int KIND_SEGMENTED = 18;

    private final String segmentsText;
    private transient Map<String, Segments> segments;

    /** The segments of each segmented model. */
    private static final class Segments {
        final byte[][] by;
        final List<byte[][]> keys = new ArrayList<>();
        final List<String[]> keyTexts = new ArrayList<>();
        /** Most events a segment's sample keeps (the model's segments.sample_size). */
        final int sampleSize;

        Segments(JsonNode node) {
            by = encode(node.get("by"));
            sampleSize = node.has("sample_size") ? node.get("sample_size").asInt() : EventSample.SEGMENT_SAMPLE_SIZE;
            for (JsonNode key : node.get("keys")) {
                keys.add(encode(key));
                String[] texts = new String[key.size()];
                for (int i = 0; i < texts.length; i++) {
                    texts[i] = key.get(i).asText();
                }
                keyTexts.add(texts);
            }
        }

        private static byte[][] encode(JsonNode texts) {
            byte[][] out = new byte[texts.size()][];
            for (int i = 0; i < out.length; i++) {
                out[i] = texts.get(i).asText().getBytes(StandardCharsets.UTF_8);
            }
            return out;
        }
    }

    /** An aggregate for {@code segmentsJson}; a bad document fails here. */
    public MergeSegments(String segmentsJson) {
        this.segmentsText = segmentsJson;
        this.segments = parse(segmentsJson);
    }

    private static Map<String, Segments> parse(String json) {
        return PerModelJson.parse(json, Segments::new, "segments spec");
    }

    private Map<String, Segments> segments() {
        if (segments == null) {
            segments = parse(segmentsText);
        }
        return segments;
    }

    @Override
    public SegmentPartials createAccumulator() {
        return new SegmentPartials();
    }

    /** Merges one partial summary of segment {@code segment} (-1: the model has no segments). */
    public void accumulate(SegmentPartials partials, byte[] partial, Integer segment) {
        if (partial == null || segment == null) {
            return;
        }
        Map<Integer, byte[]> acc = partials.parts;
        byte[] before = acc.get(segment);
        if (before == null) {
            acc.put(segment, partial);
            return;
        }
        WindowSummary merged = WindowSummary.fromBytes(before);
        merged.mergeOwned(WindowSummary.fromBytes(partial));
        acc.put(segment, merged.toBytes());
    }

    @Override
    public byte[] getValue(SegmentPartials partials) {
        Map<Integer, byte[]> acc = partials.parts;
        if (acc.isEmpty()) {
            return null;
        }
        Map<Integer, WindowSummary> parts = new HashMap<>();
        acc.forEach((segment, bytes) -> parts.put(segment, WindowSummary.fromBytes(bytes)));
        WindowSummary whole = new WindowSummary();
        Segments spec = segments().get(parts.values().iterator().next().model());
        if (spec == null || acc.containsKey(-1)) {
            parts.values().forEach(whole::mergeOwned);
            return whole.toBytes();
        }
        for (Map.Entry<Integer, byte[]> e : acc.entrySet()) {  // the parts stay as they are: each is written below
            if (whole.isEmpty()) {
                whole.mergeOwned(WindowSummary.fromBytes(e.getValue()));
            } else {
                whole.merge(parts.get(e.getKey()));
            }
        }
        List<Integer> present = new ArrayList<>(acc.keySet());
        present.sort((a, b) -> compareKeys(spec.keyTexts.get(a), spec.keyTexts.get(b)));
        byte[] wholeBytes = whole.toBytes();
        long capacity = wholeBytes.length + 4096L * (present.size() + 1);  // the frames, with room for keys and lengths
        for (byte[] part : acc.values()) {
            capacity += part.length;
        }
        FrameWriter out = new FrameWriter(KIND_SEGMENTED, (int) Math.min(capacity, Integer.MAX_VALUE - 16));
        out.blob(wholeBytes).texts(spec.by, spec.by.length).u32(present.size());
        for (int segment : present) {
            byte[][] key = spec.keys.get(segment);
            WindowSummary part = parts.get(segment);
            part.coarsenToWhole(whole);
            part.cutSample(spec.sampleSize);  // the sample is copied through when it was not cut
            out.texts(key, key.length).blob(part.toBytesWithSampleAsRead());
        }
        return out.toBytes();
    }

    /** Tuples of texts in code-point order, element by element (Python's order of tuples of str). */
    static int compareKeys(String[] a, String[] b) {
        for (int i = 0; i < Math.min(a.length, b.length); i++) {
            int c = compareCodePoints(a[i], b[i]);
            if (c != 0) {
                return c;
            }
        }
        return Integer.compare(a.length, b.length);
    }

    private static int compareCodePoints(String a, String b) {
        int i = 0;
        int j = 0;
        while (i < a.length() && j < b.length()) {
            int ca = a.codePointAt(i);
            int cb = b.codePointAt(j);
            if (ca != cb) {
                return Integer.compare(ca, cb);
            }
            i += Character.charCount(ca);
            j += Character.charCount(cb);
        }
        return Integer.compare(a.length() - i, b.length() - j);
    }

    @Override
    public TypeInference getTypeInference(DataTypeFactory typeFactory) {
        return TypeInference.newBuilder()
                .typedArguments(DataTypes.BYTES(), DataTypes.INT())
                .accumulatorTypeStrategy(TypeStrategies.explicit(
                        DataTypes.RAW(SegmentPartials.class, SegmentPartialsSerializer.INSTANCE)))
                .outputTypeStrategy(TypeStrategies.explicit(DataTypes.BYTES()))
                .build();
    }
}
