package dev.driftwarden.flink;

import java.io.IOException;
import java.util.Arrays;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;

/**
 * The {@code features} object of one event as read by {@link Envelope}'s streaming pass: each
 * field's name and, for a scalar, its value. A number is kept only when it is an integer that
 * fits a long or a finite double; anything else (a boolean, a nested value, a huge number) is
 * marked {@link #OTHER} and leaves the event to the Python validation.
 */
final class EventFeatures {
    static final byte NUMBER = 1;
    static final byte TEXT = 2;
    static final byte NULL = 3;
    static final byte OTHER = 4;

    int count;
    String[] names = new String[32];
    byte[] kinds = new byte[32];
    double[] numbers = new double[32];
    String[] texts = new String[32];

    /** Read the object whose START_OBJECT the parser is at, up to and including its END_OBJECT. */
    static EventFeatures read(JsonParser parser) throws IOException {
        EventFeatures features = new EventFeatures();
        while (parser.nextToken() == JsonToken.FIELD_NAME) {
            features.add(parser.currentName(), parser, parser.nextToken());
        }
        return features;
    }

    private void add(String name, JsonParser parser, JsonToken token) throws IOException {
        if (count == names.length) {
            grow();
        }
        names[count] = name;
        kinds[count] = readValue(parser, token, count);
        count++;
    }

    private byte readValue(JsonParser parser, JsonToken token, int i) throws IOException {
        switch (token) {
            case VALUE_NUMBER_INT:
                if (!fitsLong(parser)) {
                    return OTHER;
                }
                numbers[i] = (double) parser.getLongValue();
                return NUMBER;
            case VALUE_NUMBER_FLOAT:
                double value = parser.getDoubleValue();
                if (!Double.isFinite(value)) {
                    return OTHER;
                }
                numbers[i] = value;
                return NUMBER;
            case VALUE_STRING:
                texts[i] = parser.getText();
                return TEXT;
            case VALUE_NULL:
                return NULL;
            default:
                parser.skipChildren();
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
    }
}
