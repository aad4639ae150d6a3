package dev.driftwarden.flink;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

/**
 * What the drift job's source task needs to know, written as JSON by {@code jobs/drift_job.py}
 * ({@code source_settings}): where to read, the event-time rules, and the specs of the per-event work.
 * Parsed once; a missing or mistyped field fails here, naming it.
 */
final class SourceSettings implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final ObjectMapper MAPPER = new ObjectMapper();

    final String text;
    final String bootstrapServers;
    final String groupId;
    /** The Kafka client's security properties (secrets only as config-provider references: KafkaSecretProvider). */
    final Map<String, String> kafkaProperties = new LinkedHashMap<>();
    final List<String> topics = new ArrayList<>();
    final String topicPattern;
    /** "earliest", "latest", "committed", or an epoch-ms timestamp as text. */
    final String start;
    final boolean bounded;
    final long outOfOrdernessMs;
    final long idlenessMs;
    final boolean watermarkPerEvent;
    final long maxFutureSkewMs;
    /** {@link FeatureColumns} spec (JSON text; its envelope mapping is {@link #envelope}). */
    final String columns;
    /** How a record maps onto an event (the config's {@code source.envelope}). */
    final Envelope.Mapping envelope;
    /** The Confluent wire format's reader ({@code source.format: avro}), null for JSON values. */
    final ConfluentAvro avro;
    /** {@link SummarySpec} (JSON text). */
    final String aggregate;
    /** {@link EventSegment} spec (JSON text), null when no model is segmented. */
    final String segments;
    /** The feature columns that {@link EventSegment}'s arguments are, in argument order. */
    final int[] segmentColumns;
    /** The reasons a record is turned away with: no readable event time or model, a future clock, late. */
    final String envelopeReason;
    final String futureReason;
    final String lateReason;

    private SourceSettings(String text, JsonNode root) {
        this.text = text;
        bootstrapServers = required(root, "bootstrap_servers").asText();
        groupId = required(root, "group_id").asText();
        JsonNode kafka = root.get("kafka_properties");
        if (kafka != null && kafka.isObject()) {
            kafka.fields().forEachRemaining(e -> kafkaProperties.put(e.getKey(), e.getValue().asText()));
        }
        required(root, "topics").forEach(t -> topics.add(t.asText()));
        topicPattern = root.hasNonNull("topic_pattern") ? root.get("topic_pattern").asText() : null;
        start = required(root, "start").asText();
        bounded = required(root, "bounded").asBoolean();
        outOfOrdernessMs = required(root, "out_of_orderness_ms").asLong();
        idlenessMs = required(root, "idleness_ms").asLong();
        watermarkPerEvent = "on-event".equals(required(root, "watermark_emit").asText());
        maxFutureSkewMs = required(root, "max_future_skew_ms").asLong();
        columns = required(root, "columns").asText();
        try {
            envelope = Envelope.Mapping.parse(MAPPER.readTree(columns).get("envelope"));
        } catch (java.io.IOException e) {
            throw new IllegalArgumentException("source settings: columns is not JSON: " + e.getMessage(), e);
        }
        avro = ConfluentAvro.of(root.get("format"), root.get("schema_registry"));
        aggregate = required(root, "aggregate").asText();
        segments = root.hasNonNull("segments") ? root.get("segments").asText() : null;
        JsonNode segmentArgs = root.get("segment_columns");
        segmentColumns = new int[segmentArgs == null ? 0 : segmentArgs.size()];
        for (int i = 0; i < segmentColumns.length; i++) {
            segmentColumns[i] = segmentArgs.get(i).asInt();
        }
        JsonNode reasons = required(root, "reasons");
        envelopeReason = required(reasons, "envelope").asText();
        futureReason = required(reasons, "future").asText();
        lateReason = required(reasons, "late").asText();
        if (topicPattern == null && topics.isEmpty()) {
            throw new IllegalArgumentException("source settings: neither topics nor topic_pattern");
        }
    }

    /** The settings in {@code json}; an IllegalArgumentException names what is wrong. */
    static SourceSettings parse(String json) {
        try {
            return new SourceSettings(json, MAPPER.readTree(json));
        } catch (java.io.IOException e) {
            throw new IllegalArgumentException("source settings: not JSON: " + e.getMessage(), e);
        }
    }

    private static JsonNode required(JsonNode node, String field) {
        JsonNode value = node == null ? null : node.get(field);
        if (value == null || value.isNull()) {
            throw new IllegalArgumentException("source settings: missing " + field);
        }
        return value;
    }
}
