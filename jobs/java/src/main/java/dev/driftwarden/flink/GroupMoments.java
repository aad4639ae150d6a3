package dev.driftwarden.flink;

import java.math.BigInteger;

/**
 * Count, sums and sums of cross-products of a group of numeric features over a window's complete
 * rows, as exact integers (sketches/FORMAT.md, kind 23; Python {@code sketches/moments.py} is the
 * same rule, vectorised). Each value is rounded to 31 significant bits, {@code x = q * 2^p}; a
 * product is the exact {@code q_i * q_j} at {@code p_i + p_j}; every sum is accumulated in 32-bit
 * limbs of a fixed point number scaled by {@code 2^SCALE}. Integer addition is order-free: any
 * order and split of the events give the same bytes.
 *
 * <p>The fast path: each feature has an anchor position {@code a}; a value whose position lies
 * within {@link #SPAN} above it is the exact integer {@code Q = q << (p - a)} (at most 48 bits),
 * split {@code Q = high * 2^24 + low} ({@code |high| <= 2^24}, {@code |low| <= 2^23}); a product
 * {@code Q_i * Q_j} is then three partial products (high * high, high * low + low * high, low * low)
 * at positions {@code a_i + a_j + 48, + 24, + 0}, each at most 2^48 in magnitude. Fast rows wait in a
 * batch of {@link #BATCH}; a full batch's partial products are summed per term in {@link #LANES}
 * double accumulators of {@code BATCH / LANES} rows each, by fused multiply-adds (exact: every
 * partial sum an integer of at most 2^53), then added to a plain long per term. A feature's first
 * value since a flush sets its anchor (its terms are all 0 then: nothing to flush); a later value
 * above its window moves the anchor up (everything flushed into the limbs first); a row with a value below its window
 * goes to the limbs directly, term by term (the plain path). The accumulators are flushed into the limbs every
 * {@link #FLUSH_AFTER} rows and before merging and serialising: the sums, and so the bytes, are
 * exactly those of the plain path ({@link GroupMomentsCheck} compares them).
 */
public final class GroupMoments {
    public static final int KIND = 23;
    static final int SCALE = 320;
    /** Limbs of one sum (the Python side's LIMBS + 2: room for the two carries above the top position). */
    static final int LIMBS = 22;
    static final double LIMIT = 0x1p128;
    static final double TINY = 0x1p-128;
    private static final long MASK = 0xFFFFFFFFL;
    /** Events added to a limb since its carries were last propagated; below 2^31 no limb can overflow. */
    private static final long NORMALIZE_AFTER = 1L << 30;
    /** A value is on the fast path when its position is its feature's anchor .. anchor + SPAN: |Q| <= 2^(31 + SPAN). */
    static final int SPAN = 17;
    /** A new anchor sits this many positions below the value that sets it (room for smaller values). */
    static final int BELOW = 13;
    /** A value at its anchor, |Q| <= 2^48, is {@code high * 2^HALF + low}: |high| <= 2^24, 0 <= low < 2^24. */
    private static final int HALF = 24;
    /** The lowest anchor: the position of a product's accumulator, 2 * MIN_ANCHOR + SCALE, stays >= 0. */
    private static final int MIN_ANCHOR = -SCALE / 2;
    /**
     * Rows between flushes of the accumulators: per row a partial product or a sum adds at most 2^48;
     * 2^13 rows stay below 2^61.
     */
    static final long FLUSH_AFTER = 1L << 13;
    /**
     * Fast rows kept before their partial products are summed: a partial product of one row is at most
     * 2^48 in magnitude (|high| <= 2^24, |low| <= 2^23), and each of the {@link #LANES} accumulators of
     * a term sums every LANES-th row of the batch, 32 rows: its sum stays within 2^53, where every
     * integer is exact in a double.
     */
    static final int BATCH = 128;
    /** Accumulators per term and batch (independent chains of multiply-adds), each over BATCH / LANES rows. */
    static final int LANES = 4;
    /** The biased exponent of TINY: a value whose biased exponent is below it counts as 0. */
    private static final int TINY_EXPONENT = 1023 - 128;
    /**
     * Whether the batch sums use {@link Math#fma} (the JVM's {@code UseFMA}: one instruction; without it Math.fma
     * is emulated in software, far slower than a multiply and an add). Both give the same sums (every partial
     * sum is exact); {@code -Ddriftwarden.group.fma=false} turns it off (the checks run both).
     */
    static final boolean FUSED = hardwareFma() && !"false".equals(System.getProperty("driftwarden.group.fma"));
    /** The anchor of a feature with no value since the last flush. */
    private static final int UNSET = Integer.MIN_VALUE / 4;

