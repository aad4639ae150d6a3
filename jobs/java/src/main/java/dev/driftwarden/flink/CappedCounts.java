package dev.driftwarden.flink;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;

/**
 * The categorical capped counts of sketches/FORMAT.md (kind 7): exact counts while at most C
 * distinct values are seen, then only the values whose hash is below T, the (C+1)-th smallest hash
 * of all distinct values seen. Hashes are computed only once the map first exceeds C.
 */
public final class CappedCounts {
    public static final int KIND = 7;
    public static final long UNCAPPED = Long.MAX_VALUE;

    /** A kept value (the instance first counted), its count and, once capped, its hash. */
    static final class Counter {
        final String value;
        long count;
        long hash;
        boolean hashed;

        Counter(String value, long count) {
            this.value = value;
            this.count = count;
        }
    }

    public final int cap;
    long n;
    long nulls;
    long threshold = UNCAPPED;
    final HashMap<String, Counter> counts = new HashMap<>();

    public CappedCounts(int cap) {
        if (cap < 1) {
            throw new IllegalArgumentException("max_exact must be >= 1, got " + cap);
        }
        this.cap = cap;
    }

    /**
     * Counts one value; {@code null} is counted as a null. Returns the kept instance equal to
     * {@code value} (the one first counted), or {@code value} itself when it is not kept: a caller
     * that holds on to the value (the event sample) then holds one long-lived string per distinct
     * value, not each event's copy, which the young collection would otherwise have to copy.
     */
    public String update(String value) {
        if (value == null) {
            nulls++;
            return null;
        }
        n++;
        Counter c = counts.get(value);
        if (c != null) {
            c.count++;
            return c.value;
        }
        if (threshold == UNCAPPED) {
            counts.put(value, new Counter(value, 1));
        } else {
            long h = Hashing.valueHash(value);
            if (h >= threshold) {
                return value;
            }
            c = new Counter(value, 1);
            c.hash = h;
            c.hashed = true;
            counts.put(value, c);
        }
        if (counts.size() > cap) {
            capAgain();
        }
        return value;
    }

    private static long hashOf(String value, Counter c) {
        if (!c.hashed) {
            c.hash = Hashing.valueHash(value);
            c.hashed = true;
        }
        return c.hash;
    }

    /** While more than C values are kept: T = the (C+1)-th smallest kept hash, drop hashes >= T. */
    private void capAgain() {
        if (counts.size() <= cap) {
            return;
        }
        long t;
        if (counts.size() == cap + 1) {
            t = Long.MIN_VALUE;
            for (Map.Entry<String, Counter> e : counts.entrySet()) {
                t = Math.max(t, hashOf(e.getKey(), e.getValue()));
            }
        } else {
            long[] hashes = new long[counts.size()];
            int i = 0;
            for (Map.Entry<String, Counter> e : counts.entrySet()) {
                hashes[i++] = hashOf(e.getKey(), e.getValue());
            }
            Arrays.sort(hashes);
            t = hashes[cap];
        }
        dropFrom(t);
    }

    /** Sets T and drops the kept values whose hash is >= T. */
    private void dropFrom(long t) {
        threshold = t;
        for (Iterator<Map.Entry<String, Counter>> it = counts.entrySet().iterator(); it.hasNext(); ) {
            Map.Entry<String, Counter> e = it.next();
            if (hashOf(e.getKey(), e.getValue()) >= t) {
                it.remove();
            }
        }
    }

    /** Adds {@code other} into this one (same C). */
    public void merge(CappedCounts other) {
        if (other.cap != cap) {
            throw new IllegalArgumentException("cannot merge capped counts with C " + cap + " and " + other.cap);
        }
        long t = Math.min(threshold, other.threshold);
        if (t != UNCAPPED) {
            dropFrom(t);
        }
        for (Map.Entry<String, Counter> e : other.counts.entrySet()) {
            String value = e.getKey();
            Counter theirs = e.getValue();
            long h = 0;
            if (t != UNCAPPED) {
                h = theirs.hashed ? theirs.hash : Hashing.valueHash(value);
                if (h >= t) {
                    continue;
                }
            }
            Counter mine = counts.get(value);
            if (mine == null) {
                mine = new Counter(value, 0);
                mine.hash = h;
                mine.hashed = t != UNCAPPED;
                counts.put(value, mine);
            }
            mine.count += theirs.count;
        }
        n += other.n;
        nulls += other.nulls;
        capAgain();
    }

    /** The kind 7 frame. */
    public byte[] toBytes() {
        int m = counts.size();
        byte[][] encoded = new byte[m][];
        long[] unsorted = new long[m];
        Integer[] order = new Integer[m];
        int i = 0;
        for (Map.Entry<String, Counter> e : counts.entrySet()) {
            encoded[i] = e.getKey().getBytes(StandardCharsets.UTF_8);
            unsorted[i] = e.getValue().count;
            order[i] = i;
            i++;
        }
        Arrays.sort(order, (a, b) -> Arrays.compareUnsigned(encoded[a], encoded[b]));
        byte[][] values = new byte[m][];
        long[] kept = new long[m];
        for (i = 0; i < m; i++) {
            values[i] = encoded[order[i]];
            kept[i] = unsorted[order[i]];
        }
        return new FrameWriter(KIND, 64 + 16 * m)
                .u32(cap).i64(n).i64(nulls).i64(threshold)
                .texts(values, m).longs(kept, m)
                .toBytes();
    }

    /** Reads a kind 7 frame back. */
    public static CappedCounts fromBytes(byte[] data) {
        FrameReader in = new FrameReader(data, KIND);
        long cap = in.u32();
        if (cap > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("capped counts C too large: " + cap);
        }
        CappedCounts c = new CappedCounts((int) cap);
        c.n = in.i64();
        c.nulls = in.i64();
        c.threshold = in.i64();
        String[] values = in.texts();
        long[] kept = in.longs(values.length);
        in.done();
        if (values.length > cap) {
            throw new IllegalArgumentException("corrupt capped counts: " + values.length + " values kept, C is " + cap);
        }
        for (int i = 0; i < values.length; i++) {
            Counter counter = new Counter(values[i], kept[i]);
            if (c.threshold != UNCAPPED) {
                hashOf(values[i], counter);
            }
            if (c.counts.put(values[i], counter) != null) {
                throw new IllegalArgumentException("corrupt capped counts: value repeated");
            }
        }
        return c;
    }
}
