package dev.driftwarden.flink;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The event sample of sketches/FORMAT.md (kind 26; kind 8 is still read): the k events of a window with the smallest
 * event key, each with the value of every sampled feature. A max-heap of slots on the key; an
 * event that beats the largest kept key takes over that slot in place (no allocation once full).
 *
 * <p>A window summary samples its categorical features only ({@link #sampledNames}): a numeric
 * feature's deep tests read its histogram's exact counts, never its sample. So this class keeps
 * categorical values only; {@link #fromBytes} drops the numeric columns of a frame written before.
 */
public final class EventSample {
    public static final int KIND = 26;
    /** The frame written before categorical columns were coded (presence bytes, then every present string). */
    public static final int KIND_TEXTS = 8;
    static final int NUMERIC = 1;
    static final int CATEGORICAL = 2;

    /**
     * Most events a segment's own sample keeps in a segmented window summary (kind 18) when the segments spec
     * does not say (the default of a model's segments.sample_size): its bottom-k, cut from the model's
     * sample_size when {@link MergeSegments} writes the frame.
     */
    public static final int SEGMENT_SAMPLE_SIZE = 500;

    public final int k;
    final String[] names;

    private int m;
    private long[] keys = new long[0];
    private int[] heap = new int[0];  // slots, a max-heap on keys[slot]
    private String[] texts = new String[0];  // slot * names.length + feature
    /**
     * Read by {@link #fromBytes} from a frame that {@link #toBytes} gives back unchanged: a kind 26 frame with no
     * numeric column, every event kept (as the Java and Python writers make them, which write the same bytes).
     */
    transient boolean readAsWritten;

    /** A sample of {@code k} events with the values of the (categorical) features {@code names}. */
    public EventSample(int k, String[] names) {
        if (k < 0) {
            throw new IllegalArgumentException("sample_size must be >= 0, got " + k);
        }
        this.k = k;
        this.names = names.clone();
    }

    /** The features a window summary samples: the categorical ones, in configured order. */
    static String[] sampledNames(String[] names, boolean[] numeric) {
        int count = 0;
        for (boolean n : numeric) {
            count += n ? 0 : 1;
        }
        String[] out = new String[count];
        for (int f = 0, i = 0; f < names.length; f++) {
            if (!numeric[f]) {
                out[i++] = names[f];
            }
        }
        return out;
    }

    public int size() {
        return m;
    }

    private void grow() {
        int capacity = Math.min(k, Math.max(16, keys.length * 2));
        keys = Arrays.copyOf(keys, capacity);
        heap = Arrays.copyOf(heap, capacity);
        texts = Arrays.copyOf(texts, capacity * names.length);
    }

    /** The slot the event with {@code key} takes (fill it with {@link #setText}), or -1 if not kept. */
    public int offer(long key) {
        if (m < k) {
            if (m == keys.length) {
                grow();
            }
            int slot = m;
            keys[slot] = key;
            heap[m] = slot;
            siftUp(m++);
            return slot;
        }
        if (k == 0 || key >= keys[heap[0]]) {
            return -1;
        }
        int slot = heap[0];
        keys[slot] = key;
        siftDown(0);
        return slot;
    }

    /** Sets sampled feature {@code f} of the event in {@code slot}. */
    public void setText(int slot, int f, String value) {
        texts[slot * names.length + f] = value;
    }

    private void siftUp(int i) {
        int slot = heap[i];
        long key = keys[slot];
        while (i > 0) {
            int parent = (i - 1) >>> 1;
            if (keys[heap[parent]] >= key) {
                break;
            }
            heap[i] = heap[parent];
            i = parent;
        }
        heap[i] = slot;
    }

    private void siftDown(int i) {
        int slot = heap[i];
        long key = keys[slot];
        while (true) {
            int child = 2 * i + 1;
            if (child >= m) {
                break;
            }
            if (child + 1 < m && keys[heap[child + 1]] > keys[heap[child]]) {
                child++;
            }
            if (keys[heap[child]] <= key) {
                break;
            }
            heap[i] = heap[child];
            i = child;
        }
        heap[i] = slot;
    }

    /** Keeps the bottom-k of the union with {@code other} (same k and features). */
    public void merge(EventSample other) {
        if (other.k != k || !Arrays.equals(other.names, names)) {
            throw new IllegalArgumentException("cannot merge event samples of different shape: k " + k + " "
                    + Arrays.toString(names) + " and k " + other.k + " " + Arrays.toString(other.names));
        }
        for (int i = 0; i < other.m; i++) {
            int slot = offer(other.keys[i]);
            if (slot >= 0) {
                System.arraycopy(other.texts, i * names.length, texts, slot * names.length, names.length);
            }
        }
    }

    /**
     * A sample of capacity {@code min(k, capacity)} holding the events of smallest key of this one: what a sample of
     * that capacity would have kept of the same events (sketches/sample.py {@code EventSample.bottom}).
     */
    public EventSample bottom(int capacity) {
        EventSample out = new EventSample(Math.min(k, capacity), names);
        int[] slots = slotsByKey();
        for (int i = 0; i < Math.min(m, out.k); i++) {
            int slot = out.offer(keys[slots[i]]);
            System.arraycopy(texts, slots[i] * names.length, out.texts, slot * names.length, names.length);
        }
        return out;
    }

    /** The kept slots in ascending key order (equal keys in slot order, as a stable sort leaves them). */
    private int[] slotsByKey() {
        long[] sorted = Arrays.copyOf(keys, m);
        Arrays.sort(sorted);
        int[] out = new int[m];
        Arrays.fill(out, -1);
        for (int slot = 0; slot < m; slot++) {
            int rank = firstAtLeast(sorted, keys[slot]);
            while (out[rank] >= 0) {
                rank++;  // an equal key took this rank already
            }
            out[rank] = slot;
        }
        return out;
    }

    /** The first index of {@code sorted} (ascending) whose value is at least {@code key}. */
    private static int firstAtLeast(long[] sorted, long key) {
        int low = 0;
        int high = sorted.length;
        while (low < high) {
            int mid = (low + high) >>> 1;
            if (sorted[mid] < key) {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        return low;
    }

    /** The kind 26 frame: each categorical column as its distinct values and one index per event. */
    public byte[] toBytes() {
        int[] slots = slotsByKey();
        long[] sortedKeys = new long[m];
        for (int i = 0; i < m; i++) {
            sortedKeys[i] = keys[slots[i]];
        }
        FrameWriter out = new FrameWriter(KIND, 32 + m * (8 + 2 * names.length));
        out.u32(k).u32(m).longs(sortedKeys, m).u32(names.length);
        for (int f = 0; f < names.length; f++) {
            out.text(names[f]).u8(CATEGORICAL);
            writeCoded(out, slots, f);
        }
        return out.toBytes();
    }

    /**
     * Column {@code f}: the distinct values (texts, sorted by their UTF-8 bytes), then per event in key order
     * 0 for a null or 1 + its value's index (packed).
     */
    private void writeCoded(FrameWriter out, int[] slots, int f) {
        Map<String, byte[]> encoded = new HashMap<>();
        for (int i = 0; i < m; i++) {
            String v = texts[slots[i] * names.length + f];
            if (v != null) {
                encoded.computeIfAbsent(v, s -> s.getBytes(StandardCharsets.UTF_8));
            }
        }
        List<String> distinct = new ArrayList<>(encoded.keySet());
        distinct.sort((a, b) -> Arrays.compareUnsigned(encoded.get(a), encoded.get(b)));
        Map<String, Integer> index = new HashMap<>();
        byte[][] values = new byte[distinct.size()][];
        for (int j = 0; j < values.length; j++) {
            index.put(distinct.get(j), j + 1);
            values[j] = encoded.get(distinct.get(j));
        }
        long[] codes = new long[m];
        for (int i = 0; i < m; i++) {
            String v = texts[slots[i] * names.length + f];
            codes[i] = v == null ? 0 : index.get(v);
        }
        out.texts(values, values.length).packed(codes, m);
    }

    /** Reads a kind 26 (or kind 8) frame back, without the numeric columns a frame written before may carry. */
    public static EventSample fromBytes(byte[] data) {
        FrameReader in = new FrameReader(data, KIND, KIND_TEXTS);
        long k = in.u32();
        long m = in.u32();
        if (k > Integer.MAX_VALUE || m > k) {
            throw new IllegalArgumentException("corrupt event sample: " + m + " events kept, k is " + k);
        }
        long[] keys = in.longs(m);
        long features = in.u32();
        if (features > 1_000_000) {
            throw new IllegalArgumentException("corrupt event sample: " + features + " features");
        }
        List<String> names = new ArrayList<>();
        List<String[]> texts = new ArrayList<>();
        boolean numericDropped = false;
        for (int f = 0; f < features; f++) {
            String name = in.text();
            int kind = in.u8();
            if (kind == NUMERIC) {
                in.longs(m);  // dropped: no numeric feature is sampled any more
                numericDropped = true;
            } else if (kind == CATEGORICAL) {
                names.add(name);
                texts.add(in.kind == KIND ? readCoded(in, (int) m) : readTexts(in, (int) m));
            } else {
                throw new IllegalArgumentException("corrupt event sample: feature kind " + kind);
            }
        }
        in.done();
        EventSample s = new EventSample((int) k, names.toArray(new String[0]));
        for (int i = 0; i < m; i++) {
            if (i > 0 && keys[i] < keys[i - 1]) {
                throw new IllegalArgumentException("corrupt event sample: keys not ascending");
            }
            int slot = s.offer(keys[i]);
            for (int f = 0; f < texts.size(); f++) {
                s.setText(slot, f, texts.get(f)[i]);
            }
        }
        s.readAsWritten = in.kind == KIND && !numericDropped && s.m == m;
        return s;
    }

    /** A kind 26 categorical column: the distinct values, then an index per event (0 for a null). */
    private static String[] readCoded(FrameReader in, int m) {
        String[] values = in.texts();
        long[] codes = in.packed(m);
        String[] column = new String[m];
        for (int i = 0; i < m; i++) {
            if (codes[i] < 0 || codes[i] > values.length) {
                throw new IllegalArgumentException("corrupt event sample: index " + codes[i] + " for " + values.length
                        + " distinct values");
            }
            column[i] = codes[i] == 0 ? null : values[(int) codes[i] - 1];
        }
        return column;
    }

    /** A kind 8 categorical column: a presence byte per event, then the present values' strings. */
    private static String[] readTexts(FrameReader in, int m) {
        byte[] present = in.blob();
        String[] values = in.texts();
        if (present.length != m) {
            throw new IllegalArgumentException("corrupt event sample: " + present.length + " presence bytes for " + m + " events");
        }
        String[] column = new String[m];
        int j = 0;
        for (int i = 0; i < m; i++) {
            if (present[i] == 1) {
                if (j == values.length) {
                    throw new IllegalArgumentException("corrupt event sample: fewer values than present flags");
                }
                column[i] = values[j++];
            } else if (present[i] != 0) {
                throw new IllegalArgumentException("corrupt event sample: presence byte " + present[i]);
            }
        }
        if (j != values.length) {
            throw new IllegalArgumentException("corrupt event sample: more values than present flags");
        }
        return column;
    }
}
