package dev.driftwarden.flink;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Base64;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Command-line harness of {@link EventTimeRules} for the cross-language test ({@code tests/test_event_time_java.py}).
 *
 * <pre>
 * EventTimeDump WINDOW_MS OUT_OF_ORDERNESS_MS MAX_FUTURE_SKEW_MS   &lt; records.jsonl
 * </pre>
 *
 * Each stdin line is a record {@code {"value": base64, "topic", "partition", "offset", "timestamp"}} or
 * the job's watermark {@code {"watermark": ms}}. Prints one line per record, in order: the reason it
 * is turned away ({@code envelope}, {@code future}, {@code late}) or {@code -} when it goes to its window.
 */
public final class EventTimeDump {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private EventTimeDump() {}

    public static void main(String[] args) throws IOException {
        if (args.length != 3) {
            System.err.println("usage: EventTimeDump WINDOW_MS OUT_OF_ORDERNESS_MS MAX_FUTURE_SKEW_MS < records.jsonl");
            System.exit(2);
        }
        EventTimeRules rules = new EventTimeRules(Long.parseLong(args[0]), Long.parseLong(args[1]),
                Long.parseLong(args[2]), "envelope", "future", "late");
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            JsonNode node = MAPPER.readTree(line);
            if (node.has("watermark")) {
                rules.advanceWatermark(node.get("watermark").asLong());
                continue;
            }
            KafkaRecord record = new KafkaRecord();
            record.value = Base64.getDecoder().decode(node.get("value").asText());
            record.topic = node.get("topic").asText();
            record.partition = node.get("partition").asInt();
            record.offset = node.get("offset").asLong();
            record.timestamp = node.get("timestamp").asLong();
            String reason = rules.turnedAway(record);
            out.println(reason == null ? "-" : reason);
        }
        out.flush();
    }
}
