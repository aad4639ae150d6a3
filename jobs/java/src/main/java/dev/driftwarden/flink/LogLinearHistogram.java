package dev.driftwarden.flink;

import java.util.Arrays;

/**
 * The numeric histogram of sketches/FORMAT.md (kind 25): counts in log-linear buckets of relative
 * width 2^-P, uniformly coarsened (a shift {@code s}) while more than {@code M} buckets are used.
 * Buckets live in a primitive open-addressing map (no boxing on the update path).
 *
 * <p>Updates collapse lazily: the map may fill the table that M keys need up to its load factor
 * (1,536 keys for M = 1,024; the same memory) before it is coarsened to at most M, and every reader ({@link
 * #toBytes}, {@link #merge}, {@link #sortedKeys}, {@link #count}, {@link #shift}) first settles it
 * to at most M. The settled state is the same as collapsing after every update (the finest shift
 * that fits only grows as keys come), at a fraction of the collapses.
 *
 * <p>A new histogram's first values (as many as that lazy limit) are only appended to an array of
 * their base keys; the first reader, or the value after them, sorts it once into buckets at the finest
 * shift that fits (the same rule). A window of a small segment then costs one sort instead of a hash
 * insert per value, the map's growing and a collapse.
 *
 * <p>Sorted buckets (those, or the ones read from bytes) stay as they are until the histogram is
 * updated or merged into: written, or merged into another one, it needs no map (the merge of a
 * window's segments reads dozens).
 */
public final class LogLinearHistogram {
    /** The frame this class writes (sketches/FORMAT.md, kind 25): key steps and counts as varints. */
    public static final int KIND = 25;
    /** The frame written before steps and counts were varints (each packed at one width), still read. */
    public static final int KIND_PACKED = 20;
    /** The frame written before keys and counts were packed, still read. */
    public static final int KIND_UNPACKED = 6;
    private static final long EMPTY = Long.MIN_VALUE;  // never a key: keys lie in [~0x7FF0000000000000, 0x7FF0000000000000)

    public final int precision;
    public final int maxBuckets;
    int shift;
    long n;
    long nulls;
    long nans;
    long posInf;
    long negInf;
    double min = Double.NaN;
    double max = Double.NaN;

    private final int collapseAt;  // keys that fill the table M keys need: collapse before it would grow
    private long[] table;  // interleaved: key at 2i, its count at 2i + 1 (one cache line per probe)
    private int size;
    private long[] firstKeys = new long[32];  // the base keys of the first values, unsorted; null once moved
    private int firstCount;
    private long[] sortedBucketKeys;  // ascending keys and their counts, from bytes or the first values; null in the map
    private long[] sortedBucketCounts;
    private long[] pending;  // base keys of values counted (n, min, max) but not yet in the map: flushPending
    private int pendingCount;

    /** Values whose keys wait for the map together ({@link #flushPending}); every reader adds them first. */
    private static final int PENDING = 64;

    public LogLinearHistogram(int precision, int maxBuckets) {
        if (precision < 0 || precision > 52) {
            throw new IllegalArgumentException("histogram precision must be in 0..52, got " + precision);
        }
        if (maxBuckets < 16) {
            throw new IllegalArgumentException("histogram max_buckets must be >= 16, got " + maxBuckets);
        }
        this.precision = precision;
        this.maxBuckets = maxBuckets;
        this.collapseAt = slotsFor(maxBuckets) / 4 * 3;
    }

    /** The fewest slots (a power of two, at least 32) that hold {@code keys} within the load factor. */
    private static int slotsFor(int keys) {
        int slots = 32;
        while (!withinLoad(keys, slots)) {
            slots *= 2;
        }
        return slots;
    }

    /** Whether {@code keys} keys fit {@code slots} slots at the load factor 3/4. */
    private static boolean withinLoad(int keys, int slots) {
        return keys * 4 <= slots * 3;
    }

