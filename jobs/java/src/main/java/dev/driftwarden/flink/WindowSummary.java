package dev.driftwarden.flink;

import java.util.Arrays;

/**
 * The state of one (model, window) (sketches/FORMAT.md, kind 17): event and unknown-feature
 * counts, one sketch per configured feature (a {@link LogLinearHistogram} or {@link CappedCounts})
 * and the {@link EventSample} of the categorical features. Empty until its first event ({@link #model} null).
 */
public final class WindowSummary {
    public static final int KIND = 17;
    private static final String[] NONE = new String[0];

    String model;
    long start;
    long end;
    long seed;
    long events;
    long unknownFeatures;
    String[] names = NONE;
    LogLinearHistogram[] histograms = new LogLinearHistogram[0];  // per feature, null when categorical
    CappedCounts[] counts = new CappedCounts[0];  // per feature, null when numeric
    EventSample sample;
    boolean[] booleans = new boolean[0];  // per feature: a boolean feature (summarized as categorical "true" / "false")
    InvalidValues[] invalid = new InvalidValues[0];  // per feature: its values of the wrong type, null when none
    GroupMoments[] groups = new GroupMoments[0];  // per multivariate group of the model, in the spec's order
    String[] groupNames = NONE;  // the groups' names
    transient double[] groupRow = new double[0];  // scratch: one event's values of a group
    /** The spec's model bound to this state (null: not yet bound, or the model is not configured). */
    transient SummarySpec.Model bound;
    transient boolean boundChecked;
    /**
     * The sample's bytes as {@link #fromBytes} read them, when writing the sample again would give the same bytes
     * ({@link EventSample#readAsWritten}); null otherwise. Only {@link #toBytesWithSampleAsRead} uses it.
     */
    private transient byte[] sampleAsRead;

    public boolean isEmpty() {
        return model == null;
    }

    public String model() {
        return model;
    }

    public long start() {
        return start;
    }

    public long events() {
        return events;
    }

    /** Starts the window of {@code model} at {@code start}, shaped by the spec's model (null when not configured). */
    void begin(String model, long start, long windowMs, SummarySpec.Model config) {
        this.model = model;
        this.start = start;
        this.end = start + windowMs;
        this.seed = Hashing.windowSeed(model, start);
        this.bound = config;
        this.boundChecked = true;
        if (config == null) {
            sample = new EventSample(0, NONE);
            return;
        }
        int f = config.features.length;
        names = config.features.clone();
        booleans = config.bool.clone();
        invalid = new InvalidValues[f];
        histograms = new LogLinearHistogram[f];
        counts = new CappedCounts[f];
        for (int i = 0; i < f; i++) {
            if (config.numeric[i]) {
                histograms[i] = new LogLinearHistogram(config.precision, config.maxBuckets);
            } else {
                counts[i] = new CappedCounts(config.maxExact);
            }
        }
        sample = new EventSample(config.sampleSize, config.sampled);
        groups = new GroupMoments[config.groupNames.length];
        groupNames = config.groupNames.clone();
        for (int g = 0; g < groups.length; g++) {
            groups[g] = new GroupMoments(groupMembers(config, g));
        }
        groupRow = new double[maxGroupSize()];
    }

    /** The feature names of the spec's group {@code g}, in its order. */
    private static String[] groupMembers(SummarySpec.Model config, int g) {
        int[] members = config.groupFeatures[g];
        String[] names = new String[members.length];
        for (int k = 0; k < members.length; k++) {
            names[k] = config.features[members[k]];
        }
        return names;
    }

    private int maxGroupSize() {
        int most = 0;
        for (GroupMoments g : groups) {
            most = Math.max(most, g.names.length);
        }
        return most;
    }

    /** Binds state read back from bytes to the spec's model, checking that it has the same shape. */
    void bind(SummarySpec spec) {
        SummarySpec.Model config = spec.models.get(model);
        boolean same = config == null ? names.length == 0 && sample.k == 0
                : Arrays.equals(config.features, names) && Arrays.equals(config.sampled, sample.names)
                        && config.sampleSize == sample.k && sameGroups(config);
        if (!same) {
            throw new IllegalStateException("window state of model " + model + " does not match the spec's model "
                    + "(features " + Arrays.toString(names) + "); was the spec changed under a running job?");
        }
        bound = config;
        boundChecked = true;
    }

    private boolean sameGroups(SummarySpec.Model config) {
        if (!Arrays.equals(config.groupNames, groupNames)) {
            return false;
        }
        for (int g = 0; g < groups.length; g++) {
            if (!Arrays.equals(groups[g].names, groupMembers(config, g))) {
                return false;
            }
        }
        return true;
    }

