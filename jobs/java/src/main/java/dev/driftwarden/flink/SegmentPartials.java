package dev.driftwarden.flink;

import java.util.HashMap;
import java.util.Map;

/**
 * {@link MergeSegments}' accumulator: the bytes of each segment's partial summary of one
 * (model, window), merged so far, by segment index (-1: the model has no segments). An object in
 * the window's state (a RAW type with {@link SegmentPartialsSerializer}): a partial added is one
 * map entry, not a copy of every segment's bytes as a MAP accumulator's conversions were.
 */
public final class SegmentPartials {
    final Map<Integer, byte[]> parts = new HashMap<>();

    /** A copy: the same segments, each segment's bytes shared (they are never changed in place). */
    SegmentPartials copy() {
        SegmentPartials copy = new SegmentPartials();
        copy.parts.putAll(parts);
        return copy;
    }
}
