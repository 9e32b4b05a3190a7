package dev.kvrouter.examples.sim.events;

import java.util.List;
import java.util.Objects;

/**
 * The events of one engine step, as vLLM publishes them ({@code KVEventBatch}): at most one batch per step,
 * and only when the step produced events.
 *
 * @param ts wall-clock seconds when the batch was taken (virtual in virtual time)
 * @param events the events, in the order the cache produced them
 * @param dpRank the data-parallel rank of the engine
 */
public record KvEventBatch(double ts, List<KvEvent> events, int dpRank) {

  public KvEventBatch {
    events = List.copyOf(Objects.requireNonNull(events, "events"));
  }
}
