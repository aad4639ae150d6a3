package dev.driftwarden.flink;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.math.RoundingMode;

import org.apache.avro.LogicalType;
import org.apache.avro.LogicalTypes;

/**
 * Avro logical types as Python reads them (fastavro's conversions, then {@code core.event_files.avro_as_json}):
 * timestamps epoch milliseconds toward minus infinity, within Python's datetime range (years 1 to 9999); dates
 * days, within Python's date range; times of day microseconds, by fastavro's arithmetic (its hour 0 to 23);
 * decimals rounded to their precision, then the nearest double. A value Python cannot convert throws: the
 * record is not decodable, as in Python.
 */
final class AvroLogical {
    /** Python's datetime range in epoch microseconds: 0001-01-01T00:00:00 to 9999-12-31T23:59:59.999999. */
    static final long MIN_MICROS = -62_135_596_800_000_000L;
    static final long MAX_MICROS = 253_402_300_799_999_999L;
    /** Days from 1970-01-01 to Python's first and last dates (date.fromordinal of 1 and 3652059). */
    static final long MIN_DAYS = 1 - 719_163;
    static final long MAX_DAYS = 3_652_059 - 719_163;

    private AvroLogical() {}

    /** An int (as fastavro reads it: 64 bits) of {@code logical} type as Python reads it: a date's days, a
     * time-millis as microseconds of the day. */
    static long intValue(long value, LogicalType logical) {
        if (logical instanceof LogicalTypes.Date) {
            return check(value, MIN_DAYS, MAX_DAYS, "date");
        }
        if (logical instanceof LogicalTypes.TimeMillis) {
            return timeOfDay(value, 1_000L);
        }
        return value;
    }

    /** A long of {@code logical} type as Python reads it: a timestamp's epoch milliseconds, a time-micros' microseconds. */
    static long longValue(long value, LogicalType logical) {
        if (logical instanceof LogicalTypes.TimestampMillis || logical instanceof LogicalTypes.LocalTimestampMillis) {
            return check(value, Math.floorDiv(MIN_MICROS, 1_000L), Math.floorDiv(MAX_MICROS, 1_000L), "timestamp");
        }
        if (logical instanceof LogicalTypes.TimestampMicros || logical instanceof LogicalTypes.LocalTimestampMicros) {
            return Math.floorDiv(check(value, MIN_MICROS, MAX_MICROS, "timestamp"), 1_000L);
        }
        if (logical instanceof LogicalTypes.TimeMicros) {
            return timeOfDay(value, 1L);
        }
        return value;
    }

    /** A decimal's unscaled big-endian bytes rounded to its precision (half even), scaled, as the nearest double. */
    static double decimal(byte[] unscaled, LogicalTypes.Decimal decimal) {
        BigDecimal exact = new BigDecimal(new BigInteger(unscaled));
        BigDecimal rounded = exact.round(new MathContext(decimal.getPrecision(), RoundingMode.HALF_EVEN));
        return rounded.scaleByPowerOfTen(-decimal.getScale()).doubleValue();
    }

    /**
     * Microseconds of the day of a time in {@code unitMicros} (1000: millis, 1: micros) by fastavro's arithmetic: the
     * hour truncated toward zero (0 to 23, else not a time), minutes and seconds floor-modulo 60, the sub-second part
     * floor-modulo a second.
     */
    private static long timeOfDay(long value, long unitMicros) {
        long perSecond = 1_000_000L / unitMicros;
        long hour = (long) (value / (3600.0 * perSecond));
        if (hour < 0 || hour > 23) {
            throw new IllegalArgumentException("hour must be in 0..23");
        }
        long minute = Math.floorMod((long) (value / (60.0 * perSecond)), 60L);
        long second = Math.floorMod((long) (value / (double) perSecond), 60L);
        long fraction = Math.floorMod(value, perSecond) * unitMicros;
        return ((hour * 60 + minute) * 60 + second) * 1_000_000L + fraction;
    }

    private static long check(long value, long min, long max, String what) {
        if (value < min || value > max) {
            throw new IllegalArgumentException(what + " out of Python's range");
        }
        return value;
    }
}
