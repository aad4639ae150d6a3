package dev.driftwarden.flink;

import java.io.IOException;
import java.util.Map;
import java.util.TreeMap;

import org.apache.flink.api.common.typeutils.SimpleTypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.base.TypeSerializerSingleton;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;

/**
 * Flink state encoding of {@link SegmentPartials}: a version byte, the number of segments, then
 * per segment its index and its partial summary's bytes behind an int length (segments in
 * ascending index order). No Kryo, no Java serialization. Stateless: one instance (Flink's
 * {@link TypeSerializerSingleton} answers {@code duplicate}, {@code equals} and {@code hashCode}).
 */
public final class SegmentPartialsSerializer extends TypeSerializerSingleton<SegmentPartials> {
    private static final long serialVersionUID = 1L;
    public static final SegmentPartialsSerializer INSTANCE = new SegmentPartialsSerializer();
    private static final int STATE_VERSION = 1;

    @Override
    public boolean isImmutableType() {
        return false;
    }

    @Override
    public SegmentPartials createInstance() {
        return new SegmentPartials();
    }

    @Override
    public SegmentPartials copy(SegmentPartials from) {
        return from.copy();
    }

    @Override
    public SegmentPartials copy(SegmentPartials from, SegmentPartials reuse) {
        return from.copy();
    }

    @Override
    public int getLength() {
        return -1;
    }

    @Override
    public void serialize(SegmentPartials record, DataOutputView target) throws IOException {
        target.writeByte(STATE_VERSION);
        target.writeInt(record.parts.size());
        for (Map.Entry<Integer, byte[]> part : new TreeMap<>(record.parts).entrySet()) {
            target.writeInt(part.getKey());
            target.writeInt(part.getValue().length);
            target.write(part.getValue());
        }
    }

    @Override
    public SegmentPartials deserialize(DataInputView source) throws IOException {
        int version = source.readUnsignedByte();
        if (version != STATE_VERSION) {
            throw new IOException("segment partials state version " + version + ", this build reads " + STATE_VERSION);
        }
        SegmentPartials partials = new SegmentPartials();
        int count = source.readInt();
        for (int i = 0; i < count; i++) {
            int segment = source.readInt();
            byte[] bytes = new byte[source.readInt()];
            source.readFully(bytes);
            if (partials.parts.put(segment, bytes) != null) {
                throw new IOException("corrupt segment partials state: segment " + segment + " twice");
            }
        }
        return partials;
    }

    @Override
    public SegmentPartials deserialize(SegmentPartials reuse, DataInputView source) throws IOException {
        return deserialize(source);
    }

    @Override
    public void copy(DataInputView source, DataOutputView target) throws IOException {
        serialize(deserialize(source), target);
    }

    @Override
    public TypeSerializerSnapshot<SegmentPartials> snapshotConfiguration() {
        return new Snapshot();
    }

    /** The serializer has no configuration: its snapshot only restores the singleton. */
    public static final class Snapshot extends SimpleTypeSerializerSnapshot<SegmentPartials> {
        public Snapshot() {
            super(() -> INSTANCE);
        }
    }
}
