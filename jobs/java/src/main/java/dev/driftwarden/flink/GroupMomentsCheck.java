package dev.driftwarden.flink;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.math.BigInteger;
import java.util.Random;

/**
 * Checks and times {@link GroupMoments}' accumulation against the plain limb path it replaced
 * ({@link PlainMoments}, kept here as it was: each value rounded by {@code Math.rint(Math.scalb)},
 * each sum and product added into three 32-bit limbs), and its sums' bytes against the
 * {@link BigInteger} encoding they replaced ({@link #bigIntegerBytes}, {@link #bigIntegerValues}).
 *
 * <pre>
 * GroupMomentsCheck --check ROWS SEED   rows of 7 features with wide exponents, rows at the fast path's
 *                                       bounds, then normal rows (mostly fast): every sum identical, and each
 *                                       frame's bytes and read-back sums those of BigInteger; then random integers
 *                                       through the sums' encoding and back as BigInteger's; or exit 1
 * GroupMomentsCheck --bench ROWS        CPU ns per row at d = 25 (normal values, 5 decimals), plain vs fast path
 * </pre>
 */
public final class GroupMomentsCheck {
    private static final ThreadMXBean CPU = ManagementFactory.getThreadMXBean();

    private GroupMomentsCheck() {
    }

    public static void main(String[] args) {
        if (args.length == 3 && args[0].equals("--check")) {
            check(Integer.parseInt(args[1]), Long.parseLong(args[2]));
        } else if (args.length == 2 && args[0].equals("--bench")) {
            bench(Integer.parseInt(args[1]));
        } else {
            System.err.println("usage: GroupMomentsCheck --check ROWS SEED | --bench ROWS");
            System.exit(2);
        }
    }

    /** One value of a row: zeros, tiny, huge, mixed signs, ties of the 31-bit rounding, runs of one magnitude. */
    static double wide(Random random, int row) {
        int kind = random.nextInt(10);
        double sign = random.nextBoolean() ? 1.0 : -1.0;
        switch (kind) {
            case 0:
                return random.nextInt(4) == 0 ? -0.0 : 0.0;
            case 1:  // anywhere in range, 2^-140 .. 2^127 (below 2^-128 counts as zero)
                return sign * Math.scalb(1.0 + random.nextDouble(), random.nextInt(268) - 140);
            case 2:  // a tie of the rounding to 31 bits: significand bit 22 set, bits below clear
                long significand = (1L << 52) | ((random.nextLong() & 0x7FFF_FFFFL) << 22) | (1L << 21);
                return sign * Math.scalb((double) significand, -52 + random.nextInt(40) - 20);
            case 3:  // near the edges of the range
                return sign * Math.scalb(1.0 + random.nextDouble(), random.nextBoolean() ? 126 : -128);
            default:  // runs: magnitudes that grow with the row (anchors moving up), then drop back
                return sign * (1.0 + random.nextDouble()) * Math.scalb(1.0, (row / 997) % 90 - 45);
        }
    }

    /**
     * One value of a row whose fast-path partial products are as large as they get: |high| = 2^24 - 1 and
     * low = 63 * 2^17 (odd products), one sign per feature, so each double accumulator of a full batch
     * (BATCH / LANES = 32 rows) is within 2^30 of 2^53 and one row more would round. The first row of every 8,192 (each flush of the default
     * moments) sets the anchors 4 positions lower, putting the others at the top of their windows.
     */
    static double atBounds(int feature, int row) {
        double sign = feature % 3 == 0 ? -1.0 : 1.0;
        if (row % 8192 == 0) {
            return sign;  // q = 2^30 at 2^-30: the anchor 2^-43
        }
        return sign * Math.scalb((double) ((1L << 31) - 65), -26);  // q = 2^31 - 65 at 2^-26: 17 above it
    }

    /** A source of check rows: the value of feature {@code k} in row {@code row}. */
    interface Values {
        double value(Random random, int row, int k);
    }

