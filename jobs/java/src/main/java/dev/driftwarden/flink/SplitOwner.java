package dev.driftwarden.flink;

/**
 * The source reader a Kafka partition is assigned to when the enumerator discovers it: the rule of
 * the connector's {@code KafkaSourceEnumerator.getSplitOwner} (tests/test_caught_up_idleness.py
 * compares the two). {@link CaughtUpReader} holds the watermark for a new partition it will own.
 */
public final class SplitOwner {
    private SplitOwner() {}

    /** The index of the reader, of {@code readers}, that reads partition {@code partition} of {@code topic}. */
    public static int of(String topic, int partition, int readers) {
        int startIndex = ((topic.hashCode() * 31) & 0x7FFFFFFF) % readers;
        return (startIndex + partition) % readers;
    }
}
