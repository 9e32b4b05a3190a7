package dev.kvrouter.extproc.routing;

/**
 * How hot the prefix a request would reuse is: the recent share of requests (all of them, those reusing nothing
 * too) whose held prefix ends in the same block, for the few prefixes hot enough to matter (Space-Saving over
 * {@link #SLOTS} counters, exponentially decayed like {@link EvictionPressure}). A prefix taking more than one
 * worker's share of the requests needs copies whatever the fleet's memory pressure: its holder cannot serve it
 * alone.
 *
 * <p>The share read is the guaranteed part of a counter: its count less the count it inherited when its prefix took
 * the slot (Space-Saving's error, kept per slot and decayed with it). Read whole, with more prefixes in use than
 * slots, a newcomer's inherited count was read as its own: prefixes with 0.5% of the requests each read about 2%,
 * which lifted the eviction charge ({@link EvictionPressure.Reading#chargedShare}) of prefixes nowhere near one
 * worker's share. A prefix that is hot keeps its slot, and what it inherited decays away.
 *
 * <p>Counts are stored inflated by a global factor that grows per request (so decay costs nothing per entry) and
 * renormalised before the factor overflows. One scan of 64 entries per request. Not thread-safe: its {@link
 * EvictionPressure} is used only under the {@link Router}'s decision lock.
 */
final class PrefixHeat {

  static final int SLOTS = 64;

  private final long[] keys = new long[SLOTS];
  private final double[] counts = new double[SLOTS];
  /** The count each slot's prefix inherited when it took the slot: an upper bound on what is not its own. */
  private final double[] errors = new double[SLOTS];
  private double total;
  private double inflation = 1;

  /** A request that reuses no prefix: it counts in the total only. */
  void skip() {
    tick();
  }

  /** The share of recent requests on {@code key} before this one (at least that), then records it. */
  double observe(long key) {
    int at = -1;
    int min = 0;
    for (int i = 0; i < SLOTS; i++) {
      if (counts[i] > 0 && keys[i] == key) {
        at = i;
        break;
      }
      if (counts[i] < counts[min]) {
        min = i;
      }
    }
    double before = at >= 0 && total > 0 ? Math.max(0, counts[at] - errors[at]) / total : 0;
    if (at < 0) {
      at = min;
      keys[at] = key; // Space-Saving: the newcomer inherits the smallest count, all of it possibly others'
      errors[at] = counts[at];
    }
    tick();
    counts[at] += inflation;
    return before;
  }

  /** One more request: earlier ones decay (the factor grows) and it counts in the total. */
  private void tick() {
    inflation /= EvictionPressure.DECAY;
    total += inflation;
    if (inflation > 1e100) {
      for (int i = 0; i < SLOTS; i++) {
        counts[i] /= inflation;
        errors[i] /= inflation;
      }
      total /= inflation;
      inflation = 1;
    }
  }
}