    private void allocate(int slots) {
        table = new long[2 * slots];
        for (int i = 0; i < table.length; i += 2) {
            table[i] = EMPTY;
        }
        size = 0;
    }

    /** The base key (shift 0) of a finite value. */
    public static long baseKey(double x, int precision) {
        x = x + 0.0;  // -0.0 -> +0.0
        long bits = Double.doubleToRawLongBits(x);
        long pos = (bits & Long.MAX_VALUE) >>> (52 - precision);
        return bits < 0 ? ~pos : pos;
    }

    /** Counts a null. */
    public void updateNull() {
        nulls++;
    }

    /** Counts one value: NaN and infinities are counted, finite values go into buckets. */
    public void update(double x) {
        if (x != x) {
            nans++;
        } else if (x == Double.POSITIVE_INFINITY) {
            posInf++;
        } else if (x == Double.NEGATIVE_INFINITY) {
            negInf++;
        } else {
            x = x + 0.0;
            if (n == 0) {
                min = x;
                max = x;
            } else if (x < min) {
                min = x;
            } else if (x > max) {
                max = x;
            }
            n++;
            long key = baseKey(x, precision);
            if (firstKeys != null && firstCount < collapseAt) {
                appendFirst(key);
                return;
            }
            if (pending == null) {
                pending = new long[PENDING];
            }
            pending[pendingCount++] = key;
            if (pendingCount == PENDING) {
                flushPending();
            }
        }
    }

    /**
     * Adds the pending values' keys to the map, in the order they came: what {@link #update} did
     * for each at once before, so the state is the same. Their table probes are independent, so
     * the processor overlaps their cache misses; one at a time between other work they were not
     * (a window's segments keep hundreds of maps, more than the caches hold).
     */
    private void flushPending() {
        if (pendingCount == 0) {
            return;
        }
        ensureTable();
        for (int i = 0; i < pendingCount; i++) {
            add(pending[i] >> shift, 1);
            if (size >= collapseAt) {
                collapse(0);
            }
        }
        pendingCount = 0;
    }

    private void appendFirst(long key) {
        if (firstCount == firstKeys.length) {
            firstKeys = Arrays.copyOf(firstKeys, Math.min(2 * firstKeys.length, collapseAt));
        }
        firstKeys[firstCount++] = key;
    }

    /** Builds the map from the first values' keys or the sorted buckets, whichever it still holds. */
    private void ensureTable() {
        boolean full = firstKeys != null && firstCount == collapseAt;  // more values come: the map M keys need
        if (firstKeys != null) {
            sortFirstKeys();
        }
        if (sortedBucketKeys != null) {
            long[] keys = sortedBucketKeys;
            long[] counts = sortedBucketCounts;
            sortedBucketKeys = null;
            sortedBucketCounts = null;
            allocate(full ? slotsFor(maxBuckets) : slotsFor(keys.length));  // no growing rehashes
            for (int i = 0; i < keys.length; i++) {
                add(keys[i], counts[i]);
            }
        }
    }

    /** Turns the first values' keys into sorted buckets at the finest shift at which their distinct keys fit M. */
    private void sortFirstKeys() {
        long[] keys = firstKeys;
        int count = firstCount;
        firstKeys = null;
        firstCount = 0;
        Arrays.sort(keys, 0, count);
        long[] distinct = new long[count];
        int d = 0;
        for (int i = 0; i < count; i++) {
            if (d == 0 || keys[i] != distinct[d - 1]) {
                distinct[d++] = keys[i];
            }
        }
        shift = fitShift(Arrays.copyOf(distinct, d), 0, maxBuckets);
        long[] counts = new long[d];
        int b = 0;
        for (int i = 0; i < count; ) {  // runs of equal keys at the new shift: one bucket each
            long key = keys[i] >> shift;
            int j = i + 1;
            while (j < count && keys[j] >> shift == key) {
                j++;
            }
            distinct[b] = key;  // b never passes the distinct keys read
            counts[b++] = j - i;
            i = j;
        }
        sortedBucketKeys = Arrays.copyOf(distinct, b);
        sortedBucketCounts = Arrays.copyOf(counts, b);
    }

