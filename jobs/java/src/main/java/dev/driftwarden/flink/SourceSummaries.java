package dev.driftwarden.flink;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.metrics.Counter;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;
import org.apache.flink.util.OutputTag;

/**
 * The drift job's per-event work, in the Kafka source's task (chained to it: no exchange, no row
 * per event): each record's envelope ({@link Envelope}), the event-time rules ({@link EventTimeRules}: a bad
 * clock, its Kafka partition's lateness mark, late; the marks kept per partition in operator state), its features
 * ({@link FeatureColumns.Spec#values}) and, for a record Java vouches for, the update of its
 * (model, segment, window)'s partial summary ({@link Summaries#accumulate}, the rule the SQL
 * aggregate uses). When the watermark passes a window's end, its partials leave as rows
 * {@code (model, segment, window_start, window_end, part)} timed at the window's last millisecond,
 * to be merged with the other subtasks' (and the Python path's) per window. Everything else leaves
 * on {@link #TO_PYTHON} as {@code (value, topic, partition, offset, event_ms, model, turned_away)}
 * timed at its event time: turned away (no readable event time or model, a future clock, late),
 * or not vouched for: Python's one validator decides (jobs/udfs.py ValidateRecord).
 *
 * <p>State: each partition's mark (union list state: after a restore or rescale every subtask has
 * them all and keeps the largest) and the open partials (list state, split over the subtasks on a
 * rescale; a partial may be emitted by any subtask, as partials merge). Both are taken with the
 * source's offsets in one snapshot, so a restart neither loses nor counts twice an event.
 */
public final class SourceSummaries extends AbstractStreamOperator<Row> implements OneInputStreamOperator<KafkaRecord, Row> {
    private static final long serialVersionUID = 1L;

    /** Column names of the partial summaries (the main output). */
    static final String[] PARTIAL_FIELDS = {"model", "segment", "window_start", "window_end", "part"};
    static final TypeInformation<Row> PARTIAL_TYPE = Types.ROW_NAMED(PARTIAL_FIELDS, Types.STRING, Types.INT, Types.LONG,
            Types.LONG, Types.PRIMITIVE_ARRAY(Types.BYTE));
    /** Column names of the records for Python (the side output). */
    static final String[] PYTHON_FIELDS = {"value", "topic", "partition", "offset", "event_ms", "model", "turned_away"};
    static final TypeInformation<Row> PYTHON_TYPE = Types.ROW_NAMED(PYTHON_FIELDS, Types.PRIMITIVE_ARRAY(Types.BYTE),
            Types.STRING, Types.INT, Types.LONG, Types.LONG, Types.STRING, Types.STRING);
    /** The records Python validates or keeps in the dead letters. */
    static final OutputTag<Row> TO_PYTHON = new OutputTag<>("to-python", PYTHON_TYPE);

    private final String settingsJson;
    private transient SourceSettings settings;
    private transient FeatureColumns.Spec columns;
    private transient SummarySpec spec;
    private transient EventSegment segments;
    private transient EventTimeRules rules;
    private transient String lastModel;  // the (model, window start) the last summarized event was in
    private transient long lastStart;
    private transient WindowSummary[] lastPartials;  // that window's open partials, by segment + 1 (null: not yet looked up)
    private transient Map<WindowKey, WindowSummary> open;
    private transient ListState<Tuple3<String, Integer, Long>> marksState;
    private transient ListState<byte[]> openState;
    private transient Hashing.TopicCrc topicCrc;
    private transient Counter summarized;
    private transient Counter toPython;

    /** A partial summary's key: (model, segment index or -1, window start). */
    record WindowKey(String model, int segment, long start) {}

