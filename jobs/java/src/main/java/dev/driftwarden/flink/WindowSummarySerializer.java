package dev.driftwarden.flink;

import java.io.IOException;

import org.apache.flink.api.common.typeutils.SimpleTypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.base.TypeSerializerSingleton;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;

/**
 * Flink state/network encoding of {@link WindowSummaryAgg}'s accumulator: a version byte, a
 * presence byte, then (when not empty) the window summary's own kind 17 bytes behind an int
 * length. Compact and versioned; no Kryo, no Java serialization. Stateless: one instance (Flink's
 * {@link TypeSerializerSingleton} answers {@code duplicate}, {@code equals} and {@code hashCode}).
 */
public final class WindowSummarySerializer extends TypeSerializerSingleton<WindowSummary> {
    private static final long serialVersionUID = 1L;
    public static final WindowSummarySerializer INSTANCE = new WindowSummarySerializer();
    private static final int STATE_VERSION = 1;

    @Override
    public boolean isImmutableType() {
        return false;
    }

    @Override
    public WindowSummary createInstance() {
        return new WindowSummary();
    }

    @Override
    public WindowSummary copy(WindowSummary from) {
        return from.copy();
    }

    @Override
    public WindowSummary copy(WindowSummary from, WindowSummary reuse) {
        return from.copy();
    }

    @Override
    public int getLength() {
        return -1;
    }

    @Override
    public void serialize(WindowSummary record, DataOutputView target) throws IOException {
        target.writeByte(STATE_VERSION);
        if (record.isEmpty()) {
            target.writeByte(0);
            return;
        }
        byte[] bytes = record.toBytes();
        target.writeByte(1);
        target.writeInt(bytes.length);
        target.write(bytes);
    }

    @Override
    public WindowSummary deserialize(DataInputView source) throws IOException {
        int version = source.readUnsignedByte();
        if (version != STATE_VERSION) {
            throw new IOException("window summary state version " + version + ", this build reads " + STATE_VERSION);
        }
        if (source.readUnsignedByte() == 0) {
            return new WindowSummary();
        }
        byte[] bytes = new byte[source.readInt()];
        source.readFully(bytes);
        try {
            return WindowSummary.fromBytes(bytes);
        } catch (IllegalArgumentException e) {
            throw new IOException("corrupt window summary state: " + e.getMessage(), e);
        }
    }

    @Override
    public WindowSummary deserialize(WindowSummary reuse, DataInputView source) throws IOException {
        return deserialize(source);
    }

    @Override
    public void copy(DataInputView source, DataOutputView target) throws IOException {
        int version = source.readUnsignedByte();
        int present = source.readUnsignedByte();
        target.writeByte(version);
        target.writeByte(present);
        if (present != 0) {
            int length = source.readInt();
            target.writeInt(length);
            target.write(source, length);
        }
    }

    @Override
    public TypeSerializerSnapshot<WindowSummary> snapshotConfiguration() {
        return new Snapshot();
    }

    /** The serializer has no configuration: its snapshot only restores the singleton. */
    public static final class Snapshot extends SimpleTypeSerializerSnapshot<WindowSummary> {
        public Snapshot() {
            super(() -> INSTANCE);
        }
    }
}