    /** Adds {@code other} (same model and window) into this one; an empty other changes nothing. */
    public void merge(WindowSummary other) {
        if (other.isEmpty()) {
            return;
        }
        if (isEmpty()) {
            copyFrom(fromBytes(other.toBytes()));
            return;
        }
        if (!model.equals(other.model) || start != other.start || end != other.end
                || !Arrays.equals(names, other.names)) {
            throw new IllegalStateException("cannot merge window summaries of " + model + "@" + start + " and "
                    + other.model + "@" + other.start);
        }
        events += other.events;
        unknownFeatures += other.unknownFeatures;
        for (int i = 0; i < names.length; i++) {
            booleans[i] |= other.booleans[i];
            if (other.invalid[i] != null) {
                if (invalid[i] == null) {
                    invalid[i] = new InvalidValues();
                }
                invalid[i].merge(other.invalid[i]);
            }
            if (histograms[i] != null) {
                histograms[i].merge(other.histograms[i]);
            } else {
                counts[i].merge(other.counts[i]);
            }
        }
        sample.merge(other.sample);
        if (!Arrays.equals(groupNames, other.groupNames)) {
            throw new IllegalStateException("cannot merge window summaries of " + model + "@" + start
                    + " with different multivariate groups");
        }
        for (int g = 0; g < groups.length; g++) {
            groups[g].merge(other.groups[g]);
        }
    }

    /**
     * Adds {@code other}, which the caller hands over (it is not used afterwards): an empty summary
     * takes it over instead of copying it. For summaries just read from bytes.
     */
    public void mergeOwned(WindowSummary other) {
        if (isEmpty() && !other.isEmpty()) {
            copyFrom(other);
        } else {
            merge(other);
        }
    }

    private void copyFrom(WindowSummary s) {
        model = s.model;
        start = s.start;
        end = s.end;
        seed = s.seed;
        events = s.events;
        unknownFeatures = s.unknownFeatures;
        names = s.names;
        histograms = s.histograms;
        counts = s.counts;
        sample = s.sample;
        booleans = s.booleans;
        invalid = s.invalid;
        groups = s.groups;
        groupNames = s.groupNames;
        groupRow = new double[maxGroupSize()];
        bound = null;
        boundChecked = false;
    }

    /** A deep copy. */
    public WindowSummary copy() {
        return isEmpty() ? new WindowSummary() : fromBytes(toBytes());
    }

    /** The kind 17 frame (only for a non-empty summary). */
    public byte[] toBytes() {
        if (isEmpty()) {
            throw new IllegalStateException("an empty window summary has no bytes");
        }
        return toBytes(sample.toBytes());
    }

    /**
     * {@link #toBytes} of a summary read by {@link #fromBytes} whose sample has not changed since (the caller's
     * promise): the sample's bytes are copied through instead of written again (the same bytes, cheaper).
     */
    byte[] toBytesWithSampleAsRead() {
        return sampleAsRead == null ? toBytes() : toBytes(sampleAsRead);
    }

    private byte[] toBytes(byte[] sampleBytes) {
        byte[][] sketches = new byte[names.length][];
        long size = 64L + 4L * model.length() + sampleBytes.length;  // a UTF-16 unit is at most 3 UTF-8 bytes
        for (int i = 0; i < names.length; i++) {
            sketches[i] = histograms[i] != null ? histograms[i].toBytes() : counts[i].toBytes();
            size += 8L + 3L * names[i].length() + sketches[i].length;
        }
        FrameWriter out = new FrameWriter(KIND, (int) Math.min(size, Integer.MAX_VALUE - 16));  // no growing copies
        out.text(model).i64(start).i64(end).i64(events).i64(unknownFeatures).u32(names.length);
        for (int i = 0; i < names.length; i++) {
            out.text(names[i]).blob(sketches[i]);
        }
        out.blob(sampleBytes);
        if (hasTrailer() || groups.length > 0) {
            writeTrailer(out);
        }
        if (groups.length > 0) {
            out.u32(groups.length);
            for (int g = 0; g < groups.length; g++) {
                out.text(groupNames[g]).blob(groups[g].toBytes());
            }
        }
        return out.toBytes();
    }

    /**
     * Brings this segment's numeric histograms to the resolution of {@code whole}'s (the window over all its
     * segments): {@link LogLinearHistogram#segmentShift}, the rule of sketches/histogram.py {@code segment_shift}.
     */
    void coarsenToWhole(WindowSummary whole) {
        if (!Arrays.equals(names, whole.names)) {
            throw new IllegalStateException("segment of " + model + "@" + start + " has other features than its window");
        }
        for (int i = 0; i < names.length; i++) {
            if (histograms[i] != null && whole.histograms[i] != null) {
                histograms[i].coarsenTo(LogLinearHistogram.segmentShift(histograms[i], whole.histograms[i],
                        LogLinearHistogram.SEGMENT_MIN_BUCKETS));
            }
        }
    }

    /**
     * Cuts this segment's event sample to its bottom {@code capacity} events (and its capacity to at most that):
     * the rule of sketches/sample.py {@code EventSample.bottom}, applied where a segmented frame is written.
     */
    void cutSample(int capacity) {
        if (sample.k > capacity) {
            sample = sample.bottom(capacity);
            sampleAsRead = null;
        }
    }

