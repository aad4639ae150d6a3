package dev.driftwarden.flink;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.Serializable;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;

import org.apache.avro.LogicalType;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericEnumSymbol;
import org.apache.avro.generic.GenericFixed;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.util.Utf8;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonGenerator;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Kafka values in the Confluent wire format (magic byte 0, a 4-byte big-endian schema id, Avro binary)
 * read as the JSON object Python reads them as ({@code core/confluent_avro.py}, {@code avro_as_json}), for
 * {@link Envelope} to map like any JSON event: records and maps objects, enums and strings text, bytes and
 * fixed text (ISO-8859-1), decimals doubles, timestamp-millis/micros (and local ones) epoch milliseconds
 * (toward minus infinity), dates days, time-millis/micros microseconds, a NaN or infinity null.
 *
 * <p>Writer schemas come from the schema registry ({@code GET /schemas/ids/{id}}), each asked once and
 * cached with its reader; an id the registry does not know (404) is remembered too. A registry it cannot
 * reach (a refused connection, a timeout, 5xx or 429) is asked again after each of {@link #RETRY_DELAYS_MS},
 * logged, and then the task fails (the job restarts from its last checkpoint): records are delayed, never
 * dropped. The password is read from the environment or a file on the task's machine, never passed on.
 */
final class ConfluentAvro implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(ConfluentAvro.class);
    static final long[] RETRY_DELAYS_MS = {500, 1_000, 2_000, 4_000, 8_000, 15_000, 30_000};
    private static final JsonFactory JSON = new JsonFactory();
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private final String url;
    private final String username;
    private final String passwordEnv;
    private final String passwordFile;
    private transient HttpClient http;
    private transient String authorization;
    private transient Map<Integer, PythonInts> readers;

    /**
     * Reads an Avro int as fastavro does: the whole varint as a 64-bit integer (an Integer when it fits, else a
     * Long), from {@link PythonDecoder#lastInt} (Avro's own reader keeps 32 bits).
     */
    static final class PythonInts extends GenericDatumReader<Object> {
        private PythonDecoder python;

        PythonInts(Schema schema) {
            super(schema, schema, plainReads());
        }

        private Object last;  // the last record read: Avro reuses its objects (fields, strings) for the next

        Object read(PythonDecoder decoder) throws IOException {
            python = decoder;
            last = read(last, decoder);
            return last;
        }

        /** GenericData whose reads go through the overridable methods (Avro's fast reader bypasses them). */
        private static GenericData plainReads() {
            GenericData data = new GenericData();
            data.setFastReaderEnabled(false);
            return data;
        }

        @Override
        protected Object readInt(Object old, Schema expected, org.apache.avro.io.Decoder in) throws IOException {
            in.readInt();
            long value = python.lastInt;
            return value == (int) value ? (Object) (int) value : (Object) value;
        }

        /** A plain array (Avro's array of ints holds only Integers, not an int read whole). */
        @Override
        @SuppressWarnings("unchecked")
        protected Object newArray(Object old, int size, Schema schema) {
            return new GenericData.Array<Object>(size, schema);
        }
    }
    private transient BinaryDecoder decoder;
    private transient ByteArrayOutputStream out;
    private transient Schema lastSchema;

    ConfluentAvro(String url, String username, String passwordEnv, String passwordFile) {
        this.url = url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
        this.username = username;
        this.passwordEnv = passwordEnv;
        this.passwordFile = passwordFile;
    }

    /** The settings' {@code schema_registry} ({@code jobs/drift_job.py source_settings}); null for a JSON topic. */
    static ConfluentAvro of(JsonNode format, JsonNode registry) {
        if (format == null || !"avro".equals(format.asText())) {
            return null;
        }
        return new ConfluentAvro(registry.get("url").asText(), text(registry, "username"), text(registry, "password_env"),
                text(registry, "password_file"));
    }

    private static String text(JsonNode node, String field) {
        return node.hasNonNull(field) ? node.get(field).asText() : null;
    }

    /**
     * The record in {@code value}, read as fastavro reads it and every value checked convertible as Python converts
     * it ({@link AvroValues#check}), or null when the value is not a frame, its schema id is not in the registry, or
     * its bytes do not decode under that schema exactly (Python names the reason: a dead letter). The schema of the
     * record returned is {@link #lastSchema}.
     */
    Object decode(byte[] value) {
        if (value == null || value.length < 5 || value[0] != 0) {
            return null;
        }
        PythonInts reader = reader(ByteBuffer.wrap(value, 1, 4).getInt());
        if (reader == null) {
            return null;
        }
        try {
            decoder = DecoderFactory.get().binaryDecoder(value, 5, value.length - 5, decoder);
            Object record = reader.read(new PythonDecoder(decoder));
            if (!decoder.isEnd()) {
                return null;
            }
            AvroValues.check(record, reader.getSchema());
            lastSchema = reader.getSchema();
            return record;
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /** The envelope of the record in {@code value} under {@code mapping}, read from the Avro record itself. */
    Envelope envelope(byte[] value, Envelope.Mapping mapping) {
        Object record = decode(value);
        if (record == null) {
            return Envelope.broken(mapping);
        }
        try {
            return AvroEnvelope.read(record, lastSchema, mapping);
        } catch (IOException | RuntimeException e) {
            return Envelope.broken(mapping);
        }
    }

    /** The record in {@code value} as the JSON Python reads it as ({@code avro_as_json}); null when not decodable. */
    byte[] json(byte[] value) {
        Object record = decode(value);
        if (record == null) {
            return null;
        }
        try {
            if (out == null) {
                out = new ByteArrayOutputStream(256);
            }
            out.reset();
            try (JsonGenerator json = JSON.createGenerator(out)) {
                write(json, record, lastSchema);
            }
            return out.toByteArray();
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /** Writes one Avro value of {@code schema} as {@code avro_as_json} renders it. */
    private static void write(JsonGenerator json, Object value, Schema schema) throws IOException {
        schema = AvroValues.branch(schema, value);
        switch (schema.getType()) {
            case RECORD -> {
                GenericRecord record = (GenericRecord) value;
                json.writeStartObject();
                for (Schema.Field field : schema.getFields()) {
                    json.writeFieldName(field.name());
                    write(json, record.get(field.pos()), field.schema());
                }
                json.writeEndObject();
            }
            case MAP -> {
                json.writeStartObject();
                for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                    json.writeFieldName(AvroValues.text(entry.getKey()));
                    write(json, entry.getValue(), schema.getValueType());
                }
                json.writeEndObject();
            }
            case ARRAY -> {
                json.writeStartArray();
                for (Object item : (List<?>) value) {
                    write(json, item, schema.getElementType());
                }
                json.writeEndArray();
            }
            default -> {
                Object scalar = AvroValues.scalar(value, schema);
                if (scalar == null) {
                    json.writeNull();
                } else if (scalar instanceof Long number) {
                    json.writeNumber(number);
                } else if (scalar instanceof Double number) {
                    json.writeNumber(number);
                } else if (scalar instanceof Boolean bool) {
                    json.writeBoolean(bool);
                } else {
                    json.writeString((String) scalar);
                }
            }
        }
    }

    /** The reader of schema {@code id} (asked of the registry once), or null when the registry does not know it. */
    private PythonInts reader(int id) {
        if (readers == null) {
            readers = new HashMap<>();
        }
        if (!readers.containsKey(id)) {
            String schema = schemaText(id);
            readers.put(id, schema == null ? null : new PythonInts(new Schema.Parser().parse(schema)));
        }
        return readers.get(id);
    }

    /** The text of schema {@code id}, null when the registry answers 404; retried while it cannot be reached. */
    String schemaText(int id) {
        String where = url + "/schemas/ids/" + id;
        String problem = null;
        for (int attempt = 0; attempt <= RETRY_DELAYS_MS.length; attempt++) {
            if (attempt > 0) {
                long delay = RETRY_DELAYS_MS[attempt - 1];
                LOG.warn("schema registry {} unreachable for schema id {} ({}): retry {} of {} in {} ms", url, id,
                        problem, attempt, RETRY_DELAYS_MS.length, delay);
                sleep(delay);
            }
            try {
                HttpResponse<byte[]> answer = client().send(request(where), HttpResponse.BodyHandlers.ofByteArray());
                int status = answer.statusCode();
                if (status == 200) {
                    return MAPPER.readTree(answer.body()).get("schema").asText();
                }
                if (status == 404) {
                    return null;
                }
                problem = "HTTP " + status;
                if (status == 401 || status == 403) {
                    throw new IllegalStateException("schema registry " + url + " refused the credentials (" + problem
                            + "); check source.schema_registry's username and password_env / password_file");
                }
                if (status < 500 && status != 429) {
                    throw new IllegalStateException("schema registry " + url + " answered " + problem + " for schema id " + id);
                }
            } catch (IOException e) {
                problem = e.getClass().getSimpleName() + ": " + e.getMessage();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while asking the schema registry " + url, e);
            }
        }
        throw new IllegalStateException("schema registry " + url + " unreachable for schema id " + id + " after "
                + RETRY_DELAYS_MS.length + " retries (" + problem + "); the job restarts from its last checkpoint");
    }

    private HttpRequest request(String where) {
        HttpRequest.Builder builder = HttpRequest.newBuilder(URI.create(where)).timeout(Duration.ofSeconds(10))
                .header("Accept", "application/vnd.schemaregistry.v1+json").GET();
        if (username != null) {
            if (authorization == null) {
                String credentials = username + ":" + password();
                authorization = "Basic " + Base64.getEncoder().encodeToString(credentials.getBytes(StandardCharsets.UTF_8));
            }
            builder.header("Authorization", authorization);
        }
        return builder.build();
    }

    /** The password from the environment variable or the file the config names (empty when neither), as Python reads it. */
    private String password() {
        if (passwordEnv != null) {
            String value = System.getenv(passwordEnv);
            if (value == null) {
                throw new IllegalStateException("schema registry " + url + ": the environment variable " + passwordEnv
                        + " (password_env) is not set on this machine");
            }
            return withoutLineBreaks(value);
        }
        if (passwordFile != null) {
            try {
                return withoutLineBreaks(Files.readString(Path.of(passwordFile), StandardCharsets.UTF_8));
            } catch (IOException e) {
                throw new IllegalStateException("schema registry " + url + ": cannot read password_file " + passwordFile, e);
            }
        }
        return "";
    }

    /** The secret without its final line breaks (as {@code core.kafka_security.read_secret} reads it). */
    private static String withoutLineBreaks(String secret) {
        int end = secret.length();
        while (end > 0 && (secret.charAt(end - 1) == '\n' || secret.charAt(end - 1) == '\r')) {
            end--;
        }
        return secret.substring(0, end);
    }

    private HttpClient client() {
        if (http == null) {
            http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
        }
        return http;
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for the schema registry", e);
        }
    }

    /**
     * Test harness: {@code ConfluentAvro URL USERNAME PASSWORD_FILE [COLUMNS_SPEC_FILE]} reads one hex value per line
     * on stdin and writes, per line, the value's JSON ({@link #json}), or with a {@link FeatureColumns} spec the
     * values the job's source task takes from the value's envelope ({@link #envelope}), {@code null} where it
     * does not vouch (tests/test_avro_registry.py compares both with Python).
     */
    public static void main(String[] args) throws IOException {
        ConfluentAvro avro = new ConfluentAvro(args[0], args[1], null, args[2]);
        FeatureColumns.Spec spec = args.length > 3 ? FeatureColumns.Spec.parse(Files.readString(Path.of(args[3]))) : null;
        java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            byte[] value = java.util.HexFormat.of().parseHex(line.strip());
            if (spec == null) {
                byte[] json = avro.json(value);
                out.append(json == null ? "null" : new String(json, StandardCharsets.UTF_8)).append('\n');
            } else {
                Object[] values = spec.values(avro.envelope(value, spec.mapping));
                out.append(MAPPER.writeValueAsString(values)).append('\n');
            }
        }
        System.out.print(out);
    }
}
