package dev.driftwarden.flink;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.flink.util.Collector;

/**
 * A Kafka record as the drift job's source reads it: the raw value, untouched (a record that is
 * not JSON, or not UTF-8, must reach validation and the dead letters intact), and where it came from.
 * On an Avro topic ({@code source.format: avro}) the envelope is read from the decoded Avro record
 * ({@link ConfluentAvro#envelope}); the raw bytes still go to Python and the dead letters as they came.
 */
public final class KafkaRecord {
    public byte[] value;
    public String topic;
    public int partition;
    public long offset;
    /** The Kafka record's timestamp (epoch ms; -1 when it has none). */
    public long timestamp;
    /** The value's envelope, read once for the watermark and the summaries (not a POJO field: a copy reads it again). */
    private transient Envelope envelope;
    /** How the value maps onto an event (the config's {@code source.envelope}). */
    private transient Envelope.Mapping mapping;
    /** The Confluent wire format's reader on an Avro topic; null on a JSON one. */
    private transient ConfluentAvro avro;

    /** The value's envelope ({@link Envelope}), read on first use; the record owns its bytes, so they are not copied. */
    Envelope envelope() {
        if (envelope == null) {
            Envelope.Mapping map = mapping == null ? Envelope.Mapping.DEFAULT : mapping;
            envelope = avro == null ? Envelope.readOwned(value, map) : avro.envelope(value, map);
        }
        return envelope;
    }

    /** Reads each Kafka record into a {@link KafkaRecord} (nothing parsed here), with the envelope mapping. */
    static final class Deserializer implements KafkaRecordDeserializationSchema<KafkaRecord> {
        private static final long serialVersionUID = 1L;
        private final Envelope.Mapping mapping;
        private final ConfluentAvro avro;

        Deserializer(Envelope.Mapping mapping, ConfluentAvro avro) {
            this.mapping = mapping;
            this.avro = avro;
        }

        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<KafkaRecord> out) {
            KafkaRecord read = new KafkaRecord();
            read.mapping = mapping;
            read.avro = avro;
            read.value = record.value();
            read.topic = record.topic();
            read.partition = record.partition();
            read.offset = record.offset();
            read.timestamp = record.timestamp();
            out.collect(read);
        }

        @Override
        public TypeInformation<KafkaRecord> getProducedType() {
            return TypeInformation.of(KafkaRecord.class);
        }
    }
}
