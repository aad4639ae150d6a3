package dev.driftwarden.flink;

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;
import java.util.function.Supplier;
import java.util.regex.Pattern;

import org.apache.flink.connector.kafka.source.split.KafkaPartitionSplit;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.admin.Admin;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.admin.TopicDescription;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.IsolationLevel;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads, every {@link #CHECK_INTERVAL_MS}, where each of a source reader's partitions ends (and,
 * for {@link CaughtUpReader}'s holds, which partitions the subscribed topics have), on a thread of
 * its own with a Kafka admin client of its own: one ListOffsets request per check for all the
 * reader's partitions. Answers are handed to the source task as {@link Check}s; an answer that
 * cannot be had in time (the broker away) is {@link PartitionProgress#UNKNOWN}, never "caught up".
 */
final class PartitionEnds implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(PartitionEnds.class);
    /** How often the ends are read: short against out-of-orderness, so a partition added is held for in time. */
    static final long CHECK_INTERVAL_MS = 500;
    /** The longest one check may wait for the broker before its answers count as unknown. */
    static final long ANSWER_TIMEOUT_MS = 2_000;

    /** A partition being read: its split id, topic partition and progress. */
    record Watched(String splitId, TopicPartition partition, PartitionProgress progress) {}

    /**
     * One check's answers, taken at {@code nanos}: per split id, {position read, offset it stands
     * for, end or UNKNOWN}; and the subscribed topics' partitions (null: not asked, or no answer).
     */
    record Check(long nanos, Map<String, long[]> ends, Set<TopicPartition> partitions) {}

    private final Properties connection;
    private final String groupId;
    private final List<String> topics;
    private final Pattern topicPattern;
    private final boolean listPartitions;
    private Admin admin;
    private ScheduledExecutorService checker;

    /**
     * Checks with the source's connection properties; {@code groupId} resolves a split that starts
     * at the group's committed offset; the topics (or the pattern) are listed when {@code listPartitions}.
     */
    PartitionEnds(Properties connection, String groupId, List<String> topics, Pattern topicPattern,
                  boolean listPartitions) {
        this.connection = connection;
        this.groupId = groupId;
        this.topics = topics;
        this.topicPattern = topicPattern;
        this.listPartitions = listPartitions;
    }

    /** Starts checking the partitions {@code watched} gives, handing each check to {@code onCheck}. */
    void start(String clientId, Supplier<Collection<Watched>> watched, Consumer<Check> onCheck) {
        Properties props = new Properties();
        props.putAll(connection);
        props.setProperty(AdminClientConfig.CLIENT_ID_CONFIG, clientId);
        props.setProperty(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, String.valueOf(ANSWER_TIMEOUT_MS));
        props.setProperty(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, String.valueOf(ANSWER_TIMEOUT_MS));
        admin = Admin.create(props);
        checker = Executors.newSingleThreadScheduledExecutor(runnable -> {
            Thread thread = new Thread(runnable, clientId);
            thread.setDaemon(true);
            return thread;
        });
        checker.scheduleWithFixedDelay(() -> {
            try {
                onCheck.accept(check(watched.get()));
            } catch (RuntimeException e) {  // a failed round must not end the schedule
                LOG.warn("checking partition ends failed; the partitions count as behind", e);
            }
        }, CHECK_INTERVAL_MS, CHECK_INTERVAL_MS, TimeUnit.MILLISECONDS);
    }

    /** One round: every watched partition's position (its starting sentinel resolved) and end. */
    Check check(Collection<Watched> watched) {
        Map<TopicPartition, Long> ends = offsets(watched, OffsetSpec.latest());
        Map<String, long[]> answers = new HashMap<>();
        Map<TopicPartition, Long> earliest = null;
        for (Watched w : watched) {
            long observed = w.progress().position();
            long effective = observed;
            if (observed == KafkaPartitionSplit.EARLIEST_OFFSET) {
                earliest = earliest != null ? earliest : offsets(watched, OffsetSpec.earliest());
                effective = earliest.getOrDefault(w.partition(), PartitionProgress.UNKNOWN);
            } else if (observed == KafkaPartitionSplit.LATEST_OFFSET) {
                effective = ends.getOrDefault(w.partition(), PartitionProgress.UNKNOWN);
                resolveOnce(w, observed, effective);
            } else if (observed == KafkaPartitionSplit.COMMITTED_OFFSET) {
                effective = committed(w.partition());
                resolveOnce(w, observed, effective);
            }
            answers.put(w.splitId(), new long[] {observed, effective, ends.getOrDefault(w.partition(), PartitionProgress.UNKNOWN)});
        }
        return new Check(System.nanoTime(), answers, listPartitions ? partitions() : null);
    }

    private static void resolveOnce(Watched w, long sentinel, long offset) {
        if (offset >= 0) {
            w.progress().resolve(sentinel, offset);
        }
    }

    /** Each watched partition's offset by {@code spec}, as the source's consumer reads (uncommitted records included). */
    private Map<TopicPartition, Long> offsets(Collection<Watched> watched, OffsetSpec spec) {
        Map<TopicPartition, OffsetSpec> request = new HashMap<>();
        watched.forEach(w -> request.put(w.partition(), spec));
        Map<TopicPartition, Long> out = new HashMap<>();
        if (request.isEmpty()) {
            return out;
        }
        try {
            Map<TopicPartition, ListOffsetsResultInfo> answers = admin.listOffsets(request,
                    new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED)).all().get(ANSWER_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            answers.forEach((partition, info) -> out.put(partition, info.offset()));
        } catch (ExecutionException | TimeoutException e) {
            LOG.debug("no answer for partition offsets: {}", e.toString());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return out;
    }

    /** The group's committed offset of {@code partition}; the earliest when it has none (as the source starts). */
    private long committed(TopicPartition partition) {
        try {
            Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(groupId)
                    .partitionsToOffsetAndMetadata().get(ANSWER_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            OffsetAndMetadata committed = offsets.get(partition);
            if (committed != null) {
                return committed.offset();
            }
            ListOffsetsResultInfo earliest = admin.listOffsets(Map.of(partition, OffsetSpec.earliest()))
                    .partitionResult(partition).get(ANSWER_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            return earliest.offset();
        } catch (ExecutionException | TimeoutException e) {
            return PartitionProgress.UNKNOWN;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return PartitionProgress.UNKNOWN;
        }
    }

    /** Every partition of the subscribed topics (or of those matching the pattern); null without an answer. */
    private Set<TopicPartition> partitions() {
        try {
            Collection<String> names = topics;
            if (topicPattern != null) {
                names = admin.listTopics().names().get(ANSWER_TIMEOUT_MS, TimeUnit.MILLISECONDS).stream()
                        .filter(name -> topicPattern.matcher(name).matches()).toList();
            }
            Map<String, TopicDescription> described = admin.describeTopics(names).allTopicNames()
                    .get(ANSWER_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            Set<TopicPartition> out = new HashSet<>();
            described.forEach((name, topic) -> topic.partitions().forEach(p -> out.add(new TopicPartition(name, p.partition()))));
            return out;
        } catch (ExecutionException | TimeoutException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    @Override
    public void close() {
        if (checker != null) {
            checker.shutdownNow();
        }
        if (admin != null) {
            admin.close(Duration.ofSeconds(1));
        }
    }
}
