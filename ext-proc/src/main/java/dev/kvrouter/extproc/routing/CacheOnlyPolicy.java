package dev.kvrouter.extproc.routing;

/**
 * Baseline: the worker with the largest (tier-weighted) overlap, no load term at all, ties at random. This is
 * the hot-spot maker the cost model exists to avoid; it is here to measure that.
 */
public final class CacheOnlyPolicy implements RoutingPolicy {

  public static final String NAME = "cache_only";

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public Choice choose(Scoring s) {
    Candidate c = Selection.argmin(s.candidates(), x -> -x.creditBlocks(), x -> 0, s.rng());
    return new Choice(c, c.creditBlocks() > 0 ? "max_overlap" : "no_overlap");
  }
}
