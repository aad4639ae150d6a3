package dev.driftwarden.flink;

import java.math.BigInteger;
import java.time.OffsetDateTime;
import java.time.format.DateTimeParseException;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;
import org.apache.flink.table.functions.ScalarFunction;

/**
 * Epoch milliseconds of an event's {@code event_time} field, read from the raw event bytes (one
 * streaming pass, see {@link Envelope}) as {@code schemas/events.py::parse_event_time} reads it: an
 * integer as it is, any other number toward zero (Python's {@code int()} of the float it parses
 * to), a string as an RFC 3339 timestamp with an offset. Returns null when the value is missing,
 * malformed, beyond a long or outside 2000..2100; such events are rejected by the Python
 * validation and never reach a window.
 */
public class EventTimeMillis extends ScalarFunction {
    static final long MIN_EVENT_MS = 946_684_800_000L;
    static final long MAX_EVENT_MS = 4_102_444_800_000L;
    private static final int LONG_DIGITS = 18;  // any integer of at most this many characters fits a long

    public Long eval(byte[] value) {
        return Envelope.parse(value).eventMillis();
    }

    /** The epoch milliseconds of {@code event_time}'s {@code text}, read as the JSON {@code token} it was. */
    static Long of(String text, JsonToken token) {
        if (text == null) {
            return null;
        }
        Long millis;
        switch (token) {
            case VALUE_NUMBER_INT:
                millis = fromInteger(text);
                break;
            case VALUE_NUMBER_FLOAT:
                millis = fromFloat(text);
                break;
            default:
                millis = fromRfc3339(text);
        }
        if (millis == null || millis < MIN_EVENT_MS || millis >= MAX_EVENT_MS) {
            return null;
        }
        return millis;
    }

    /** A JSON integer: exactly, null beyond a long (not its low 64 bits). */
    private static Long fromInteger(String text) {
        if (text.length() <= LONG_DIGITS) {  // the stream's usual form: no BigInteger (4% of the source task in JFR)
            return Long.parseLong(text);
        }
        BigInteger value = new BigInteger(text);
        return value.bitLength() < Long.SIZE ? value.longValue() : null;
    }

    /** A JSON number with a fraction or an exponent: the double it denotes, toward zero. */
    private static Long fromFloat(String text) {
        double value = Double.parseDouble(text);
        return Double.isFinite(value) ? (long) value : null;
    }

    private static Long fromRfc3339(String text) {
        try {
            return OffsetDateTime.parse(text.replace(' ', 'T')).toInstant().toEpochMilli();
        } catch (DateTimeParseException e) {
            return null;
        }
    }
}