    /** The first slot (an even index into the table) to probe for {@code key}. */
    private static int home(long key, int mask) {
        return (int) ((key * 0x9E3779B97F4A7C15L) >>> 32) & mask;
    }

    private void add(long key, long count) {
        int mask = table.length - 2;  // table.length is a power of two: even indices only
        int i = home(key, mask);
        while (true) {
            long k = table[i];
            if (k == key) {
                table[i + 1] += count;
                return;
            }
            if (k == EMPTY) {
                table[i] = key;
                table[i + 1] = count;
                if (!withinLoad(++size, table.length / 2)) {
                    rehash(table.length, 0);
                }
                return;
            }
            i = (i + 2) & mask;
        }
    }

    /** Rebuilds the table with {@code slots} slots, every key shifted right by {@code by}. */
    private void rehash(int slots, int by) {
        long[] old = table;
        allocate(slots);
        for (int i = 0; i < old.length; i += 2) {
            if (old[i] != EMPTY) {
                add(old[i] >> by, old[i + 1]);
            }
        }
    }

    /**
     * Coarsens by {@code atLeast} steps, then by the fewest further steps that leave at most M buckets:
     * the same shift as stepping one at a time while over M, found with one sort and one rehash.
     */
    private void collapse(int atLeast) {
        int by = stepsToFit(atLeast);
        if (by > 0) {
            shift += by;
            rehash(table.length / 2, by);
        }
    }

    /**
     * The smallest {@code e >= atLeast} with at most M distinct keys {@code >> e}. One step is
     * counted in place (keys {@code 2j} and {@code 2j + 1} become one), which is usually enough
     * once the histogram is full; else {@link #fitShift} on the sorted keys.
     */
    private int stepsToFit(int atLeast) {
        if (size <= maxBuckets && atLeast == 0) {
            return 0;
        }
        if (atLeast <= 1 && size - pairsJoinedByOneStep() <= maxBuckets) {
            return 1;
        }
        return fitShift(usedKeysSorted(), atLeast, maxBuckets);
    }

    /**
     * The smallest {@code e >= atLeast} with at most {@code maxBuckets} distinct keys {@code >> e},
     * from distinct keys in ascending order: keys {@code a < b} stay apart after {@code >> e} exactly
     * when {@code e <=} the highest set bit of {@code a ^ b}, so the count at every {@code e} follows
     * from one pass over neighbours.
     */
    private static int fitShift(long[] keys, int atLeast, int maxBuckets) {
        int[] apartUpTo = new int[64];  // apartUpTo[h]: neighbours whose highest differing bit is h
        for (int i = 1; i < keys.length; i++) {
            apartUpTo[63 - Long.numberOfLeadingZeros(keys[i - 1] ^ keys[i])]++;
        }
        int distinct = keys.length;  // distinct keys >> e, for e = 0, 1, ...
        for (int e = 0; e < 64; e++) {
            if (e >= atLeast && distinct <= maxBuckets) {
                return e;
            }
            distinct -= apartUpTo[e];
        }
        return 63;
    }

    /** How many used even keys {@code k} have {@code k + 1} used too (each such pair is one key {@code >> 1}). */
    private int pairsJoinedByOneStep() {
        int pairs = 0;
        for (int i = 0; i < table.length; i += 2) {
            long k = table[i];
            if (k != EMPTY && (k & 1) == 0 && slotOf(k + 1) >= 0) {
                pairs++;
            }
        }
        return pairs;
    }

    /** Sorts the first values into buckets, or coarsens the map to at most M keys: what every reader sees. */
    private void settle() {
        flushPending();
        if (firstKeys != null) {
            sortFirstKeys();
        }
        if (sortedBucketKeys == null && size > maxBuckets) {
            collapse(0);
        }
    }

