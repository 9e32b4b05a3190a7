package dev.kvrouter.extproc.routing;

/**
 * Baseline: the worker with the least load in the cost model's units (queued prefill, held blocks, weighted
 * requests), ignoring every cache overlap. Ties by fewer in-flight requests, then at random.
 */
public final class LeastLoadPolicy implements RoutingPolicy {

  public static final String NAME = "least_load";

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public Choice choose(Scoring s) {
    return new Choice(pick(s), "least_load");
  }

  static Candidate pick(Scoring s) {
    return Selection.argmin(s.candidates(), Candidate::loadCost, c -> c.load().requests(), s.rng());
  }
}
