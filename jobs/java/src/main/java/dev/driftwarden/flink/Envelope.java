package dev.driftwarden.flink;

import java.io.IOException;
import java.util.Arrays;
import java.util.regex.Pattern;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.StreamReadFeature;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.util.JsonRecyclerPools;

/**
 * The top-level fields the job needs in Java, read with one streaming pass over the raw bytes (no
 * tree, no JSON path): {@code event_time} as text with its JSON type, {@code model} and the {@code features}
 * object's scalars. Like the Python validation (orjson), a repeated key keeps its last value;
 * malformed JSON gives null fields.
 *
 * <p>{@link #plain} says whether the record has the stream's common, flat shape, for which the
 * Java reading of the features equals the Python validation's (see {@link FeatureColumns}): ASCII
 * bytes without a backslash escape, only the contract's top-level fields and each at most once,
 * {@code event_time} an integer or a strict RFC 3339 text, {@code prediction} absent, null or a
 * finite number (kept in {@link #prediction}), {@code request_id} absent, null or a string,
 * {@code features} an object.
 *
 * <p>The job asks for these fields several times per record (the watermark, the event time, the
 * model, the envelope check), each time with a fresh copy of the same bytes. The last record's
 * envelope is therefore kept per thread and reused when the bytes are equal: one parse per record
 * instead of five (the parse was 85% of the source task's time, measured with JFR).
 */
final class Envelope {
    // Jackson's fast double parser: the same correctly rounded doubles (tests/test_feature_columns.py compares
    // every random decimal with Python's float), without the String and the JDK's slow path per number
    // Its buffers come from a shared pool, not Jackson's default per-thread one: a Flink task thread holds many
    // thread locals, and that lookup was 8% of the source task's time (JFR, bench/fused_ceiling.py's source task)
    private static final JsonFactory JSON = JsonFactory.builder().enable(StreamReadFeature.USE_FAST_DOUBLE_PARSER)
            .recyclerPool(JsonRecyclerPools.newBoundedPool(64)).build();
    private static final Pattern STRICT_RFC3339 =
            Pattern.compile("\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?(Z|[+-]\\d{2}:\\d{2})");
    private static final int EVENT_TIME = 1;
    private static final int MODEL = 2;
    private static final int FEATURES = 4;
    private static final int PREDICTION = 8;
    private static final int REQUEST_ID = 16;
    // per thread, never shared: FeatureColumns caches its row on the envelope
    private static final ThreadLocal<Envelope> LAST = ThreadLocal.withInitial(() -> broken(new byte[0]));

    private final byte[] source;  // a private copy of the bytes read, to recognise the same record
    final String eventTime;
    final JsonToken eventTimeToken;  // what event_time was in the JSON: a string, an integer, another number
    final String model;
    final EventFeatures features;  // null when absent or not an object
    final Double prediction;  // the prediction of a plain record: null when absent or null
    final boolean plain;
    private Long eventMillis;
    private boolean eventMillisKnown;
    Object cachedFor;  // the FeatureColumns spec whose row is cached
    Object cachedRow;

    private Envelope(byte[] source, String eventTime, JsonToken eventTimeToken, String model, EventFeatures features,
                     Double prediction, boolean plain) {
        this.source = source;
        this.eventTime = eventTime;
        this.eventTimeToken = eventTimeToken;
        this.model = model;
        this.features = features;
        this.prediction = prediction;
        this.plain = plain;
    }

    /** The envelope of {@code value} (fields null when missing or the JSON is malformed). */
    static Envelope parse(byte[] value) {
        if (value == null) {
            return broken(new byte[0]);
        }
        Envelope last = LAST.get();
        if (Arrays.equals(last.source, value)) {
            return last;
        }
        Envelope parsed = read(value.clone());
        LAST.set(parsed);
        return parsed;
    }

    /**
     * The envelope of {@code value}, which the caller owns and never changes (a {@link KafkaRecord}'s): no
     * copy and no per-thread cache, for a caller that keeps the envelope itself.
     */
    static Envelope readOwned(byte[] value) {
        return value == null ? broken(new byte[0]) : read(value);
    }