    /** Occupied buckets a segment's histogram keeps at least when brought to its window's resolution (sketches/histogram.py). */
    public static final int SEGMENT_MIN_BUCKETS = 256;

    /**
     * The shift a segment's histogram is kept at in its window's summary: its whole window's, but never
     * coarser than the finest shift at which the segment fits {@code minBuckets} buckets, and never finer than
     * it is (sketches/histogram.py {@code segment_shift}, the same rule).
     */
    public static int segmentShift(LogLinearHistogram segment, LogLinearHistogram whole, int minBuckets) {
        int own = segment.shift();
        if (segment.precision != whole.precision || segment.maxBuckets != whole.maxBuckets) {
            return own;
        }
        int ownFit = own + fitShift(segment.sortedKeys(), 0, minBuckets);
        return Math.max(own, Math.min(whole.shift(), ownFit));
    }

    /** Coarsens the buckets to resolution {@code target} (each count goes to its key shifted right; no finer than now). */
    public void coarsenTo(int target) {
        settle();
        int by = target - shift;
        if (by <= 0) {
            return;
        }
        shift = target;
        if (sortedBucketKeys == null) {
            rehash(table.length / 2, by);
            return;
        }
        long[] keys = sortedBucketKeys;
        long[] counts = sortedBucketCounts;
        int b = 0;
        for (int i = 0; i < keys.length; ) {  // runs of equal keys at the new shift: one bucket each
            long key = keys[i] >> by;
            long count = 0;
            int j = i;
            while (j < keys.length && keys[j] >> by == key) {
                count += counts[j++];
            }
            keys[b] = key;  // b never passes i
            counts[b++] = count;
            i = j;
        }
        sortedBucketKeys = Arrays.copyOf(keys, b);
        sortedBucketCounts = Arrays.copyOf(counts, b);
    }

    /** Adds {@code other} into this one (same P and M). */
    public void merge(LogLinearHistogram other) {
        if (other.precision != precision || other.maxBuckets != maxBuckets) {
            throw new IllegalArgumentException("cannot merge histograms with P/M " + precision + "/" + maxBuckets
                    + " and " + other.precision + "/" + other.maxBuckets);
        }
        ensureTable();
        settle();
        other.settle();
        int target = Math.max(shift, other.shift);
        if (target > shift) {
            collapse(target - shift);
        }
        int by = target - other.shift;
        if (other.sortedBucketKeys != null) {  // at most M buckets
            for (int i = 0; i < other.sortedBucketKeys.length; i++) {
                add(other.sortedBucketKeys[i] >> by, other.sortedBucketCounts[i]);
            }
        } else {
            for (int i = 0; i < other.table.length; i += 2) {
                if (other.table[i] != EMPTY) {
                    add(other.table[i] >> by, other.table[i + 1]);
                }
            }
        }
        if (other.n > 0) {
            min = n == 0 ? other.min : Math.min(min, other.min);
            max = n == 0 ? other.max : Math.max(max, other.max);
        }
        n += other.n;
        nulls += other.nulls;
        nans += other.nans;
        posInf += other.posInf;
        negInf += other.negInf;
        collapse(0);
    }

    /** The used keys, ascending. */
    public long[] sortedKeys() {
        settle();
        return sortedBucketKeys != null ? sortedBucketKeys.clone() : usedKeysSorted();
    }

    private long[] usedKeysSorted() {
        long[] out = new long[size];
        int j = 0;
        for (int i = 0; i < table.length; i += 2) {
            if (table[i] != EMPTY) {
                out[j++] = table[i];
            }
        }
        Arrays.sort(out);
        return out;
    }

    /** The slot (an even index into the table) of {@code key} at the current shift; -1 when it has no bucket. */
    private int slotOf(long key) {
        int mask = table.length - 2;
        for (int i = home(key, mask); table[i] != EMPTY; i = (i + 2) & mask) {
            if (table[i] == key) {
                return i;
            }
        }
        return -1;
    }

