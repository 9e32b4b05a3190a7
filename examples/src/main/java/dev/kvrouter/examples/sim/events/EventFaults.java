package dev.kvrouter.examples.sim.events;

/**
 * Faults injected on a worker's event plane, to measure what stale or missing events cost the router. The
 * semantics follow {@code KvEventPublisher}'s fault hooks, so real and virtual workers fail the same way.
 *
 * @param dropRate probability that a batch is numbered but never sent (the subscriber sees a sequence gap, as
 *     with a ZMQ high-water-mark drop; replay can recover it), in [0, 1]
 * @param delayMillis extra delay before each batch is sent (order kept)
 * @param reorderRate probability that a batch is held and sent after the next one, in [0, 1]
 * @param stopped when true batches are numbered but not sent (a stalled stream: silence, then a gap)
 */
public record EventFaults(double dropRate, long delayMillis, double reorderRate, boolean stopped) {

  public static final EventFaults NONE = new EventFaults(0, 0, 0, false);

  /** The longest delay a fault may put on a batch: an hour. */
  public static final long MAX_DELAY_MILLIS = 3_600_000;

  public EventFaults {
    if (!(dropRate >= 0 && dropRate <= 1) || !(reorderRate >= 0 && reorderRate <= 1)) {
      throw new IllegalArgumentException("dropRate and reorderRate must be in [0, 1]");
    }
    if (delayMillis < 0 || delayMillis > MAX_DELAY_MILLIS) {
      throw new IllegalArgumentException("delayMillis must be in [0, " + MAX_DELAY_MILLIS + "]");
    }
  }
}
