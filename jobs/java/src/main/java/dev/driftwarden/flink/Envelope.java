package dev.driftwarden.flink;

import java.io.IOException;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;

/**
 * The two top-level fields the job needs in Java, read with one streaming pass over the raw
 * bytes (no tree, no JSON path): {@code event_time} as text and {@code model}. Like the Python
 * validation (orjson), a repeated key keeps its last value; malformed JSON gives null fields.
 */
final class Envelope {
    private static final JsonFactory JSON = new JsonFactory();

    final String eventTime;
    final String model;

    private Envelope(String eventTime, String model) {
        this.eventTime = eventTime;
        this.model = model;
    }

    static Envelope parse(byte[] value) {
        if (value == null) {
            return new Envelope(null, null);
        }
        String eventTime = null;
        String model = null;
        try (JsonParser parser = JSON.createParser(value)) {
            if (parser.nextToken() != JsonToken.START_OBJECT) {
                return new Envelope(null, null);
            }
            while (parser.nextToken() == JsonToken.FIELD_NAME) {
                String field = parser.currentName();
                JsonToken token = parser.nextToken();
                if ("event_time".equals(field)) {
                    eventTime = scalarText(parser, token);
                } else if ("model".equals(field)) {
                    model = token == JsonToken.VALUE_STRING ? parser.getText() : null;
                } else {
                    parser.skipChildren();
                }
            }
            if (parser.currentToken() != JsonToken.END_OBJECT || parser.nextToken() != null) {
                return new Envelope(null, null);
            }
        } catch (IOException e) {
            return new Envelope(null, null);
        }
        return new Envelope(eventTime, model);
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