    private static void check(int rows, long seed) {
        compare(rows, new Random(seed), (random, row, k) -> wide(random, row), "");
        compare(rows, new Random(seed), (random, row, k) -> atBounds(k, row), " at the fast path's bounds");
        compare(rows, new Random(seed), (random, row, k) -> normal(random), " of normal values");
        integers(20_000, new Random(seed));
        System.out.println("batch sums by " + (GroupMoments.FUSED ? "fused multiply-adds" : "multiplies and adds"));
    }

    /**
     * Random integers (every sign, 0 .. 740 bits, 0 .. 300 trailing zeros; and -1, 0, +-2^k) through
     * {@link GroupMoments#writeInteger} and {@link GroupMoments#readInteger}: the bytes BigInteger's encoding
     * writes, the value it reads, and the same refusal of a sum over MAX_BITS bits; or exit 1.
     */
    private static void integers(int count, Random random) {
        int refused = 0;
        for (int c = 0; c < count; c++) {
            int bits = c < 1500 ? c % 740 : random.nextInt(740);
            BigInteger v = new BigInteger(bits, random);
            if (c % 7 == 3) {
                v = BigInteger.ONE.shiftLeft(bits);
            }
            if (random.nextBoolean()) {
                v = v.negate();
            }
            v = v.shiftLeft(random.nextInt(4) == 0 ? random.nextInt(300) : 0);
            boolean fits = v.bitLength() <= 32 * (GroupMoments.LIMBS - 1) + 62;
            if (fits) {
                byte[] little = littleEndian(v, 4 * (GroupMoments.LIMBS - 1) + 8);
                FrameWriter mine = new FrameWriter(GroupMoments.KIND, 64);
                GroupMoments.writeInteger(mine, little);
                if (!java.util.Arrays.equals(mine.toBytes(), bigIntegerInteger(v))) {
                    System.out.println("DIFFERENT: the bytes of " + v);
                    System.exit(1);
                }
            }
            if (v.signum() == 0) {
                continue;
            }
            int zeros = v.getLowestSetBit();
            byte[] big = v.shiftRight(zeros).toByteArray();
            byte[] little = new byte[big.length];
            for (int i = 0; i < big.length; i++) {
                little[i] = big[big.length - 1 - i];
            }
            byte[] read = new byte[4 * (GroupMoments.LIMBS - 1) + 8];
            try {
                GroupMoments.readInteger(little, zeros, read);
            } catch (IllegalArgumentException e) {
                if (fits) {
                    System.out.println("DIFFERENT: " + v + " refused: " + e.getMessage());
                    System.exit(1);
                }
                refused++;
                continue;
            }
            if (!fits || !java.util.Arrays.equals(read, littleEndian(v, read.length))) {
                System.out.println("DIFFERENT: " + v + " read back wrong or not refused");
                System.exit(1);
            }
        }
        System.out.println("identical integers: " + count + " written and read as BigInteger's (" + refused
                + " over the limbs' bits refused)");
    }

    /** {@code v} as {@code size} little-endian two's complement bytes. */
    static byte[] littleEndian(BigInteger v, int size) {
        byte[] out = new byte[size];
        for (int i = 0; i < size; i++) {
            out[i] = v.shiftRight(8 * i).byteValue();
        }
        return out;
    }

    /** One sum as GroupMoments wrote it before (BigInteger), the frame's header and all. */
    static byte[] bigIntegerInteger(BigInteger v) {
        FrameWriter out = new FrameWriter(GroupMoments.KIND, 64);
        if (v.signum() == 0) {
            out.u32(0).blob(new byte[0]);
            return out.toBytes();
        }
        int zeros = v.getLowestSetBit();
        byte[] big = v.shiftRight(zeros).toByteArray();
        byte[] little = new byte[big.length];
        for (int i = 0; i < big.length; i++) {
            little[i] = big[big.length - 1 - i];
        }
        out.u32(zeros).blob(little);
        return out.toBytes();
    }

