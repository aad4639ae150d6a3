package dev.driftwarden.flink;

import java.math.BigDecimal;
import java.time.OffsetDateTime;
import java.time.format.DateTimeParseException;

import org.apache.flink.table.functions.ScalarFunction;

/**
 * Epoch milliseconds of an event's {@code event_time} field: an epoch-ms number or an RFC 3339
 * timestamp with an offset. Takes the raw event bytes (one streaming pass, see {@link Envelope}) or
 * the field's text. Returns null when the value is missing, malformed or outside 2000..2100,
 * mirroring {@code schemas/events.py::parse_event_time}; such events are rejected by the Python
 * validation and never reach a window.
 */
public class EventTimeMillis extends ScalarFunction {
    static final long MIN_EVENT_MS = 946_684_800_000L;
    static final long MAX_EVENT_MS = 4_102_444_800_000L;

    public Long eval(byte[] value) {
        return Envelope.parse(value).eventMillis();
    }

    public Long eval(String text) {
        return fromText(text);
    }

    static Long fromText(String text) {
        if (text == null || text.isEmpty()) {
            return null;
        }
        Long millis = looksNumeric(text) ? fromNumber(text) : fromRfc3339(text);
        if (millis == null || millis < MIN_EVENT_MS || millis >= MAX_EVENT_MS) {
            return null;
        }
        return millis;
    }

    private static boolean looksNumeric(String text) {
        char first = text.charAt(0);
        return Character.isDigit(first) || first == '-';
    }

    private static Long fromNumber(String text) {
        if (text.indexOf('-', 1) > 0 || text.indexOf(':') > 0) {
            return fromRfc3339(text);
        }
        try {
            return new BigDecimal(text).longValue();
        } catch (NumberFormatException e) {
            return null;
        }
    }

    private static Long fromRfc3339(String text) {
        try {
            return OffsetDateTime.parse(text.replace(' ', 'T')).toInstant().toEpochMilli();
        } catch (DateTimeParseException e) {
            return null;
        }
    }
}