    final String[] names;
    long n;
    long incomplete;
    /** Per term (the d sums, then the d(d+1)/2 products i <= j row by row), LIMBS limbs. */
    final long[] limbs;
    private long pending;
    /** Per feature, the sum of its values at its anchor since the last flush. */
    private final long[] sums;
    /** Per product (i, j), the sums of its three partial products (high * high, the two high * low, low * low). */
    private final long[] upper;
    private final long[] middle;
    private final long[] lower;
    /**
     * The fast rows not yet in those sums, feature by feature ({@code k * BATCH + r}): each value at its
     * anchor split {@code high * 2^HALF + low}, as doubles (exact integers).
     */
    private final double[] batchHigh;
    private final double[] batchLow;
    /** Rows in the batch. */
    private int batched;
    /** Per feature, its anchor position (UNSET: none yet). */
    private final int[] anchor;
    /** Rows since the accumulators were last flushed. */
    private long unflushed;
    /** Rows between flushes and between normalisations (the constants; smaller only in the checks). */
    private final long flushAfter;
    private final long normalizeAfter;
    /** A row of the plain path: each value as {@code q[k] * 2^p[k]}. */
    private final long[] q;
    private final int[] p;

    GroupMoments(String[] names) {
        this(names, FLUSH_AFTER, NORMALIZE_AFTER);
    }

    /** Moments whose accumulators are flushed and limbs normalised more often (the checks only). */
    GroupMoments(String[] names, long flushAfter, long normalizeAfter) {
        if (flushAfter < 1 || flushAfter > FLUSH_AFTER || normalizeAfter < 1 || normalizeAfter > NORMALIZE_AFTER) {
            throw new IllegalArgumentException(
                    "flushAfter in 1 .. 2^13 and normalizeAfter in 1 .. 2^30 keep the sums exact");
        }
        this.names = names;
        int d = names.length;
        int terms = d + d * (d + 1) / 2;
        this.limbs = new long[terms * LIMBS];
        int products = d * (d + 1) / 2;
        this.sums = new long[d];
        this.upper = new long[products];
        this.middle = new long[products];
        this.lower = new long[products];
        this.anchor = new int[d];
        java.util.Arrays.fill(anchor, UNSET);
        this.batchHigh = new double[d * BATCH];
        this.batchLow = new double[d * BATCH];
        this.flushAfter = flushAfter;
        this.normalizeAfter = normalizeAfter;
        this.q = new long[d];
        this.p = new int[d];
    }

    /** Whether this JVM compiles Math.fma to one instruction (HotSpot's UseFMA flag; false when it cannot tell). */
    private static boolean hardwareFma() {
        try {
            return Boolean.parseBoolean(java.lang.management.ManagementFactory
                    .getPlatformMXBean(com.sun.management.HotSpotDiagnosticMXBean.class).getVMOption("UseFMA").getValue());
        } catch (RuntimeException | LinkageError e) {
            return false;
        }
    }

    int terms() {
        int d = names.length;
        return d + d * (d + 1) / 2;
    }

    /** Whether a value may enter the moments (finite, below 2^128 in magnitude); its row is incomplete otherwise. */
    static boolean inRange(double x) {
        return Math.abs(x) < LIMIT;
    }