    /** The count of {@code key} (at the current shift). */
    public long count(long key) {
        settle();
        if (sortedBucketKeys != null) {
            int i = Arrays.binarySearch(sortedBucketKeys, key);
            return i < 0 ? 0 : sortedBucketCounts[i];
        }
        int slot = slotOf(key);
        return slot < 0 ? 0 : table[slot + 1];
    }

    public int shift() {
        settle();
        return shift;
    }

    /** The kind 25 frame: the keys as the first and the steps between them, and the counts, as varints. */
    public byte[] toBytes() {
        settle();
        long[] sorted = sortedBucketKeys != null ? sortedBucketKeys : usedKeysSorted();
        int size = sorted.length;
        long[] steps = new long[Math.max(size - 1, 0)];
        long[] sortedCounts = sortedBucketCounts != null ? sortedBucketCounts : new long[size];
        for (int i = 0; i < size; i++) {
            if (sortedBucketCounts == null) {
                sortedCounts[i] = table[slotOf(sorted[i]) + 1];  // a used key: it has a slot
            }
            if (i > 0) {
                steps[i - 1] = sorted[i] - sorted[i - 1];  // wraps: the reader adds it back the same way
            }
        }
        return new FrameWriter(KIND, 112 + 10 * size)
                .u8(precision).u32(maxBuckets).u8(shift).i64(n)
                .i64(nulls).i64(nans).i64(posInf).i64(negInf).f64(min).f64(max)
                .u32(size).i64(size > 0 ? sorted[0] : 0).varints(steps, steps.length).varints(sortedCounts, size)
                .toBytes();
    }

    /** Reads a kind 25 frame back (or a kind 20 or 6 one, written before). */
    public static LogLinearHistogram fromBytes(byte[] data) {
        FrameReader in = new FrameReader(data, KIND, KIND_PACKED, KIND_UNPACKED);
        int precision = in.u8();
        long maxBuckets = in.u32();
        if (maxBuckets > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("histogram max_buckets too large: " + maxBuckets);
        }
        LogLinearHistogram h = new LogLinearHistogram(precision, (int) maxBuckets);
        h.firstKeys = null;
        h.shift = in.u8();
        h.n = in.i64();
        h.nulls = in.i64();
        h.nans = in.i64();
        h.posInf = in.i64();
        h.negInf = in.i64();
        h.min = in.f64();
        h.max = in.f64();
        long[] keys;
        long[] counts;
        if (in.kind == KIND_UNPACKED) {
            keys = in.longs(-1);
            counts = in.longs(keys.length);
        } else {
            long size = in.u32();
            long first = in.i64();
            boolean varints = in.kind == KIND;  // both readers check the bytes hold them: no huge arrays
            long[] steps = varints ? in.varints(Math.max(size - 1, 0)) : in.packed(Math.max(size - 1, 0));
            counts = varints ? in.varints(size) : in.packed(size);
            keys = keysFromSteps(first, steps, (int) size);
        }
        in.done();
        if (keys.length > h.maxBuckets) {
            throw new IllegalArgumentException("corrupt histogram: " + keys.length + " buckets, at most " + maxBuckets);
        }
        long total = 0;
        for (int i = 0; i < keys.length; i++) {
            if (i > 0 && keys[i] <= keys[i - 1]) {
                throw new IllegalArgumentException("corrupt histogram: keys not strictly ascending");
            }
            if (counts[i] <= 0) {
                throw new IllegalArgumentException("corrupt histogram: a count of " + counts[i]);
            }
            total += counts[i];
        }
        if (total != h.n) {
            throw new IllegalArgumentException("corrupt histogram: counts add up to " + total + ", n is " + h.n);
        }
        h.sortedBucketKeys = keys;
        h.sortedBucketCounts = counts;
        return h;
    }

    private static long[] keysFromSteps(long first, long[] steps, int size) {
        long[] keys = new long[size];
        for (int i = 0; i < size; i++) {
            keys[i] = i == 0 ? first : keys[i - 1] + steps[i - 1];
        }
        return keys;
    }
}
