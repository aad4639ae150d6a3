package dev.driftwarden.flink;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/** Reads a DWSK frame back; every inconsistency raises {@link IllegalArgumentException} saying what was wrong. */
public final class FrameReader {
    private final ByteBuffer in;
    public final int kind;

    /** Checks magic, version and that the kind is one of {@code kinds} (the first is the one written now). */
    public FrameReader(byte[] data, int... kinds) {
        in = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
        need(6);
        for (byte b : FrameWriter.MAGIC) {
            if (in.get() != b) {
                throw new IllegalArgumentException("not a driftwarden sketch: bad magic");
            }
        }
        int version = in.get() & 0xFF;
        if (version != FrameWriter.VERSION) {
            throw new IllegalArgumentException("unknown sketch format version " + version);
        }
        int read = in.get() & 0xFF;
        kind = read;
        if (Arrays.stream(kinds).noneMatch(k -> k == read)) {
            throw new IllegalArgumentException("unexpected sketch kind byte " + kind + ", want one of "
                    + Arrays.toString(Arrays.stream(kinds).distinct().toArray()));
        }
    }

    /** The kind byte of a frame, without reading it. */
    public static int kindOf(byte[] data) {
        if (data.length < 6) {
            throw new IllegalArgumentException("truncated sketch bytes: " + data.length + " bytes");
        }
        return data[5] & 0xFF;
    }

    private void need(long size) {
        if (size > in.remaining()) {
            throw new IllegalArgumentException("truncated sketch bytes: need " + size + " more bytes, have " + in.remaining());
        }
    }

    public int u8() {
        need(1);
        return in.get() & 0xFF;
    }

    public long u32() {
        need(4);
        return in.getInt() & 0xFFFFFFFFL;
    }

    public long i64() {
        need(8);
        return in.getLong();
    }

    public double f64() {
        need(8);
        return in.getDouble();
    }

    public byte[] blob() {
        long size = u32();
        need(size);
        byte[] out = new byte[(int) size];
        in.get(out);
        return out;
    }

    /** A blob of i64 values, checked to hold exactly {@code count} of them when count >= 0. */
    public long[] longs(long count) {
        byte[] raw = blob();
        if (raw.length % 8 != 0 || (count >= 0 && raw.length != 8 * count)) {
            throw new IllegalArgumentException("corrupt i64 array: " + raw.length + " bytes for " + count + " values");
        }
        long[] out = new long[raw.length / 8];
        ByteBuffer.wrap(raw).order(ByteOrder.LITTLE_ENDIAN).asLongBuffer().get(out);
        return out;
    }

    /** {@code count} unsigned integers written by {@link FrameWriter#packed} (u8 width, then a blob at that width). */
    public long[] packed(long count) {
        int width = u8();
        if (width != 1 && width != 2 && width != 4 && width != 8) {
            throw new IllegalArgumentException("corrupt packed integers: width " + width + ", want 1, 2, 4 or 8");
        }
        byte[] raw = blob();
        if (raw.length != width * count) {
            throw new IllegalArgumentException("corrupt packed integers: " + raw.length + " bytes for " + count
                    + " of width " + width);
        }
        long[] out = new long[(int) count];
        for (int i = 0, p = 0; i < out.length; i++) {
            long v = 0;
            for (int b = 0; b < width; b++, p++) {
                v |= (raw[p] & 0xFFL) << (8 * b);
            }
            out[i] = v;
        }
        return out;
    }

    /** {@code count} unsigned integers written by {@link FrameWriter#varints} (a blob of LEB128 varints). */
    public long[] varints(long count) {
        byte[] raw = blob();
        if (count > raw.length) {
            throw new IllegalArgumentException("corrupt varints: " + raw.length + " bytes for " + count + " values");
        }
        long[] out = new long[(int) count];
        int p = 0;
        for (int i = 0; i < out.length; i++) {
            long v = 0;
            for (int shift = 0; ; shift += 7) {
                if (p == raw.length || shift > 63 || (shift == 63 && (raw[p] & 0xFF) > 1)) {
                    throw new IllegalArgumentException("corrupt varints: value " + i + " of " + count
                            + (p == raw.length ? " truncated" : " over 64 bits"));
                }
                byte b = raw[p++];
                v |= (b & 0x7FL) << shift;
                if (b >= 0) {
                    break;
                }
            }
            out[i] = v;
        }
        if (p != raw.length) {
            throw new IllegalArgumentException("corrupt varints: " + (raw.length - p) + " bytes after " + count + " values");
        }
        return out;
    }

    public String text() {
        return decode(blob());
    }

    private static String decode(byte[] bytes) {
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(bytes)).toString();
        } catch (CharacterCodingException e) {
            throw new IllegalArgumentException("corrupt text field: " + e.getMessage(), e);
        }
    }

    /** Strings written by {@link FrameWriter#texts}. */
    public String[] texts() {
        long count = i64();
        byte[] lengths = blob();
        byte[] data = blob();
        if (count < 0 || lengths.length != 4 * count) {
            throw new IllegalArgumentException("corrupt text list: " + lengths.length + " length bytes for " + count + " strings");
        }
        ByteBuffer lens = ByteBuffer.wrap(lengths).order(ByteOrder.LITTLE_ENDIAN);
        String[] out = new String[(int) count];
        int pos = 0;
        for (int i = 0; i < count; i++) {
            long size = lens.getInt() & 0xFFFFFFFFL;
            if (pos + size > data.length) {
                throw new IllegalArgumentException("corrupt text list: lengths exceed the " + data.length + " data bytes");
            }
            byte[] one = new byte[(int) size];
            System.arraycopy(data, pos, one, 0, one.length);
            out[i] = decode(one);
            pos += one.length;
        }
        if (pos != data.length) {
            throw new IllegalArgumentException("corrupt text list: lengths add up to " + pos + ", data has " + data.length + " bytes");
        }
        return out;
    }

    /** Whether every byte has been read (an optional trailing section is absent). */
    public boolean atEnd() {
        return in.remaining() == 0;
    }

    /** Checks that every byte was read. */
    public void done() {
        if (in.remaining() != 0) {
            throw new IllegalArgumentException(in.remaining() + " unexpected trailing bytes after sketch");
        }
    }
}