    /** Counts a row that has a null, invalid, non-finite or out-of-range value of the group. */
    void addIncomplete() {
        incomplete++;
    }

    /** Adds a complete row: {@code row[k]} is the k-th feature's value, each {@link #inRange}. */
    void add(double[] row) {
        if (placed(row)) {
            if (++batched == BATCH) {
                addBatch();
            }
        } else {
            addPlain(row);
        }
        n++;
        if (++unflushed >= flushAfter) {
            flush();
            java.util.Arrays.fill(anchor, UNSET);
        }
        if (++pending >= normalizeAfter) {
            normalize();
        }
    }

    /**
     * The row's values into the batch's next slot, each at its feature's anchor (set or moved up on
     * the way: a move up flushes the batch first, and the row's values placed before it are placed again);
     * whether all fit (false: a value lies below its window; the slot is then left unused).
     */
    private boolean placed(double[] row) {
        int d = names.length;
        boolean fits = true;
        for (int k = 0; k < d; k++) {
            int fit = place(k, row[k]);
            if (fit == ABOVE_WINDOW) {
                flush();  // every term's position follows from the anchors
                for (int before = 0; before < k; before++) {
                    place(before, row[before]);  // into the emptied batch (their anchors stay)
                }
                anchor[k] = UNSET;  // its terms are all 0 now: the value sets it anew
                fit = place(k, row[k]);
            }
            fits &= fit == FITS;
        }
        return fits;
    }

    /** {@link #place}'s answers: the value is in the batch; it lies below its window; above (the anchor must move up). */
    private static final int FITS = 0;
    private static final int BELOW_WINDOW = 1;
    private static final int ABOVE_WINDOW = 2;

    /**
     * Value {@code x} of feature {@code k} into the batch's next slot, in one pass: {@code q * 2^p} (its
     * 53-bit significand rounded half to even to 31 bits, as {@code Math.rint(Math.scalb(x, 30 - e))};
     * 0 below TINY), then {@code q << (p - anchor)}, split {@code high * 2^HALF + low} (high rounded:
     * {@code |low| <= 2^23}). A feature's first value since a flush sets its anchor (its terms are all
     * 0: nothing to flush); a value above its window answers ABOVE_WINDOW, the anchor unchanged (the
     * caller flushes, unsets the anchor and places the value again).
     */
    private int place(int k, double x) {
        long bits = Double.doubleToRawLongBits(x);
        int exponent = (int) (bits >>> 52) & 0x7FF;
        if (exponent < TINY_EXPONENT) {
            split(k, 0);
            return FITS;
        }
        int position = exponent - 1023 - 30;
        int shift = position - anchor[k];
        if (shift > SPAN) {
            if (anchor[k] != UNSET) {
                return ABOVE_WINDOW;
            }
            anchor[k] = Math.max(position - BELOW, MIN_ANCHOR);
            shift = position - anchor[k];
        }
        if (shift < 0) {
            return BELOW_WINDOW;
        }
        split(k, significand31(bits) << shift);
        return FITS;
    }

    /** The 31-bit significand of a normal double's bits, rounded half to even, with its sign. */
    private static long significand31(long bits) {
        long significand = (bits & 0xF_FFFF_FFFF_FFFFL) | (1L << 52);
        long rounded = (significand + 0x1F_FFFFL + ((significand >>> 22) & 1)) >>> 22;  // half to even
        long sign = bits >> 63;
        return (rounded ^ sign) - sign;
    }

    /**
     * Value {@code value} of feature {@code k} at its anchor into the batch's next slot, split
     * {@code high * 2^HALF + low} with high rounded: {@code |low| <= 2^23}.
     */
    private void split(int k, long value) {
        long high = (value + (1L << (HALF - 1))) >> HALF;
        int at = k * BATCH + batched;
        batchHigh[at] = high;
        batchLow[at] = value - (high << HALF);
    }

