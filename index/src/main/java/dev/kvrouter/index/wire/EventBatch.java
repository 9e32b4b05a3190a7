package dev.kvrouter.index.wire;

import java.util.List;
import java.util.Objects;

/**
 * One published message payload: {@code [ts, events, data_parallel_rank]}.
 *
 * @param ts engine wall-clock time in seconds since the epoch ({@code time.time()})
 * @param events decoded events in engine order (GPU pool events before connector events)
 * @param dataParallelRank the publisher's DP rank, or {@code null} (nil on the wire, or a 2-element batch)
 * @param skippedEvents events the decoder skipped because their tag is unknown (a newer engine's event type)
 */
public record EventBatch(double ts, List<KvEvent> events, Integer dataParallelRank, int skippedEvents) {

  public EventBatch {
    Objects.requireNonNull(events, "events");
  }

  public static EventBatch of(double ts, Integer dpRank, List<KvEvent> events) {
    return new EventBatch(ts, List.copyOf(events), dpRank, 0);
  }
}