    SourceSummaries(String settingsJson) {
        this.settingsJson = settingsJson;
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        settings = SourceSettings.parse(settingsJson);
        columns = FeatureColumns.Spec.parse(settings.columns);
        spec = SummarySpec.parse(settings.aggregate);
        segments = settings.segments == null ? null : new EventSegment(settings.segments);
        rules = EventTimeRules.of(settings, spec.windowMs);
        open = new HashMap<>();
        topicCrc = new Hashing.TopicCrc();
        marksState = context.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("partition-marks",
                Types.TUPLE(Types.STRING, Types.INT, Types.LONG)));
        openState = context.getOperatorStateStore().getListState(new ListStateDescriptor<>("open-partials",
                PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO));
        for (Tuple3<String, Integer, Long> mark : marksState.get()) {
            rules.restoreMark(mark.f0, mark.f1, mark.f2);
        }
        for (byte[] stored : openState.get()) {
            int segment = ByteBuffer.wrap(stored, 0, 4).getInt();
            WindowSummary partial = WindowSummary.fromBytes(Arrays.copyOfRange(stored, 4, stored.length));
            WindowKey key = new WindowKey(partial.model(), segment, partial.start());
            WindowSummary before = open.putIfAbsent(key, partial);
            if (before != null) {
                before.mergeOwned(partial);
            }
        }
    }

    @Override
    public void open() throws Exception {
        super.open();
        summarized = getMetricGroup().counter("eventsSummarized");
        toPython = getMetricGroup().counter("recordsToPython");
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        List<Tuple3<String, Integer, Long>> markList = new ArrayList<>();
        rules.forEachMark((key, mark) -> markList.add(Tuple3.of(key.topic(), key.partition(), mark)));
        marksState.update(markList);
        List<byte[]> partials = new ArrayList<>(open.size());
        open.forEach((key, partial) -> {
            byte[] bytes = partial.toBytes();
            partials.add(ByteBuffer.allocate(4 + bytes.length).putInt(key.segment()).put(bytes).array());
        });
        openState.update(partials);
    }

    @Override
    public void processElement(StreamRecord<KafkaRecord> element) {
        KafkaRecord record = element.getValue();
        String turnedAway = rules.turnedAway(record);
        Envelope envelope = record.envelope();
        Long eventMs = envelope.eventMillis();
        if (turnedAway == null) {
            Object[] values = columns.values(envelope);
            if (values != null) {
                summarize(record, envelope.model, eventMs, rules.windowStart(eventMs), values, envelope.unknownFeatures);
                return;
            }
        }
        toPython.inc();
        output.collect(TO_PYTHON, new StreamRecord<>(Row.of(record.value, record.topic, record.partition, record.offset,
                eventMs == null ? 0 : eventMs, envelope.model, turnedAway),
                EventTimeRules.eventTime(envelope, record.timestamp, settings.maxFutureSkewMs)));
    }

    /** Adds a vouched record to its (model, segment, window starting at {@code start})'s partial summary. */
    private void summarize(KafkaRecord record, String model, long eventMs, long start, Object[] values, int unknown) {
        int segment = segments == null ? -1 : segments.segmentOf(model, values, settings.segmentColumns);
        Summaries.accumulate(partial(model, segment, start), spec, model, eventMs, topicCrc.of(record.topic),
                record.partition, record.offset, unknown, values);
        summarized.inc();
    }

    /**
     * The open partial of (model, segment, window start), made when new. The partials of the last event's (model,
     * window) are at hand by segment, so consecutive events of one window need no key and no lookup.
     */
    private WindowSummary partial(String model, int segment, long start) {
        if (lastPartials == null || lastStart != start || !lastModel.equals(model)) {
            lastModel = model;
            lastStart = start;
            lastPartials = new WindowSummary[Math.max(segment + 2, 2)];
        } else if (segment + 1 >= lastPartials.length) {
            lastPartials = Arrays.copyOf(lastPartials, segment + 2);
        }
        WindowSummary partial = lastPartials[segment + 1];
        if (partial == null) {
            partial = lastPartials[segment + 1] = open.computeIfAbsent(new WindowKey(model, segment, start),
                    k -> new WindowSummary());
        }
        return partial;
    }

    /** Emits the partials of the windows the watermark has passed (in window, model, segment order), then the watermark. */
    @Override
    public void processWatermark(Watermark mark) throws Exception {
        rules.advanceWatermark(mark.getTimestamp());
        List<WindowKey> closed = new ArrayList<>();
        for (WindowKey key : open.keySet()) {
            if (key.start() + spec.windowMs - 1 <= rules.watermark()) {
                closed.add(key);
            }
        }
        closed.sort(Comparator.comparingLong(WindowKey::start).thenComparing(WindowKey::model)
                .thenComparingInt(WindowKey::segment));
        if (!closed.isEmpty()) {
            lastModel = null;
            lastPartials = null;
        }
        for (WindowKey key : closed) {
            long end = key.start() + spec.windowMs;
            output.collect(new StreamRecord<>(Row.of(key.model(), key.segment(), key.start(), end,
                    open.remove(key).toBytes()), end - 1));
        }
        super.processWatermark(mark);
    }
}