    /**
     * The batch's partial products into the accumulators: for each product (i, j), the sums over the
     * batch's rows of high * high, high * low + low * high and low * low, each in {@link #LANES}
     * accumulators (row r in lane r % LANES; independent chains, so the multiply-adds overlap), each
     * exact in a double. A partial batch is padded with zeros.
     */
    private void addBatch() {
        int rows = batched;
        if (rows == 0) {
            return;
        }
        int d = names.length;
        if (rows < BATCH) {
            for (int k = 0; k < d; k++) {
                java.util.Arrays.fill(batchHigh, k * BATCH + rows, (k + 1) * BATCH, 0.0);
                java.util.Arrays.fill(batchLow, k * BATCH + rows, (k + 1) * BATCH, 0.0);
            }
        }
        for (int k = 0; k < d; k++) {
            sumValues(k);
        }
        int u = 0;
        for (int i = 0; i < d; i++) {
            for (int j = i; j < d; j++, u++) {
                if (FUSED) {
                    sumProducts(i * BATCH, j * BATCH, u);
                } else {
                    sumProductsUnfused(i * BATCH, j * BATCH, u);
                }
            }
        }
        batched = 0;
    }

    /** Feature k's values over the batch into its sum: the highs and lows summed apart (exact: at most 2^31). */
    private void sumValues(int k) {
        double highs = 0;
        double lows = 0;
        for (int r = k * BATCH; r < (k + 1) * BATCH; r++) {
            highs += batchHigh[r];
            lows += batchLow[r];
        }
        sums[k] += ((long) highs << HALF) + (long) lows;
    }

    /** Product u's three partial products over the batch, features at {@code a} and {@code b} of the batch arrays. */
    private void sumProducts(int a, int b, int u) {
        double[] high = batchHigh;
        double[] low = batchLow;
        double up0 = 0, up1 = 0, up2 = 0, up3 = 0;
        double mid0 = 0, mid1 = 0, mid2 = 0, mid3 = 0;
        double lo0 = 0, lo1 = 0, lo2 = 0, lo3 = 0;
        for (int r = 0; r < BATCH; r += LANES) {
            double hi = high[a + r], li = low[a + r], hj = high[b + r], lj = low[b + r];
            up0 = Math.fma(hi, hj, up0);
            mid0 = Math.fma(li, hj, Math.fma(hi, lj, mid0));
            lo0 = Math.fma(li, lj, lo0);
            hi = high[a + r + 1]; li = low[a + r + 1]; hj = high[b + r + 1]; lj = low[b + r + 1];
            up1 = Math.fma(hi, hj, up1);
            mid1 = Math.fma(li, hj, Math.fma(hi, lj, mid1));
            lo1 = Math.fma(li, lj, lo1);
            hi = high[a + r + 2]; li = low[a + r + 2]; hj = high[b + r + 2]; lj = low[b + r + 2];
            up2 = Math.fma(hi, hj, up2);
            mid2 = Math.fma(li, hj, Math.fma(hi, lj, mid2));
            lo2 = Math.fma(li, lj, lo2);
            hi = high[a + r + 3]; li = low[a + r + 3]; hj = high[b + r + 3]; lj = low[b + r + 3];
            up3 = Math.fma(hi, hj, up3);
            mid3 = Math.fma(li, hj, Math.fma(hi, lj, mid3));
            lo3 = Math.fma(li, lj, lo3);
        }
        upper[u] += (long) up0 + (long) up1 + (long) up2 + (long) up3;
        middle[u] += (long) mid0 + (long) mid1 + (long) mid2 + (long) mid3;
        lower[u] += (long) lo0 + (long) lo1 + (long) lo2 + (long) lo3;
    }