    /** The kind 23 frame as GroupMoments wrote it before, from its sums as BigInteger ({@code m} flushed). */
    static byte[] bigIntegerBytes(GroupMoments m) {
        FrameWriter out = new FrameWriter(GroupMoments.KIND, 64 + 16 * m.limbs.length / GroupMoments.LIMBS);
        out.u32(m.names.length);
        for (String name : m.names) {
            out.text(name);
        }
        out.i64(m.n).i64(m.incomplete).u32(m.terms());
        for (int t = 0; t < m.terms(); t++) {
            BigInteger v = m.value(t);
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

    /** A kind 23 frame's sums as GroupMoments read them before (BigInteger). */
    static BigInteger[] bigIntegerValues(byte[] data) {
        FrameReader in = new FrameReader(data, GroupMoments.KIND);
        long d = in.u32();
        for (int i = 0; i < d; i++) {
            in.text();
        }
        in.i64();
        in.i64();
        BigInteger[] values = new BigInteger[(int) in.u32()];
        for (int t = 0; t < values.length; t++) {
            long zeros = in.u32();
            byte[] little = in.blob();
            values[t] = BigInteger.ZERO;
            if (little.length == 0) {
                continue;
            }
            byte[] big = new byte[little.length];
            for (int i = 0; i < big.length; i++) {
                big[i] = little[little.length - 1 - i];
            }
            values[t] = new BigInteger(big).shiftLeft((int) zeros);
        }
        in.done();
        return values;
    }

    /** One value of a row as the bench's: normal, 5 decimals (the fast path's usual rows; a few fall below the window). */
    static double normal(Random random) {
        return Math.round(random.nextGaussian() * 1e5) / 1e5;
    }

    /** {@code rows} rows of {@code values} through the plain limbs and the fast path 4 ways: every sum identical. */
    private static void compare(int rows, Random random, Values values, String label) {
        String[] names = {"a", "b", "c", "d", "e", "f", "g"};
        int d = names.length;
        PlainMoments plain = new PlainMoments(names);
        GroupMoments[] fast = {new GroupMoments(names), new GroupMoments(names, 1000, 5000),
                               new GroupMoments(names, 1, 7)};
        // and the same rows in 3 partials round robin, each through its bytes, merged
        GroupMoments[] parts = {new GroupMoments(names, 333, 100_000), new GroupMoments(names),
                                new GroupMoments(names)};
        double[] row = new double[d];
        for (int r = 0; r < rows; r++) {
            for (int k = 0; k < d; k++) {
                row[k] = values.value(random, r, k);
            }
            plain.add(row);
            for (GroupMoments m : fast) {
                m.add(row);
            }
            parts[r % 3].add(row);
        }
        GroupMoments merged = new GroupMoments(names);
        for (GroupMoments part : parts) {
            merged.merge(GroupMoments.fromBytes(part.toBytes()));
        }
        int terms = d + d * (d + 1) / 2;
        byte[] expected = null;
        for (GroupMoments m : new GroupMoments[] {fast[0], fast[1], fast[2], merged}) {
            byte[] bytes = m.toBytes();
            for (int t = 0; t < terms; t++) {
                if (!m.value(t).equals(plain.value(t))) {
                    System.out.println("DIFFERENT: term " + t + ": " + m.value(t) + " != " + plain.value(t));
                    System.exit(1);
                }
            }
            if (m.n != plain.n || expected != null && !java.util.Arrays.equals(bytes, expected)) {
                System.out.println("DIFFERENT: bytes or count");
                System.exit(1);
            }
            GroupMoments read = GroupMoments.fromBytes(bytes);
            BigInteger[] readBefore = bigIntegerValues(bytes);
            for (int t = 0; t < terms; t++) {
                if (!read.value(t).equals(readBefore[t])) {
                    System.out.println("DIFFERENT: term " + t + " read back: " + read.value(t) + " != " + readBefore[t]);
                    System.exit(1);
                }
            }
            if (!java.util.Arrays.equals(bytes, bigIntegerBytes(m)) || !java.util.Arrays.equals(read.toBytes(), bytes)) {
                System.out.println("DIFFERENT: the frame's bytes are not BigInteger's, or not its own read back");
                System.exit(1);
            }
            expected = bytes;
        }
        System.out.println("identical" + label + ": " + rows + " rows, " + terms + " sums, 4 ways ("
                + expected.length + " bytes)");
    }

    /** CPU ns per row, plain vs fast path alternating, the same 4,096 rows over and over; round 0 warms up. */
    private static void bench(int rows) {
        int d = 25;
        String[] names = new String[d];
        Random random = new Random(46);
        double[][] data = new double[4096][d];
        for (int k = 0; k < d; k++) {
            names[k] = "x" + k;
        }
        for (double[] r : data) {
            for (int k = 0; k < d; k++) {
                r[k] = Math.round(random.nextGaussian() * 1e5) / 1e5;
            }
            r[1] = Math.round((0.8 * r[0] + 0.6 * r[1]) * 1e5) / 1e5;
        }
        for (int round = 0; round < 6; round++) {
            PlainMoments plain = new PlainMoments(names);
            long t0 = CPU.getCurrentThreadCpuTime();
            for (int r = 0; r < rows; r++) {
                plain.add(data[r & 4095]);
            }
            long t1 = CPU.getCurrentThreadCpuTime();
            GroupMoments fast = new GroupMoments(names);
            for (int r = 0; r < rows; r++) {
                fast.add(data[r & 4095]);
            }
            long t2 = CPU.getCurrentThreadCpuTime();
            byte[] bytes = fast.toBytes();
            boolean same = true;
            for (int t = 0; t < fast.terms(); t++) {
                same &= fast.value(t).equals(plain.value(t));
            }
            System.out.printf("round %d: d = %d, %d rows: plain %.1f ns/row CPU, fast path %.1f ns/row CPU,"
                    + " ratio %.2f; sums %s (%d bytes)%n",
                    round, d, rows, (t1 - t0) / (double) rows, (t2 - t1) / (double) rows,
                    (t1 - t0) / (double) (t2 - t1), same ? "identical" : "DIFFERENT", bytes.length);
            if (!same) {
                System.exit(1);
            }
        }
    }

    /** GroupMoments' accumulation before its fast path (as it was), the reference of the checks. */
    static final class PlainMoments {
        private static final long MASK = 0xFFFFFFFFL;
        final String[] names;
        long n;
        final long[] limbs;
        private long pending;
        private final long[] q;
        private final int[] p;

        PlainMoments(String[] names) {
            this.names = names;
            int d = names.length;
            this.limbs = new long[(d + d * (d + 1) / 2) * GroupMoments.LIMBS];
            this.q = new long[d];
            this.p = new int[d];
        }

        void add(double[] row) {
            int d = names.length;
            for (int k = 0; k < d; k++) {
                double x = row[k];
                if (Math.abs(x) < GroupMoments.TINY) {
                    q[k] = 0;
                    p[k] = 0;
                } else {
                    int e = Math.getExponent(x);
                    q[k] = (long) Math.rint(Math.scalb(x, 30 - e));
                    p[k] = e - 30;
                }
            }
            for (int k = 0; k < d; k++) {
                addTerm(k, q[k], p[k] + GroupMoments.SCALE);
            }
            int t = d;
            for (int i = 0; i < d; i++) {
                long qi = q[i];
                int pi = p[i] + GroupMoments.SCALE;
                for (int j = i; j < d; j++, t++) {
                    long v = qi * q[j];
                    if (v != 0) {
                        addTerm(t, v, pi + p[j]);
                    }
                }
            }
            n++;
            if (++pending >= 1L << 30) {
                throw new IllegalStateException("the reference does not normalise");
            }
        }

        private void addTerm(int t, long v, int position) {
            if (v == 0) {
                return;
            }
            int base = t * GroupMoments.LIMBS + (position >>> 5);
            int r = position & 31;
            long carry = v >> (32 - r);
            limbs[base] += (v << r) & MASK;
            limbs[base + 1] += carry & MASK;
            limbs[base + 2] += carry >> 32;
        }

        BigInteger value(int t) {
            BigInteger total = BigInteger.ZERO;
            for (int k = GroupMoments.LIMBS - 1; k >= 0; k--) {
                total = total.shiftLeft(32).add(BigInteger.valueOf(limbs[t * GroupMoments.LIMBS + k]));
            }
            return total;
        }
    }
}
