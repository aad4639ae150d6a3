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

    /** The epoch milliseconds of {@code event_time}'s {@code text}, read as the JSON {@code token} it was (in ms). */
    static Long of(String text, JsonToken token) {
        return of(text, token, "ms");
    }

    /**
     * The epoch milliseconds of the event time's {@code text}, read as the JSON {@code token} it was, a number
     * in {@code unit} (ms, s, us, ns; iso8601: no number is a time), a text as RFC 3339 whatever the unit: the
     * rule of {@code schemas.events.parse_event_time}.
     */
    static Long of(String text, JsonToken token, String unit) {
        if (text == null) {
            return null;
        }
        Long millis;
        switch (token) {
            case VALUE_NUMBER_INT:
                millis = scaled(fromWholeNumber(text), unit);
                break;
            case VALUE_NUMBER_FLOAT:
                millis = fromFloat(text, unit);
                break;
            default:
                millis = fromRfc3339(text);
        }
        if (millis == null || millis < MIN_EVENT_MS || millis >= MAX_EVENT_MS) {
            return null;
        }
        return millis;
    }

    /** An integer in {@code unit} as milliseconds: exactly (toward minus infinity), null beyond a long or for iso8601. */
    private static Long scaled(Long value, String unit) {
        if (value == null) {
            return null;
        }
        try {
            return switch (unit) {
                case "ms" -> value;
                case "s" -> Math.multiplyExact(value, 1000L);
                case "us" -> Math.floorDiv(value, 1000L);
                case "ns" -> Math.floorDiv(value, 1_000_000L);
                default -> null;
            };
        } catch (ArithmeticException e) {
            return null;
        }
    }

    /** A JSON integer: exactly, null beyond a long (not its low 64 bits). */
    private static Long fromWholeNumber(String text) {
        if (text.length() <= LONG_DIGITS) {  // the stream's usual form: no BigInteger (4% of the source task in JFR)
            return Long.parseLong(text);
        }
        BigInteger value = new BigInteger(text);
        return value.bitLength() < Long.SIZE ? value.longValue() : null;
    }

    /**
     * A JSON number with a fraction or an exponent: in milliseconds the double it denotes toward zero; in
     * seconds, micro- or nanoseconds rounded to the nearest millisecond (the same double operations as Python).
     */
    private static Long fromFloat(String text, String unit) {
        double value = Double.parseDouble(text);
        if (!Double.isFinite(value)) {
            return null;
        }
        return switch (unit) {
            case "ms" -> (long) value;
            case "s" -> (long) Math.floor(value * 1000.0 + 0.5);
            case "us" -> (long) Math.floor(value / 1000.0 + 0.5);
            case "ns" -> (long) Math.floor(value / 1000000.0 + 0.5);
            default -> null;
        };
    }

    private static Long fromRfc3339(String text) {
        try {
            return OffsetDateTime.parse(text.replace(' ', 'T')).toInstant().toEpochMilli();
        } catch (DateTimeParseException e) {
            return null;
        }
    }
}