    /** Invalid values to count, to keep examples of. */
    void addInvalid(int feature, long key, String reason, String value, String where) {
        if (invalid[feature] == null) {
            invalid[feature] = new InvalidValues();
        }
        invalid[feature].add(key, reason, value, where);
    }

    private boolean hasTrailer() {
        for (int i = 0; i < names.length; i++) {
            if (booleans[i] || invalid[i] != null && invalid[i].count > 0) {
                return true;
            }
        }
        return false;
    }

    /** Per feature: its kind (1 numeric, 2 categorical, 3 boolean), its invalid values' count and examples. */
    private void writeTrailer(FrameWriter out) {
        for (int i = 0; i < names.length; i++) {
            out.u8(booleans[i] ? 3 : histograms[i] != null ? 1 : 2);
            InvalidValues tally = invalid[i];
            out.i64(tally == null ? 0 : tally.count).u32(tally == null ? 0 : tally.examples.size());
            if (tally != null) {
                for (InvalidValues.Example e : tally.examples) {
                    out.i64(e.key()).text(e.reason()).text(e.value()).text(e.where());
                }
            }
        }
    }

    private void readTrailer(FrameReader in) {
        for (int i = 0; i < names.length; i++) {
            int kind = in.u8();
            long count = in.i64();
            long examples = in.u32();
            if (kind < 1 || kind > 3 || examples > count || examples > InvalidValues.EXAMPLES) {
                throw new IllegalArgumentException("corrupt window summary: feature " + names[i] + " kind " + kind
                        + ", " + examples + " examples of " + count + " invalid values");
            }
            booleans[i] = kind == 3;
            if (count > 0) {
                InvalidValues tally = invalid[i] = new InvalidValues();
                tally.count = count;
                for (long e = 0; e < examples; e++) {
                    tally.examples.add(new InvalidValues.Example(in.i64(), in.text(), in.text(), in.text()));
                }
            }
        }
    }

    /** Reads a kind 17 frame back (unbound: the next accumulate binds it to the spec). */
    public static WindowSummary fromBytes(byte[] data) {
        FrameReader in = new FrameReader(data, KIND);
        WindowSummary s = new WindowSummary();
        s.model = in.text();
        s.start = in.i64();
        s.end = in.i64();
        s.events = in.i64();
        s.unknownFeatures = in.i64();
        long f = in.u32();
        if (f > 1_000_000) {
            throw new IllegalArgumentException("corrupt window summary: " + f + " features");
        }
        s.names = new String[(int) f];
        s.histograms = new LogLinearHistogram[(int) f];
        s.counts = new CappedCounts[(int) f];
        for (int i = 0; i < f; i++) {
            s.names[i] = in.text();
            byte[] sketch = in.blob();
            int kind = FrameReader.kindOf(sketch);
            if (kind == LogLinearHistogram.KIND || kind == LogLinearHistogram.KIND_PACKED
                    || kind == LogLinearHistogram.KIND_UNPACKED) {
                s.histograms[i] = LogLinearHistogram.fromBytes(sketch);
            } else if (kind == CappedCounts.KIND) {
                s.counts[i] = CappedCounts.fromBytes(sketch);
            } else {
                throw new IllegalArgumentException("corrupt window summary: feature " + s.names[i] + " has sketch kind " + kind);
            }
        }
        byte[] sampleBytes = in.blob();
        s.sample = EventSample.fromBytes(sampleBytes);
        s.sampleAsRead = s.sample.readAsWritten ? sampleBytes : null;
        s.booleans = new boolean[(int) f];
        s.invalid = new InvalidValues[(int) f];
        if (!in.atEnd()) {
            s.readTrailer(in);
        }
        if (!in.atEnd()) {
            long count = in.u32();
            if (count > 10_000) {
                throw new IllegalArgumentException("corrupt window summary: " + count + " groups");
            }
            s.groups = new GroupMoments[(int) count];
            s.groupNames = new String[(int) count];
            for (int g = 0; g < count; g++) {
                s.groupNames[g] = in.text();
                s.groups[g] = GroupMoments.fromBytes(in.blob());
            }
        }
        s.groupRow = new double[s.maxGroupSize()];
        in.done();
        String[] sampled = EventSample.sampledNames(s.names, numericOf(s.histograms));
        if (!Arrays.equals(s.sample.names, sampled)) {
            throw new IllegalArgumentException("corrupt window summary: sample features " + Arrays.toString(s.sample.names)
                    + " are not the categorical features " + Arrays.toString(sampled));
        }
        s.seed = Hashing.windowSeed(s.model, s.start);
        return s;
    }

    private static boolean[] numericOf(LogLinearHistogram[] histograms) {
        boolean[] numeric = new boolean[histograms.length];
        for (int i = 0; i < numeric.length; i++) {
            numeric[i] = histograms[i] != null;
        }
        return numeric;
    }
}