    /** {@link #sumProducts} by separate multiplies and adds (the same sums: every one exact), where the JVM has no FMA instruction. */
    private void sumProductsUnfused(int a, int b, int u) {
        double[] high = batchHigh;
        double[] low = batchLow;
        double up0 = 0, up1 = 0, up2 = 0, up3 = 0;
        double mid0 = 0, mid1 = 0, mid2 = 0, mid3 = 0;
        double lo0 = 0, lo1 = 0, lo2 = 0, lo3 = 0;
        for (int r = 0; r < BATCH; r += LANES) {
            double hi = high[a + r], li = low[a + r], hj = high[b + r], lj = low[b + r];
            up0 += hi * hj;
            mid0 += hi * lj + li * hj;
            lo0 += li * lj;
            hi = high[a + r + 1]; li = low[a + r + 1]; hj = high[b + r + 1]; lj = low[b + r + 1];
            up1 += hi * hj;
            mid1 += hi * lj + li * hj;
            lo1 += li * lj;
            hi = high[a + r + 2]; li = low[a + r + 2]; hj = high[b + r + 2]; lj = low[b + r + 2];
            up2 += hi * hj;
            mid2 += hi * lj + li * hj;
            lo2 += li * lj;
            hi = high[a + r + 3]; li = low[a + r + 3]; hj = high[b + r + 3]; lj = low[b + r + 3];
            up3 += hi * hj;
            mid3 += hi * lj + li * hj;
            lo3 += li * lj;
        }
        upper[u] += (long) up0 + (long) up1 + (long) up2 + (long) up3;
        middle[u] += (long) mid0 + (long) mid1 + (long) mid2 + (long) mid3;
        lower[u] += (long) lo0 + (long) lo1 + (long) lo2 + (long) lo3;
    }

    /** The row's sums and products into the limbs, term by term. */
    private void addPlain(double[] row) {
        int d = names.length;
        for (int k = 0; k < d; k++) {
            long bits = Double.doubleToRawLongBits(row[k]);
            int exponent = (int) (bits >>> 52) & 0x7FF;
            boolean zero = exponent < TINY_EXPONENT;
            q[k] = zero ? 0 : significand31(bits);
            p[k] = zero ? 0 : exponent - 1023 - 30;
        }
        for (int k = 0; k < d; k++) {
            addTerm(k, q[k], p[k] + SCALE);
        }
        int t = d;
        for (int i = 0; i < d; i++) {
            long qi = q[i];
            int pi = p[i] + SCALE;
            for (int j = i; j < d; j++, t++) {
                long v = qi * q[j];
                if (v != 0) {
                    addTerm(t, v, pi + p[j]);
                }
            }
        }
    }

    /**
     * Moves every accumulator into its term's limbs, at the term's position (a term with a feature
     * never anchored is 0: addTerm skips it).
     */
    private void flush() {
        addBatch();
        int d = names.length;
        for (int k = 0; k < d; k++) {
            addTerm(k, sums[k], anchor[k] + SCALE);
            sums[k] = 0;
        }
        int u = 0;
        for (int i = 0; i < d; i++) {
            for (int j = i; j < d; j++, u++) {
                int position = anchor[i] + anchor[j] + SCALE;
                addTerm(d + u, lower[u], position);
                addTerm(d + u, middle[u], position + HALF);
                addTerm(d + u, upper[u], position + 2 * HALF);
                lower[u] = 0;
                middle[u] = 0;
                upper[u] = 0;
            }
        }
        unflushed = 0;
        pending += 3;  // a flush adds at most 3 parts to a limb
    }

    /** Adds {@code v * 2^(position - SCALE)} to term {@code t}: three limbs. */
    private void addTerm(int t, long v, int position) {
        if (v == 0) {
            return;
        }
        int base = t * LIMBS + (position >>> 5);
        int r = position & 31;
        long carry = v >> (32 - r);
        limbs[base] += (v << r) & MASK;
        limbs[base + 1] += carry & MASK;
        limbs[base + 2] += carry >> 32;
    }

