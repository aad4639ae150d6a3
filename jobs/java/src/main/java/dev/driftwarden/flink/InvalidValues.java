package dev.driftwarden.flink;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * One feature's invalid values in a window (values of the wrong type, kept out of its sketch): how many, and
 * the {@link #EXAMPLES} of smallest event key with their reason, a preview of the value and where the record was.
 * The twin of {@code pipeline/invalid.py}; merged exactly, whatever the order (sketches/FORMAT.md, kind 17's trailer).
 */
final class InvalidValues {
    static final int EXAMPLES = 5;

    /** One example: its record's event key, the reason, a preview of the value, the record's coordinates. */
    record Example(long key, String reason, String value, String where) {}

    long count;
    List<Example> examples = new ArrayList<>(0);

    /** Counts one invalid value. */
    void add(long key, String reason, String value, String where) {
        count++;
        if (examples.size() < EXAMPLES || key < examples.get(examples.size() - 1).key()) {
            examples.add(new Example(key, reason, value, where));
            keepSmallest();
        }
    }

    /** Adds another part's invalid values of the same feature. */
    void merge(InvalidValues other) {
        count += other.count;
        examples.addAll(other.examples);
        keepSmallest();
    }

    private void keepSmallest() {
        examples.sort(Comparator.comparingLong(Example::key));  // stable: equal keys are one record's
        while (examples.size() > EXAMPLES) {
            examples.remove(examples.size() - 1);
        }
    }

    /** A record's coordinates as an example names them (pipeline.invalid.where_text). */
    static String where(String topic, long partition, long offset) {
        return topic + ":" + partition + ":" + offset;
    }
}
