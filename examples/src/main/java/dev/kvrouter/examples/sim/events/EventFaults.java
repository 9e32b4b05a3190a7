package dev.kvrouter.examples.sim.events;

/**
 * Faults injected on a worker's event plane, to measure what stale or missing events cost the router.
 *
 * @param dropRate probability that a sequenced batch is lost (the subscriber sees a sequence gap, as with a ZMQ
 *     high-water-mark drop), in [0, 1]
 * @param delayMillis extra delay before each batch is delivered
 * @param reorderRate probability that a batch is held back and delivered after the next one, in [0, 1]
 * @param stopped when true nothing is published at all (a hung publisher: silence, no gap until it resumes)
 */
public record EventFaults(double dropRate, long delayMillis, double reorderRate, boolean stopped) {

  public static final EventFaults NONE = new EventFaults(0, 0, 0, false);

  public EventFaults {
    if (!(dropRate >= 0 && dropRate <= 1) || !(reorderRate >= 0 && reorderRate <= 1)) {
      throw new IllegalArgumentException("dropRate and reorderRate must be in [0, 1]");
    }
    if (delayMillis < 0) {
      throw new IllegalArgumentException("delayMillis must be >= 0");
    }
  }
}