    /** Adds another group's moments (same features). */
    void merge(GroupMoments other) {
        if (!java.util.Arrays.equals(names, other.names)) {
            throw new IllegalStateException("cannot merge moments of " + java.util.Arrays.toString(other.names)
                    + " into " + java.util.Arrays.toString(names));
        }
        other.flush();
        n += other.n;
        incomplete += other.incomplete;
        for (int i = 0; i < limbs.length; i++) {
            limbs[i] += other.limbs[i];
        }
        pending += other.pending;
        if (pending >= normalizeAfter) {
            normalize();
        }
    }

    /** Propagates every term's carries: each limb but the top one in [0, 2^32). */
    private void normalize() {
        for (int t = 0; t < terms(); t++) {
            int base = t * LIMBS;
            for (int k = 0; k < LIMBS - 1; k++) {
                long carry = limbs[base + k] >> 32;
                limbs[base + k] &= MASK;
                limbs[base + k + 1] += carry;
            }
        }
        pending = 0;
    }

    /** Term {@code t}'s exact value scaled by 2^SCALE (once {@link #flush}ed). */
    BigInteger value(int t) {
        BigInteger total = BigInteger.ZERO;
        for (int k = LIMBS - 1; k >= 0; k--) {
            total = total.shiftLeft(32).add(BigInteger.valueOf(limbs[t * LIMBS + k]));
        }
        return total;
    }

    /** The kind 23 frame. */
    byte[] toBytes() {
        flush();
        FrameWriter out = new FrameWriter(KIND, 64 + 16 * limbs.length / LIMBS);
        out.u32(names.length);
        for (String name : names) {
            out.text(name);
        }
        out.i64(n).i64(incomplete).u32(terms());
        byte[] term = new byte[TERM_BYTES];
        for (int t = 0; t < terms(); t++) {
            termBytes(t, term);
            writeInteger(out, term);
        }
        return out.toBytes();
    }

    /** Bytes of a term with its carries propagated: LIMBS - 1 limbs of 4 bytes and the top limb's 8. */
    private static final int TERM_BYTES = 4 * (LIMBS - 1) + 8;
    /** The most bits a sum read back may have (sign left out), as the limbs hold it canonically. */
    private static final int MAX_BITS = 32 * (LIMBS - 1) + 62;

    /** Term {@code t}'s exact value (scaled by 2^SCALE) into {@code out}: little-endian two's complement, TERM_BYTES bytes. */
    private void termBytes(int t, byte[] out) {
        int base = t * LIMBS;
        long carry = 0;
        for (int k = 0; k < LIMBS - 1; k++) {
            long limb = limbs[base + k] + carry;
            carry = limb >> 32;
            for (int b = 0; b < 4; b++) {
                out[4 * k + b] = (byte) (limb >>> (8 * b));
            }
        }
        long top = limbs[base + LIMBS - 1] + carry;
        for (int b = 0; b < 8; b++) {
            out[4 * (LIMBS - 1) + b] = (byte) (top >>> (8 * b));
        }
    }

    /**
     * A sum as FORMAT.md's kind 23 writes it: u32 {@code zeros} (its trailing zero bits), then the blob of
     * {@code value >> zeros} in the fewest little-endian two's complement bytes that keep its sign (as
     * Java's {@code BigInteger.toByteArray}, reversed); 0 as u32 0 and an empty blob.
     */
    static void writeInteger(FrameWriter out, byte[] little) {
        int length = little.length;
        int first = 0;
        while (first < length && little[first] == 0) {
            first++;
        }
        if (first == length) {
            out.u32(0).blob(new byte[0]);
            return;
        }
        int zeros = 8 * first + Integer.numberOfTrailingZeros(little[first] & 0xFF);
        int bits = zeros & 7;
        int size = length - first;
        byte sign = little[length - 1] < 0 ? (byte) -1 : 0;
        byte[] shifted = new byte[size];
        for (int i = 0; i < size; i++) {
            int low = little[first + i] & 0xFF;
            int high = first + i + 1 < length ? little[first + i + 1] : sign;
            shifted[i] = (byte) ((low >>> bits) | (high << (8 - bits)));
        }
        while (size > 1 && (shifted[size - 1] == 0 && shifted[size - 2] >= 0
                || shifted[size - 1] == -1 && shifted[size - 2] < 0)) {
            size--;  // a byte that only repeats the sign
        }
        out.u32(zeros).blob(java.util.Arrays.copyOf(shifted, size));
    }

