package dev.driftwarden.flink;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/** Writes a DWSK frame (sketches/serialization.py {@code Writer}): little-endian fields and u32-length blobs. */
public final class FrameWriter {
    public static final byte[] MAGIC = {'D', 'W', 'S', 'K'};
    public static final int VERSION = 1;

    private byte[] buf;
    private int len;

    /** A frame of {@code kind}: magic, version, kind. */
    public FrameWriter(int kind, int sizeHint) {
        buf = new byte[Math.max(16, sizeHint)];
        bytes(MAGIC);
        u8(VERSION);
        u8(kind);
    }

    private void ensure(int extra) {
        if (len + extra > buf.length) {
            buf = Arrays.copyOf(buf, Math.max(buf.length * 2, len + extra));
        }
    }

    public FrameWriter u8(int v) {
        ensure(1);
        buf[len++] = (byte) v;
        return this;
    }

    public FrameWriter u32(long v) {
        ensure(4);
        for (int i = 0; i < 4; i++) {
            buf[len++] = (byte) (v >>> (8 * i));
        }
        return this;
    }

    /** A u64 or an i64: the same 8 bytes. */
    public FrameWriter i64(long v) {
        ensure(8);
        for (int i = 0; i < 8; i++) {
            buf[len++] = (byte) (v >>> (8 * i));
        }
        return this;
    }

    /** A binary64 with its raw bits (NaN payloads kept). */
    public FrameWriter f64(double v) {
        return i64(Double.doubleToRawLongBits(v));
    }

    private FrameWriter bytes(byte[] data) {
        ensure(data.length);
        System.arraycopy(data, 0, buf, len, data.length);
        len += data.length;
        return this;
    }

    /** u32 length, then the bytes. */
    public FrameWriter blob(byte[] data) {
        return u32(data.length).bytes(data);
    }

    /** A blob of i64 values. */
    public FrameWriter longs(long[] values, int count) {
        u32(8L * count);
        for (int i = 0; i < count; i++) {
            i64(values[i]);
        }
        return this;
    }

    /**
     * {@code count} unsigned 64-bit integers at the narrowest of 1, 2, 4 or 8 bytes that holds the
     * largest: u8 width, then a blob of the values at that width (sketches/serialization.py {@code Writer.packed}).
     */
    public FrameWriter packed(long[] values, int count) {
        long all = 0;
        for (int i = 0; i < count; i++) {
            all |= values[i];
        }
        int width = (all & 0xFFFFFFFF00000000L) != 0 ? 8 : (all & 0xFFFF0000L) != 0 ? 4 : (all & 0xFF00L) != 0 ? 2 : 1;
        u8(width).u32((long) width * count);
        ensure(width * count);
        for (int i = 0; i < count; i++) {
            long v = values[i];
            for (int b = 0; b < width; b++) {
                buf[len++] = (byte) (v >>> (8 * b));
            }
        }
        return this;
    }

    /**
     * {@code count} unsigned 64-bit integers as a blob of unsigned LEB128 varints: 7 bits a byte, low bits first,
     * the high bit set on every byte but a value's last, each value in its fewest bytes
     * (sketches/serialization.py {@code Writer.varints}).
     */
    public FrameWriter varints(long[] values, int count) {
        byte[] out = new byte[10 * count];
        int size = 0;
        for (int i = 0; i < count; i++) {
            long v = values[i];
            while ((v & ~0x7FL) != 0) {
                out[size++] = (byte) ((v & 0x7F) | 0x80);
                v >>>= 7;
            }
            out[size++] = (byte) v;
        }
        return blob(Arrays.copyOf(out, size));
    }

    /** A blob of UTF-8. */
    public FrameWriter text(String s) {
        return blob(s.getBytes(StandardCharsets.UTF_8));
    }

    /** Many UTF-8 strings (already encoded): u64 count, blob of u32 lengths, blob of the bytes. */
    public FrameWriter texts(byte[][] encoded, int count) {
        i64(count);
        u32(4L * count);
        long total = 0;
        for (int i = 0; i < count; i++) {
            u32(encoded[i].length);
            total += encoded[i].length;
        }
        u32(total);
        for (int i = 0; i < count; i++) {
            bytes(encoded[i]);
        }
        return this;
    }

    /** The frame's bytes. */
    public byte[] toBytes() {
        return Arrays.copyOf(buf, len);
    }
}
