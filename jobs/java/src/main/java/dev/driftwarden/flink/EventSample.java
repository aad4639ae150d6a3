package dev.driftwarden.flink;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The event sample of sketches/FORMAT.md (kind 8): the k events of a window with the smallest
 * event key, each with the value of every sampled feature. A max-heap of slots on the key; an
 * event that beats the largest kept key takes over that slot in place (no allocation once full).
 *
 * <p>A window summary samples its categorical features only ({@link #sampledNames}): a numeric
 * feature's deep tests read its histogram's exact counts, never its sample.
 */
public final class EventSample {
    public static final int KIND = 8;
    static final int NUMERIC = 1;
    static final int CATEGORICAL = 2;

    public final int k;
    final String[] names;
    final boolean[] numeric;
    private final int[] column;  // feature -> its index among the features of its kind
    private final int numNumeric;
    private final int numCategorical;

    private int m;
    private long[] keys = new long[0];
    private int[] heap = new int[0];  // slots, a max-heap on keys[slot]
    private double[] numbers = new double[0];  // slot * numNumeric + column
    private String[] texts = new String[0];  // slot * numCategorical + column

    public EventSample(int k, String[] names, boolean[] numeric) {
        if (k < 0) {
            throw new IllegalArgumentException("sample_size must be >= 0, got " + k);
        }
        this.k = k;
        this.names = names.clone();
        this.numeric = numeric.clone();
        this.column = new int[names.length];
        int nn = 0;
        int nc = 0;
        for (int f = 0; f < names.length; f++) {
            column[f] = numeric[f] ? nn++ : nc++;
        }
        numNumeric = nn;
        numCategorical = nc;
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

    /**
     * This sample without its numeric features (this sample itself when it has none): what a
     * window summary written before samples left numeric features out is read as.
     */
    EventSample categoricalOnly() {
        if (numNumeric == 0) {
            return this;
        }
        EventSample out = new EventSample(k, sampledNames(names, numeric), new boolean[numCategorical]);
        for (int i = 0; i < m; i++) {
            int slot = out.offer(keys[i]);
            System.arraycopy(texts, i * numCategorical, out.texts, slot * numCategorical, numCategorical);
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
        numbers = Arrays.copyOf(numbers, capacity * numNumeric);
        texts = Arrays.copyOf(texts, capacity * numCategorical);
    }

    /** The slot the event with {@code key} takes (fill it with {@link #setNumber}/{@link #setText}), or -1 if not kept. */
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

    /** Sets categorical feature {@code f} of the event in {@code slot}. */
    public void setText(int slot, int f, String value) {
        texts[slot * numCategorical + column[f]] = value;
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
        if (other.k != k || !Arrays.equals(other.names, names) || !Arrays.equals(other.numeric, numeric)) {
            throw new IllegalArgumentException("cannot merge event samples of different shape: k " + k + " "
                    + Arrays.toString(names) + " and k " + other.k + " " + Arrays.toString(other.names));
        }
        for (int i = 0; i < other.m; i++) {
            int slot = offer(other.keys[i]);
            if (slot >= 0) {
                System.arraycopy(other.numbers, i * numNumeric, numbers, slot * numNumeric, numNumeric);
                System.arraycopy(other.texts, i * numCategorical, texts, slot * numCategorical, numCategorical);
            }
        }
    }

    /** The kept slots in ascending key order. */
    private int[] slotsByKey() {
        Integer[] order = new Integer[m];
        for (int i = 0; i < m; i++) {
            order[i] = i;
        }
        Arrays.sort(order, (a, b) -> Long.compare(keys[a], keys[b]));
        int[] out = new int[m];
        for (int i = 0; i < m; i++) {
            out[i] = order[i];
        }
        return out;
    }

    /** The kind 8 frame. */
    public byte[] toBytes() {
        int[] slots = slotsByKey();
        long[] sortedKeys = new long[m];
        for (int i = 0; i < m; i++) {
            sortedKeys[i] = keys[slots[i]];
        }
        FrameWriter out = new FrameWriter(KIND, 32 + m * (8 + 8 * names.length));
        out.u32(k).u32(m).longs(sortedKeys, m).u32(names.length);
        for (int f = 0; f < names.length; f++) {
            out.text(names[f]).u8(numeric[f] ? NUMERIC : CATEGORICAL);
            if (numeric[f]) {
                out.u32(8L * m);
                for (int slot : slots) {
                    out.f64(numbers[slot * numNumeric + column[f]]);
                }
            } else {
                byte[] present = new byte[m];
                byte[][] values = new byte[m][];
                int count = 0;
                for (int i = 0; i < m; i++) {
                    String v = texts[slots[i] * numCategorical + column[f]];
                    if (v != null) {
                        present[i] = 1;
                        values[count++] = v.getBytes(StandardCharsets.UTF_8);
                    }
                }
                out.blob(present).texts(values, count);
            }
        }
        return out.toBytes();
    }

    /** Reads a kind 8 frame back. */
    public static EventSample fromBytes(byte[] data) {
        FrameReader in = new FrameReader(data, KIND);
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
        String[] names = new String[(int) features];
        boolean[] numeric = new boolean[names.length];
        double[][] numbers = new double[names.length][];
        String[][] texts = new String[names.length][];
        for (int f = 0; f < names.length; f++) {
            names[f] = in.text();
            int kind = in.u8();
            if (kind == NUMERIC) {
                numeric[f] = true;
                long[] bits = in.longs(m);
                numbers[f] = new double[(int) m];
                for (int i = 0; i < m; i++) {
                    numbers[f][i] = Double.longBitsToDouble(bits[i]);
                }
            } else if (kind == CATEGORICAL) {
                byte[] present = in.blob();
                String[] values = in.texts();
                if (present.length != m) {
                    throw new IllegalArgumentException("corrupt event sample: " + present.length + " presence bytes for " + m + " events");
                }
                texts[f] = new String[(int) m];
                int j = 0;
                for (int i = 0; i < m; i++) {
                    if (present[i] == 1) {
                        if (j == values.length) {
                            throw new IllegalArgumentException("corrupt event sample: fewer values than present flags");
                        }
                        texts[f][i] = values[j++];
                    } else if (present[i] != 0) {
                        throw new IllegalArgumentException("corrupt event sample: presence byte " + present[i]);
                    }
                }
                if (j != values.length) {
                    throw new IllegalArgumentException("corrupt event sample: more values than present flags");
                }
            } else {
                throw new IllegalArgumentException("corrupt event sample: feature kind " + kind);
            }
        }
        in.done();
        EventSample s = new EventSample((int) k, names, numeric);
        for (int i = 0; i < m; i++) {
            if (i > 0 && keys[i] < keys[i - 1]) {
                throw new IllegalArgumentException("corrupt event sample: keys not ascending");
            }
            int slot = s.offer(keys[i]);
            for (int f = 0; f < names.length; f++) {
                if (numeric[f]) {
                    s.numbers[slot * s.numNumeric + s.column[f]] = numbers[f][i];
                } else {
                    s.setText(slot, f, texts[f][i]);
                }
            }
        }
        return s;
    }
}
