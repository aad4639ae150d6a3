package dev.driftwarden.flink;

import java.math.BigInteger;

/**
 * Count, sums and sums of cross-products of a group of numeric features over a window's complete
 * rows, as exact integers (sketches/FORMAT.md, kind 23; Python {@code sketches/moments.py} is the
 * same rule, vectorised). Each value is rounded to 31 significant bits, {@code x = q * 2^p}; a
 * product is the exact {@code q_i * q_j} at {@code p_i + p_j}; every sum is accumulated in 32-bit
 * limbs of a fixed point number scaled by {@code 2^SCALE}. Integer addition is order-free: any
 * order and split of the events give the same bytes.
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

    final String[] names;
    long n;
    long incomplete;
    /** Per term (the d sums, then the d(d+1)/2 products i <= j row by row), LIMBS limbs. */
    final long[] limbs;
    private long pending;
    private final long[] q;
    private final int[] p;

    GroupMoments(String[] names) {
        this.names = names;
        int d = names.length;
        this.limbs = new long[(d + d * (d + 1) / 2) * LIMBS];
        this.q = new long[d];
        this.p = new int[d];
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
        int d = names.length;
        for (int k = 0; k < d; k++) {
            double x = row[k];
            if (Math.abs(x) < TINY) {
                q[k] = 0;
                p[k] = 0;
            } else {
                int e = Math.getExponent(x);
                q[k] = (long) Math.rint(Math.scalb(x, 30 - e));
                p[k] = e - 30;
            }
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
        n++;
        if (++pending >= NORMALIZE_AFTER) {
            normalize();
        }
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
        n += other.n;
        incomplete += other.incomplete;
        for (int i = 0; i < limbs.length; i++) {
            limbs[i] += other.limbs[i];
        }
        pending += other.pending;
        if (pending >= NORMALIZE_AFTER) {
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

    /** Term {@code t}'s exact value scaled by 2^SCALE. */
    BigInteger value(int t) {
        BigInteger total = BigInteger.ZERO;
        for (int k = LIMBS - 1; k >= 0; k--) {
            total = total.shiftLeft(32).add(BigInteger.valueOf(limbs[t * LIMBS + k]));
        }
        return total;
    }

    /** The kind 23 frame. */
    byte[] toBytes() {
        FrameWriter out = new FrameWriter(KIND, 64 + 16 * limbs.length / LIMBS);
        out.u32(names.length);
        for (String name : names) {
            out.text(name);
        }
        out.i64(n).i64(incomplete).u32(terms());
        for (int t = 0; t < terms(); t++) {
            BigInteger v = value(t);
            if (v.signum() == 0) {
                out.u32(0).blob(new byte[0]);
                continue;
            }
            int zeros = v.getLowestSetBit();
            byte[] big = v.shiftRight(zeros).toByteArray();
            byte[] little = new byte[big.length];
            for (int i = 0; i < big.length; i++) {
                little[i] = big[big.length - 1 - i];
            }
            out.u32(zeros).blob(little);
        }
        return out.toBytes();
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
        for (int t = 0; t < terms; t++) {
            long zeros = in.u32();
            byte[] little = in.blob();
            if (zeros > 4096 || little.length > 512) {
                throw new IllegalArgumentException("corrupt group moments: an integer of " + little.length + " bytes");
            }
            if (little.length == 0) {
                continue;
            }
            byte[] big = new byte[little.length];
            for (int i = 0; i < big.length; i++) {
                big[i] = little[little.length - 1 - i];
            }
            m.setValue(t, new BigInteger(big).shiftLeft((int) zeros));
        }
        in.done();
        return m;
    }

    /** Sets term {@code t} to {@code value} (scaled by 2^SCALE), as canonical limbs. */
    private void setValue(int t, BigInteger value) {
        if (value.bitLength() > 32 * (LIMBS - 1) + 62) {
            throw new IllegalArgumentException("corrupt group moments: a sum of " + value.bitLength() + " bits");
        }
        for (int k = 0; k < LIMBS - 1; k++) {
            limbs[t * LIMBS + k] = value.shiftRight(32 * k).longValue() & MASK;
        }
        limbs[t * LIMBS + LIMBS - 1] = value.shiftRight(32 * (LIMBS - 1)).longValue();
    }
}
