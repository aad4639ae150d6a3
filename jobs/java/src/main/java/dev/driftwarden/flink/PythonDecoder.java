package dev.driftwarden.flink;

import java.io.IOException;
import java.nio.ByteBuffer;

import org.apache.avro.io.Decoder;
import org.apache.avro.util.Utf8;

/**
 * A decoder that reads Avro binary as fastavro does where Avro's own reader differs, everything else as the
 * decoder it wraps: a boolean is any byte but 0 for true (Avro takes only 1); an int is the whole varint, 64 bits
 * (Avro keeps 32: {@link #lastInt} holds the full value for {@link ConfluentAvro.PythonInts}); an enum symbol's or
 * a union branch's index past 32 bits is out of range (Avro would wrap it). Java and Python must read every
 * record alike ({@link ConfluentAvro}).
 */
final class PythonDecoder extends Decoder {
    private final Decoder in;
    private final byte[] one = new byte[1];
    /** The last int read, whole. */
    long lastInt;

    PythonDecoder(Decoder in) {
        this.in = in;
    }

    @Override public boolean readBoolean() throws IOException {
        in.readFixed(one, 0, 1);
        return one[0] != 0;
    }

    @Override public int readInt() throws IOException {
        lastInt = in.readLong();
        return (int) lastInt;
    }

    @Override public int readEnum() throws IOException {
        return index();
    }

    @Override public int readIndex() throws IOException {
        return index();
    }

    private int index() throws IOException {
        long index = in.readLong();
        if (index != (int) index) {
            throw new IOException("index out of range: " + index);
        }
        return (int) index;
    }

    @Override public void readNull() throws IOException { in.readNull(); }
    @Override public long readLong() throws IOException { return in.readLong(); }
    @Override public float readFloat() throws IOException { return in.readFloat(); }
    @Override public double readDouble() throws IOException { return in.readDouble(); }
    @Override public Utf8 readString(Utf8 old) throws IOException { return in.readString(old); }
    @Override public String readString() throws IOException { return in.readString(); }
    @Override public void skipString() throws IOException { in.skipString(); }
    @Override public ByteBuffer readBytes(ByteBuffer old) throws IOException { return in.readBytes(old); }
    @Override public void skipBytes() throws IOException { in.skipBytes(); }
    @Override public void readFixed(byte[] bytes, int start, int length) throws IOException { in.readFixed(bytes, start, length); }
    @Override public void skipFixed(int length) throws IOException { in.skipFixed(length); }
    @Override public long readArrayStart() throws IOException { return in.readArrayStart(); }
    @Override public long arrayNext() throws IOException { return in.arrayNext(); }
    @Override public long skipArray() throws IOException { return in.skipArray(); }
    @Override public long readMapStart() throws IOException { return in.readMapStart(); }
    @Override public long mapNext() throws IOException { return in.mapNext(); }
    @Override public long skipMap() throws IOException { return in.skipMap(); }
}
