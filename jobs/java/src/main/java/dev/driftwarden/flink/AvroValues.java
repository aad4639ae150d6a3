package dev.driftwarden.flink;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.UUID;

import org.apache.avro.LogicalType;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericEnumSymbol;
import org.apache.avro.generic.GenericFixed;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.util.Utf8;

/**
 * Avro values (as {@link ConfluentAvro} reads them) as the JSON values Python reads them as ({@code
 * core.event_files.avro_as_json} over fastavro's conversions): null, a Boolean, a Long (ints, longs, dates,
 * timestamps as epoch milliseconds, times of day as microseconds), a Double (floats, doubles, decimals; a NaN or
 * an infinity is null), a String (strings decoded strictly as UTF-8, enums, uuids as Python writes them, bytes
 * and fixed as ISO-8859-1), or the record, map or array itself. A value Python cannot convert throws.
 */
final class AvroValues {
    private static final ThreadLocal<CharsetDecoder> STRICT_UTF8 = ThreadLocal.withInitial(() ->
            StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT));

    private AvroValues() {}

    /** The branch of {@code schema} that {@code value} is (the schema itself unless it is a union). */
    static Schema branch(Schema schema, Object value) {
        return schema.getType() == Schema.Type.UNION
                ? schema.getTypes().get(GenericData.get().resolveUnion(schema, value)) : schema;
    }

    /** Whether a value of {@code schema} (a resolved branch) is an object in JSON: a record or a map. */
    static boolean isObject(Schema schema) {
        return schema.getType() == Schema.Type.RECORD || schema.getType() == Schema.Type.MAP;
    }

    /** Converts every value inside {@code value} as Python would, throwing where Python's conversion fails. */
    static void check(Object value, Schema schema) throws CharacterCodingException {
        schema = branch(schema, value);
        switch (schema.getType()) {
            case RECORD -> {
                GenericRecord record = (GenericRecord) value;
                for (Schema.Field field : schema.getFields()) {
                    check(record.get(field.pos()), field.schema());
                }
            }
            case MAP -> {
                for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                    text(entry.getKey());
                    check(entry.getValue(), schema.getValueType());
                }
            }
            case ARRAY -> {
                for (Object item : (List<?>) value) {
                    check(item, schema.getElementType());
                }
            }
            case BOOLEAN, FLOAT, DOUBLE, NULL -> { }
            default -> scalar(value, schema);
        }
    }

    /** A scalar value of {@code schema} (a resolved branch) as Python reads it; a record, map or array as it is. */
    static Object scalar(Object value, Schema schema) throws CharacterCodingException {
        if (value == null) {
            return null;
        }
        LogicalType logical = schema.getLogicalType();
        return switch (schema.getType()) {
            case ENUM -> ((GenericEnumSymbol<?>) value).toString();
            case STRING -> uuid(text(value), logical);
            case BOOLEAN -> value;
            case INT -> AvroLogical.intValue(((Number) value).longValue(), logical);
            case LONG -> AvroLogical.longValue((Long) value, logical);
            case FLOAT, DOUBLE -> finite(((Number) value).doubleValue());
            case BYTES -> bytes(bytes((ByteBuffer) value), logical);
            case FIXED -> bytes(((GenericFixed) value).bytes(), logical);
            case NULL -> null;
            default -> value;
        };
    }

    private static Double finite(double value) {
        return Double.isFinite(value) ? value : null;
    }

    /** A string's text, its UTF-8 decoded strictly as Python decodes it (malformed bytes: the record is undecodable). */
    static String text(Object value) throws CharacterCodingException {
        if (!(value instanceof Utf8 utf8)) {
            return value.toString();
        }
        byte[] bytes = utf8.getBytes();
        int length = utf8.getByteLength();
        for (int i = 0; i < length; i++) {
            if (bytes[i] < 0) {
                return STRICT_UTF8.get().decode(ByteBuffer.wrap(bytes, 0, length)).toString();
            }
        }
        return new String(bytes, 0, length, StandardCharsets.ISO_8859_1);  // ASCII: the same text, decoded faster
    }

    /** A uuid string as Python's {@code str(uuid.UUID(text))}: braces, "urn:uuid:" and hyphens dropped, 32 hex digits. */
    private static String uuid(String text, LogicalType logical) {
        if (logical == null || !"uuid".equals(logical.getName())) {
            return text;
        }
        String hex = text.replace("urn:", "").replace("uuid:", "");
        int from = 0;
        int to = hex.length();
        while (from < to && (hex.charAt(from) == '{' || hex.charAt(from) == '}')) {
            from++;
        }
        while (to > from && (hex.charAt(to - 1) == '{' || hex.charAt(to - 1) == '}')) {
            to--;
        }
        hex = hex.substring(from, to).replace("-", "");
        if (hex.length() != 32 || !hex.chars().allMatch(c -> Character.digit(c, 16) >= 0 && c < 128)) {
            throw new IllegalArgumentException("badly formed hexadecimal UUID string");
        }
        return new UUID(Long.parseUnsignedLong(hex.substring(0, 16), 16), Long.parseUnsignedLong(hex.substring(16), 16))
                .toString();
    }

    private static byte[] bytes(ByteBuffer buffer) {
        byte[] out = new byte[buffer.remaining()];
        buffer.duplicate().get(out);
        return out;
    }

    /** Bytes as a decimal's double, or as their ISO-8859-1 text. */
    private static Object bytes(byte[] bytes, LogicalType logical) {
        if (logical instanceof LogicalTypes.Decimal decimal) {
            return finite(AvroLogical.decimal(bytes, decimal));
        }
        return new String(bytes, StandardCharsets.ISO_8859_1);
    }
}
