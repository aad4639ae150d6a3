package dev.driftwarden.flink;

import java.nio.charset.StandardCharsets;
import java.util.zip.CRC32;

/** The hash functions of sketches/FORMAT.md ("Hashing"), shared with the Python implementation. */
public final class Hashing {
    private static final long GOLDEN = 0x9E3779B97F4A7C15L;

    private Hashing() {}

    /** SplitMix64's finaliser. */
    public static long mix64(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /** CRC-32 (zlib) of the UTF-8 bytes of {@code s}, as an unsigned 32-bit value. */
    public static long crc32(String s) {
        CRC32 crc = new CRC32();
        crc.update(s.getBytes(StandardCharsets.UTF_8));
        return crc.getValue();
    }

    /** FNV-1a, 64-bit, of {@code bytes}. */
    public static long fnv1a64(byte[] bytes) {
        long h = 0xCBF29CE484222325L;
        for (byte b : bytes) {
            h = (h ^ (b & 0xFF)) * 0x100000001B3L;
        }
        return h;
    }

    /** FNV-1a, 64-bit, of the UTF-8 bytes of {@code s}, without encoding it when it is ASCII. */
    static long fnv1a64(String s) {
        long h = 0xCBF29CE484222325L;
        for (int i = 0, len = s.length(); i < len; i++) {
            char c = s.charAt(i);
            if (c >= 0x80) {
                return fnv1a64(s.getBytes(StandardCharsets.UTF_8));
            }
            h = (h ^ c) * 0x100000001B3L;
        }
        return h;
    }

    /** A categorical value's hash, in [0, 2^63). */
    public static long valueHash(String value) {
        return mix64(fnv1a64(value)) >>> 1;
    }

    /** The seed of a window: crc32(model + "|" + decimal(start)). */
    public static long windowSeed(String model, long windowStartMs) {
        return crc32(model + "|" + windowStartMs);
    }

    /** An event's key in [0, 2^63), from its window's seed, crc32(topic), partition and offset. */
    public static long eventKey(long seed, long topicCrc, long partition, long offset) {
        return mix64(mix64(mix64(seed * GOLDEN + topicCrc) + partition) + offset) >>> 1;
    }

    /** {@link #crc32} of a topic, remembering the last one (a task reads few topics, record after record). */
    static final class TopicCrc {
        private String last;
        private long crc;

        long of(String topic) {
            if (!topic.equals(last)) {
                crc = crc32(topic);
                last = topic;
            }
            return crc;
        }
    }
}
