package dev.driftwarden.flink;

import org.apache.flink.table.functions.ScalarFunction;

/** The {@code model} field of a raw event (null when absent, not a string, or the JSON is malformed). */
public class EventModel extends ScalarFunction {
    public String eval(byte[] value) {
        return Envelope.parse(value).model;
    }
}
