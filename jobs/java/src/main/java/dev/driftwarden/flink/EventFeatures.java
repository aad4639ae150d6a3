package dev.driftwarden.flink;

import java.io.IOException;
import java.util.Arrays;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;

/**
 * The features of one event as read by {@link Envelope}'s streaming pass: each field's name and, for
 * a scalar, its value. A number is kept only when it is an integer that fits a long or a finite
 * double; a boolean as {@link #BOOLEAN}; anything else (a nested value, a huge number) is marked
 * {@link #OTHER}, and {@link #plain} says whether each number inside it reads alike in orjson.
 */
final class EventFeatures {
    static final byte NUMBER = 1;
    static final byte TEXT = 2;
    static final byte NULL = 3;
    static final byte OTHER = 4;
    static final byte BOOLEAN = 5;

    int count;
    /** A name came twice (Python keeps the last value: Java does not vouch). */
    boolean duplicates;
    /** Every nested value read the same in orjson (see {@link #walk}). */
    boolean plain = true;
    boolean[] booleans = new boolean[32];
    String[] names = new String[32];
    byte[] kinds = new byte[32];
    double[] numbers = new double[32];
    String[] texts = new String[32];

    /** Read the object whose START_OBJECT the parser is at (at {@code depth}), up to and including its END_OBJECT. */
    static EventFeatures read(JsonParser parser, int depth) throws IOException {
        EventFeatures features = new EventFeatures();
        while (parser.nextToken() == JsonToken.FIELD_NAME) {
            features.add(parser.currentName(), parser, parser.nextToken(), depth);
        }
        return features;
    }

    /** Adds one feature: its name and the value the parser is at ({@code token}, at {@code depth}). */
    void add(String name, JsonParser parser, JsonToken token, int depth) throws IOException {
        if (count == names.length) {
            grow();
        }
        for (int i = 0; i < count && !duplicates; i++) {  // a few names: cheaper than a set
            duplicates = names[i] == name || names[i].equals(name);
        }
        names[count] = name;
        kinds[count] = readValue(parser, token, count, depth);
        count++;
    }

    /** Adds one feature read from an Avro record ({@link AvroEnvelope}): its kind and value. */
    void addScalar(String name, byte kind, double number, String text, boolean bool) {
        if (count == names.length) {
            grow();
        }
        for (int i = 0; i < count && !duplicates; i++) {
            duplicates = names[i] == name || names[i].equals(name);
        }
        names[count] = name;
        kinds[count] = kind;
        numbers[count] = number;
        texts[count] = text;
        booleans[count] = bool;
        count++;
    }

    /** Adds a feature whose value is an object read elsewhere (a top-level field on the way to a part of the envelope). */
    void addObject(String name) {
        if (count == names.length) {
            grow();
        }
        for (int i = 0; i < count && !duplicates; i++) {
            duplicates = names[i].equals(name);
        }
        names[count] = name;
        kinds[count++] = OTHER;
    }

    /**
     * Consumes the value the parser is at ({@code token}); whether every number in it is one orjson reads as
     * Jackson does (an integer that fits a long, a finite double) and it nests at most {@link Envelope#MAX_DEPTH} deep.
     */
    static boolean walk(JsonParser parser, JsonToken token, int depth) throws IOException {
        switch (token) {
            case VALUE_NUMBER_INT:
                return fitsLong(parser);
            case VALUE_NUMBER_FLOAT:
                return Double.isFinite(parser.getDoubleValue());
            case START_OBJECT:
            case START_ARRAY:
                break;
            default:
                return true;
        }
        boolean plain = depth < Envelope.MAX_DEPTH;
        JsonToken end = token == JsonToken.START_OBJECT ? JsonToken.END_OBJECT : JsonToken.END_ARRAY;
        for (JsonToken next = parser.nextToken(); next != end; next = parser.nextToken()) {
            if (next == JsonToken.FIELD_NAME) {
                continue;
            }
            if (next == null) {
                throw new IOException("unexpected end of input");
            }
            plain &= walk(parser, next, depth + 1);
        }
        return plain;
    }

    private byte readValue(JsonParser parser, JsonToken token, int i, int depth) throws IOException {
        switch (token) {
            case VALUE_NUMBER_INT:
                if (!fitsLong(parser)) {
                    plain = false;
                    return OTHER;
                }
                numbers[i] = (double) parser.getLongValue();
                return NUMBER;
            case VALUE_NUMBER_FLOAT:
                double value = parser.getDoubleValue();
                if (!Double.isFinite(value)) {
                    plain = false;
                    return OTHER;
                }
                numbers[i] = value;
                return NUMBER;
            case VALUE_STRING:
                texts[i] = parser.getText();
                return TEXT;
            case VALUE_NULL:
                return NULL;
            case VALUE_TRUE:
            case VALUE_FALSE:
                booleans[i] = token == JsonToken.VALUE_TRUE;
                return BOOLEAN;
            default:
                plain &= walk(parser, token, depth);
                return OTHER;
        }
    }

    /** Whether the integer the parser is at fits a long (JSON allows any size; orjson stops at 64 bits). */
    static boolean fitsLong(JsonParser parser) throws IOException {
        JsonParser.NumberType type = parser.getNumberType();
        return type == JsonParser.NumberType.INT || type == JsonParser.NumberType.LONG;
    }

    private void grow() {
        int size = names.length * 2;
        names = Arrays.copyOf(names, size);
        kinds = Arrays.copyOf(kinds, size);
        numbers = Arrays.copyOf(numbers, size);
        texts = Arrays.copyOf(texts, size);
        booleans = Arrays.copyOf(booleans, size);
    }
}
