package dev.driftwarden.flink;

import java.io.IOException;
import java.util.Map;

import org.apache.avro.Schema;
import org.apache.avro.generic.GenericRecord;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;

/**
 * The envelope of an Avro record ({@link ConfluentAvro#decode}), read from the record itself as {@link Envelope}
 * reads it from the record's JSON ({@code avro_as_json}): the same mapping tree, the same parts, the same
 * features, values converted by {@link AvroValues}. No JSON is written or parsed on the way. A record is plain
 * under the JSON rules that still apply to it: each field on the way to a part met once, the event time a
 * number or a strict RFC 3339 text, the prediction a number or null, the features an object of distinct names.
 * (Its texts need no ASCII rule: they are exact, with no JSON escapes to read.)
 */
final class AvroEnvelope {
    private AvroEnvelope() {}

    /** What one walk over a record found, filled as the mapped fields are met. */
    private static final class Reading {
        String eventTime;
        JsonToken eventTimeToken;
        String model;
        EventFeatures features;
        Double prediction;
        boolean plain = true;
        int seen;
    }

    /** The envelope of {@code record} (of {@code schema}) under {@code mapping}. */
    static Envelope read(Object record, Schema schema, Envelope.Mapping mapping) throws IOException {
        Schema top = AvroValues.branch(schema, record);
        if (!AvroValues.isObject(top)) {
            return Envelope.broken(mapping);  // not an object: Python names the reason
        }
        Reading r = new Reading();
        if (mapping.rootFeatures) {
            r.features = new EventFeatures();
        }
        walk(record, top, mapping.root, mapping, r, true);
        String model = mapping.modelValue != null ? mapping.modelValue : r.model;
        boolean plain = r.plain && r.features != null && !r.features.duplicates && r.features.plain;
        return Envelope.of(mapping, r.eventTime, r.eventTimeToken, model, r.features, r.prediction, plain);
    }

    /** Visits each field of a record or each entry of a map (of {@code schema}, a resolved branch). */
    private static void walk(Object value, Schema schema, Envelope.Mapping.Node node, Envelope.Mapping mapping,
                             Reading r, boolean top) throws IOException {
        if (schema.getType() == Schema.Type.RECORD) {
            GenericRecord record = (GenericRecord) value;
            for (Schema.Field field : schema.getFields()) {
                visit(field.name(), record.get(field.pos()), field.schema(), node, mapping, r, top);
            }
        } else {
            for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                visit(AvroValues.text(entry.getKey()), entry.getValue(), schema.getValueType(), node, mapping, r, top);
            }
        }
    }

    private static void visit(String name, Object value, Schema schema, Envelope.Mapping.Node node,
                              Envelope.Mapping mapping, Reading r, boolean top) throws IOException {
        schema = AvroValues.branch(schema, value);
        Envelope.Mapping.Node child = node == null ? null : node.children.get(name);
        boolean feature = top && mapping.rootFeatures && !mapping.exclude.contains(name);
        if (child == null) {
            if (feature) {
                add(r.features, name, value, schema);
            }
        } else if (child.role != 0) {
            r.plain &= (r.seen & child.role) == 0;
            r.seen |= child.role;
            role(child.role, value, schema, r);
        } else if (AvroValues.isObject(schema)) {
            r.plain &= (r.seen & child.pathBit) == 0;
            if (feature) {
                r.features.addObject(name);
            }
            r.seen |= child.pathBit;
            walk(value, schema, child, mapping, r, false);
        }
    }

    private static void role(int role, Object value, Schema schema, Reading r) throws IOException {
        Object scalar = AvroValues.scalar(value, schema);
        switch (role) {
            case Envelope.Mapping.EVENT_TIME -> eventTime(scalar, r);
            case Envelope.Mapping.MODEL -> r.model = scalar instanceof String text ? text : null;
            case Envelope.Mapping.FEATURES -> {
                r.features = AvroValues.isObject(schema) ? new EventFeatures() : null;
                if (r.features != null) {
                    features(value, schema, r.features);
                }
            }
            default -> {  // the prediction
                r.prediction = scalar instanceof Long n ? (Double) n.doubleValue() : scalar instanceof Double d ? d : null;
                r.plain &= r.prediction != null || scalar == null;
            }
        }
    }

    private static void eventTime(Object scalar, Reading r) {
        if (scalar instanceof Long number) {
            r.eventTime = number.toString();
            r.eventTimeToken = JsonToken.VALUE_NUMBER_INT;
        } else if (scalar instanceof Double number) {
            r.eventTime = number.toString();
            r.eventTimeToken = JsonToken.VALUE_NUMBER_FLOAT;
        } else if (scalar instanceof String text) {
            r.eventTime = text;
            r.eventTimeToken = JsonToken.VALUE_STRING;
            r.plain &= Envelope.STRICT_RFC3339.matcher(text).matches();
        } else {
            r.eventTime = null;
            r.eventTimeToken = JsonToken.VALUE_NULL;
            r.plain = false;
        }
    }

    /** The fields of the features' record, or the entries of their map. */
    private static void features(Object value, Schema schema, EventFeatures features) throws IOException {
        if (schema.getType() == Schema.Type.RECORD) {
            GenericRecord record = (GenericRecord) value;
            for (Schema.Field field : schema.getFields()) {
                Object item = record.get(field.pos());
                add(features, field.name(), item, AvroValues.branch(field.schema(), item));
            }
        } else {
            Schema values = schema.getValueType();
            for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                add(features, AvroValues.text(entry.getKey()), entry.getValue(), AvroValues.branch(values, entry.getValue()));
            }
        }
    }

    /** One feature: its value of {@code schema} (a resolved branch) as the kind JSON would give it. */
    private static void add(EventFeatures features, String name, Object value, Schema schema) throws IOException {
        Object scalar = AvroValues.scalar(value, schema);
        if (scalar == null) {
            features.addScalar(name, EventFeatures.NULL, 0, null, false);
        } else if (scalar instanceof Long number) {
            features.addScalar(name, EventFeatures.NUMBER, number.doubleValue(), null, false);
        } else if (scalar instanceof Double number) {
            features.addScalar(name, EventFeatures.NUMBER, number, null, false);
        } else if (scalar instanceof String text) {
            features.addScalar(name, EventFeatures.TEXT, 0, text, false);
        } else if (scalar instanceof Boolean bool) {
            features.addScalar(name, EventFeatures.BOOLEAN, 0, null, bool);
        } else {
            features.addScalar(name, EventFeatures.OTHER, 0, null, false);
        }
    }
}