    /** Reads a kind 23 frame back. */
    static GroupMoments fromBytes(byte[] data) {
        FrameReader in = new FrameReader(data, KIND);
        long d = in.u32();
        if (d > 10_000) {
            throw new IllegalArgumentException("corrupt group moments: " + d + " features");
        }
        String[] names = new String[(int) d];
        for (int i = 0; i < d; i++) {
            names[i] = in.text();
        }
        GroupMoments m = new GroupMoments(names);
        m.n = in.i64();
        m.incomplete = in.i64();
        long terms = in.u32();
        if (terms != m.terms() || m.n < 0 || m.incomplete < 0) {
            throw new IllegalArgumentException("corrupt group moments: " + terms + " sums for " + d + " features");
        }
        byte[] term = new byte[TERM_BYTES];
        for (int t = 0; t < terms; t++) {
            long zeros = in.u32();
            byte[] little = in.blob();
            if (zeros > 4096 || little.length > 512) {
                throw new IllegalArgumentException("corrupt group moments: an integer of " + little.length + " bytes");
            }
            if (little.length == 0) {
                continue;
            }
            readInteger(little, (int) zeros, term);
            m.setTerm(t, term);
        }
        in.done();
        return m;
    }

    /**
     * {@link #writeInteger}'s {@code (zeros, little)} back as {@code little << zeros} in {@code out}: little-endian
     * two's complement, TERM_BYTES bytes; IllegalArgumentException when it has more than MAX_BITS bits.
     */
    static void readInteger(byte[] little, int zeros, byte[] out) {
        int length = little.length;
        byte sign = little[length - 1] < 0 ? (byte) -1 : 0;
        int top = length - 1;
        while (top >= 0 && little[top] == sign) {
            top--;
        }
        int bits = top < 0 ? 0 : 8 * top + 32 - Integer.numberOfLeadingZeros((little[top] ^ sign) & 0xFF);
        if (top >= 0 || sign != 0) {
            bits += zeros;  // bits without the sign; 0 stays 0 however shifted
        }
        if (bits > MAX_BITS) {
            throw new IllegalArgumentException("corrupt group moments: a sum of " + bits + " bits");
        }
        int bytes = zeros >>> 3;
        int shift = zeros & 7;
        for (int j = 0; j < out.length; j++) {
            int i = j - bytes;
            int here = i < 0 ? 0 : i < length ? little[i] : sign;
            int below = i - 1 < 0 ? 0 : i - 1 < length ? little[i - 1] & 0xFF : sign & 0xFF;
            out[j] = (byte) ((here << shift) | (below >>> (8 - shift)));
        }
    }

    /** Sets term {@code t} to {@link #termBytes}' form {@code term}, as canonical limbs (each but the top in [0, 2^32)). */
    private void setTerm(int t, byte[] term) {
        int base = t * LIMBS;
        for (int k = 0; k < LIMBS - 1; k++) {
            long limb = 0;
            for (int b = 3; b >= 0; b--) {
                limb = (limb << 8) | (term[4 * k + b] & 0xFF);
            }
            limbs[base + k] = limb;
        }
        long top = 0;
        for (int b = 7; b >= 0; b--) {
            top = (top << 8) | (term[4 * (LIMBS - 1) + b] & 0xFF);
        }
        limbs[base + LIMBS - 1] = top;
    }
}