    /** Epoch milliseconds of {@code event_time}, computed once per envelope (see {@link EventTimeMillis}). */
    Long eventMillis() {
        if (!eventMillisKnown) {
            eventMillis = EventTimeMillis.of(eventTime, eventTimeToken);
            eventMillisKnown = true;
        }
        return eventMillis;
    }

    private static Envelope read(byte[] value) {
        String eventTime = null;
        JsonToken eventTimeToken = null;
        String model = null;
        EventFeatures features = null;
        Double prediction = null;
        boolean plain = asciiWithoutEscapes(value);
        int seen = 0;
        try (JsonParser parser = JSON.createParser(value)) {
            if (parser.nextToken() != JsonToken.START_OBJECT) {
                return broken(value);
            }
            while (parser.nextToken() == JsonToken.FIELD_NAME) {
                String field = parser.currentName();
                JsonToken token = parser.nextToken();
                int bit = fieldBit(field);
                plain &= bit != 0 && (seen & bit) == 0;
                seen |= bit;
                if (bit == EVENT_TIME) {
                    eventTime = scalarText(parser, token);
                    eventTimeToken = token;
                    plain &= plainEventTime(parser, token, eventTime);
                } else if (bit == MODEL) {
                    model = token == JsonToken.VALUE_STRING ? parser.getText() : null;
                    parser.skipChildren();
                } else if (bit == FEATURES && token == JsonToken.START_OBJECT) {
                    features = EventFeatures.read(parser);
                } else if (bit == PREDICTION) {
                    prediction = plainNumber(parser, token);
                    plain &= prediction != null || token == JsonToken.VALUE_NULL;
                    parser.skipChildren();
                } else {
                    plain &= bit == REQUEST_ID && (token == JsonToken.VALUE_STRING || token == JsonToken.VALUE_NULL);
                    parser.skipChildren();
                }
            }
            if (parser.currentToken() != JsonToken.END_OBJECT || parser.nextToken() != null) {
                return broken(value);
            }
        } catch (IOException e) {
            return broken(value);
        }
        return new Envelope(value, eventTime, eventTimeToken, model, features, prediction, plain && features != null);
    }

    private static Envelope broken(byte[] value) {
        return new Envelope(value, null, null, null, null, null, false);
    }

    private static int fieldBit(String field) {
        switch (field) {
            case "event_time": return EVENT_TIME;
            case "model": return MODEL;
            case "features": return FEATURES;
            case "prediction": return PREDICTION;
            case "request_id": return REQUEST_ID;
            default: return 0;
        }
    }

    /** Only printable ASCII and whitespace, no backslash: strings need no decoding to compare. */
    private static boolean asciiWithoutEscapes(byte[] value) {
        for (byte b : value) {
            if (b < 0 || b == '\\') {
                return false;
            }
        }
        return true;
    }

    private static boolean plainEventTime(JsonParser parser, JsonToken token, String text) throws IOException {
        if (token == JsonToken.VALUE_NUMBER_INT) {
            return EventFeatures.fitsLong(parser);
        }
        return token == JsonToken.VALUE_STRING && STRICT_RFC3339.matcher(text).matches();
    }

    /** A number as Python's validation takes it (an integer that fits a long, or a finite double); else null. */
    private static Double plainNumber(JsonParser parser, JsonToken token) throws IOException {
        switch (token) {
            case VALUE_NUMBER_INT:
                return EventFeatures.fitsLong(parser) ? (Double) (double) parser.getLongValue() : null;
            case VALUE_NUMBER_FLOAT:
                double value = parser.getDoubleValue();
                return Double.isFinite(value) ? (Double) value : null;
            default:
                return null;
        }
    }

    private static String scalarText(JsonParser parser, JsonToken token) throws IOException {
        switch (token) {
            case VALUE_STRING:
            case VALUE_NUMBER_INT:
            case VALUE_NUMBER_FLOAT:
                return parser.getText();
            default:
                parser.skipChildren();
                return null;
        }
    }
}
