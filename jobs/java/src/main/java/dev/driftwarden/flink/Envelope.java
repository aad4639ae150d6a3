package dev.driftwarden.flink;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.StreamReadFeature;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.util.JsonRecyclerPools;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

/**
 * The parts of an event the job needs in Java, read with one streaming pass over the raw bytes (no
 * tree): the event time as text with its JSON type, the model and the features' scalars, where the
 * envelope {@link Mapping} (the config's {@code source.envelope}, {@code schemas/envelope.py}) puts
 * them: by default the contract's {@code event_time}, {@code model}, {@code features} and {@code prediction}.
 * Like the Python validation (orjson), a repeated key keeps its last value; malformed JSON gives null fields.
 *
 * <p>{@link #plain} says whether the record is one for which the Java reading of the features equals the
 * Python validation's (see {@link FeatureColumns}): ASCII bytes without a backslash escape, each field on
 * the way to a part of the envelope at most once, every number anywhere in the record one orjson reads as
 * Jackson does (an integer that fits a long, a finite double) and nothing nested deeper than
 * {@link #MAX_DEPTH}, the event time an integer, a finite number or a strict RFC 3339 text, the
 * prediction absent, null or a finite number (kept in {@link #prediction}), the features an object whose
 * names are distinct. Fields that are no part of the envelope are ignored, whatever their type.
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
    static final Pattern STRICT_RFC3339 =
            Pattern.compile("\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?(Z|[+-]\\d{2}:\\d{2})");
    /** Deepest nesting of a plain record (orjson refuses far deeper documents; Python decides those). */
    static final int MAX_DEPTH = 64;
    // per thread, never shared: FeatureColumns caches its row on the envelope
    private static final ThreadLocal<Envelope> LAST = ThreadLocal.withInitial(() -> broken(new byte[0], Mapping.DEFAULT));

    private final byte[] source;  // a private copy of the bytes read, to recognise the same record
    private final Mapping mapping;
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
    /** Non-null values of features no model monitors, counted by {@link FeatureColumns.Spec#values}. */
    int unknownFeatures;

    private Envelope(byte[] source, Mapping mapping, String eventTime, JsonToken eventTimeToken, String model,
                     EventFeatures features, Double prediction, boolean plain) {
        this.source = source;
        this.mapping = mapping;
        this.eventTime = eventTime;
        this.eventTimeToken = eventTimeToken;
        this.model = model;
        this.features = features;
        this.prediction = prediction;
        this.plain = plain;
    }

    /** The envelope of {@code value} in the contract's shape (fields null when missing or the JSON is malformed). */
    static Envelope parse(byte[] value) {
        return parse(value, Mapping.DEFAULT);
    }

    /** The envelope of {@code value} under {@code mapping}. */
    static Envelope parse(byte[] value, Mapping mapping) {
        if (value == null) {
            return broken(new byte[0], mapping);
        }
        Envelope last = LAST.get();
        if (last.mapping == mapping && Arrays.equals(last.source, value)) {
            return last;
        }
        Envelope parsed = read(value.clone(), mapping);
        LAST.set(parsed);
        return parsed;
    }

    /**
     * The envelope of {@code value}, which the caller owns and never changes (a {@link KafkaRecord}'s): no
     * copy and no per-thread cache, for a caller that keeps the envelope itself.
     */
    static Envelope readOwned(byte[] value, Mapping mapping) {
        return value == null ? broken(new byte[0], mapping) : read(value, mapping);
    }

    /** Epoch milliseconds of the event time, computed once per envelope (see {@link EventTimeMillis}). */
    Long eventMillis() {
        if (!eventMillisKnown) {
            eventMillis = EventTimeMillis.of(eventTime, eventTimeToken, mapping.unit);
            eventMillisKnown = true;
        }
        return eventMillis;
    }

    /** What one pass over a record found, filled as the mapped fields are met. */
    private static final class Reading {
        String eventTime;
        JsonToken eventTimeToken;
        String model;
        EventFeatures features;
        Double prediction;
        boolean plain;
        int seen;  // the roles met so far (a role met twice: not plain)
    }

    private static Envelope read(byte[] value, Mapping mapping) {
        Reading r = new Reading();
        r.plain = asciiWithoutEscapes(value);
        try (JsonParser parser = JSON.createParser(value)) {
            if (parser.nextToken() != JsonToken.START_OBJECT) {
                return broken(value, mapping);
            }
            if (mapping.rootFeatures) {
                r.features = new EventFeatures();
            }
            readObject(parser, mapping.root, mapping, r, 1, true);
            if (parser.currentToken() != JsonToken.END_OBJECT || parser.nextToken() != null) {
                return broken(value, mapping);
            }
        } catch (IOException e) {
            return broken(value, mapping);
        }
        String model = mapping.modelValue != null ? mapping.modelValue : r.model;
        boolean plain = r.plain && r.features != null && !r.features.duplicates && r.features.plain;
        return new Envelope(value, mapping, r.eventTime, r.eventTimeToken, model, r.features, r.prediction, plain);
    }

    /** Reads the object the parser is in (its START_OBJECT consumed) up to its END_OBJECT, along the mapping's tree. */
    private static void readObject(JsonParser parser, Mapping.Node node, Mapping mapping, Reading r, int depth,
                                   boolean top) throws IOException {
        while (parser.nextToken() == JsonToken.FIELD_NAME) {
            String field = parser.currentName();
            JsonToken token = parser.nextToken();
            Mapping.Node child = node == null ? null : node.children.get(field);
            if (child == null) {
                if (top && mapping.rootFeatures && !mapping.exclude.contains(field)) {
                    r.features.add(field, parser, token, depth);
                } else {
                    r.plain &= EventFeatures.walk(parser, token, depth);
                }
                continue;
            }
            if (child.role != 0) {
                r.plain &= (r.seen & child.role) == 0;
                r.seen |= child.role;
                readRole(parser, token, child.role, r, depth);
            } else if (token == JsonToken.START_OBJECT) {
                r.plain &= (r.seen & child.pathBit) == 0;
                if (top && mapping.rootFeatures && !mapping.exclude.contains(field)) {
                    r.features.addObject(field);  // also a feature of a root mapping (an object: no model's value)
                }  // an object on the way met twice: Python keeps the last
                r.seen |= child.pathBit;
                readObject(parser, child, mapping, r, depth + 1, false);
            } else {
                r.plain &= EventFeatures.walk(parser, token, depth);
            }
        }
    }

    private static void readRole(JsonParser parser, JsonToken token, int role, Reading r, int depth) throws IOException {
        switch (role) {
            case Mapping.EVENT_TIME -> {
                r.eventTime = scalarText(parser, token);
                r.eventTimeToken = token;
                r.plain &= plainEventTime(parser, token, r.eventTime);
            }
            case Mapping.MODEL -> {
                r.model = token == JsonToken.VALUE_STRING ? parser.getText() : null;
                r.plain &= EventFeatures.walk(parser, token, depth);
            }
            case Mapping.FEATURES -> {
                if (token == JsonToken.START_OBJECT) {
                    r.features = EventFeatures.read(parser, depth + 1);
                } else {
                    r.features = null;
                    r.plain &= EventFeatures.walk(parser, token, depth);
                }
            }
            default -> {  // the prediction
                r.prediction = plainNumber(parser, token);
                r.plain &= r.prediction != null || token == JsonToken.VALUE_NULL;
                r.plain &= EventFeatures.walk(parser, token, depth);
            }
        }
    }

    private static Envelope broken(byte[] value, Mapping mapping) {
        return new Envelope(value, mapping, null, null, null, null, null, false);
    }

    /** The envelope of a record that cannot be read (fields null, not plain). */
    static Envelope broken(Mapping mapping) {
        return broken(new byte[0], mapping);
    }

    /** An envelope read from elsewhere than JSON bytes (an Avro record: {@link AvroEnvelope}). */
    static Envelope of(Mapping mapping, String eventTime, JsonToken eventTimeToken, String model, EventFeatures features,
                       Double prediction, boolean plain) {
        return new Envelope(new byte[0], mapping, eventTime, eventTimeToken, model, features, prediction, plain);
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
        if (token == JsonToken.VALUE_NUMBER_FLOAT) {
            return Double.isFinite(parser.getDoubleValue());
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

    /**
     * The envelope mapping ({@code schemas.envelope.EnvelopeConfig.to_java}): the path of the event time and its
     * unit, of the model (or one model for every record), of the features (or the top level less some fields) and
     * of the prediction, as a tree of field names.
     */
    static final class Mapping implements Serializable {
        private static final long serialVersionUID = 1L;
        static final int EVENT_TIME = 1;
        static final int MODEL = 2;
        static final int FEATURES = 4;
        static final int PREDICTION = 8;
        static final Mapping DEFAULT = new Mapping(List.of("event_time"), "ms", List.of("model"), null,
                List.of("features"), Set.of(), List.of("prediction"));

        final String unit;
        final String modelValue;
        final boolean rootFeatures;
        final Set<String> exclude;
        final Node root = new Node();
        private int nextBit = 16;

        /** One field on the way to the envelope's parts: a part itself ({@code role}), or an object holding some. */
        static final class Node implements Serializable {
            private static final long serialVersionUID = 1L;
            final Map<String, Node> children = new HashMap<>();
            int role;
            int pathBit;
        }

        Mapping(List<String> eventTime, String unit, List<String> model, String modelValue, List<String> features,
                Set<String> exclude, List<String> prediction) {
            this.unit = unit;
            this.modelValue = modelValue;
            this.rootFeatures = features == null;
            this.exclude = exclude;
            add(eventTime, EVENT_TIME);
            if (model != null) {
                add(model, MODEL);
            }
            if (features != null) {
                add(features, FEATURES);
            }
            add(prediction, PREDICTION);
        }

        private void add(List<String> path, int role) {
            Node node = root;
            for (int i = 0; i < path.size(); i++) {
                node = node.children.computeIfAbsent(path.get(i), name -> new Node());
                if (i < path.size() - 1 && node.pathBit == 0) {
                    node.pathBit = nextBit;
                    nextBit <<= 1;
                }
            }
            node.role = role;
        }

        /** The mapping written by {@code EnvelopeConfig.to_java} (null or absent: the contract's envelope). */
        static Mapping parse(JsonNode node) {
            if (node == null || node.isNull()) {
                return DEFAULT;
            }
            return new Mapping(path(node.get("event_time")), node.get("unit").asText(), path(node.get("model")),
                    node.hasNonNull("model_value") ? node.get("model_value").asText() : null,
                    path(node.get("features")), names(node.get("exclude")), path(node.get("prediction")));
        }

        private static List<String> path(JsonNode node) {
            if (node == null || node.isNull()) {
                return null;
            }
            List<String> parts = new ArrayList<>();
            node.forEach(part -> parts.add(part.asText()));
            return parts;
        }

        private static Set<String> names(JsonNode node) {
            List<String> names = path(node);
            return names == null ? Set.of() : new HashSet<>(names);
        }
    }
}
