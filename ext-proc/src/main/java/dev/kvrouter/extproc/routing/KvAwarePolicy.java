package dev.kvrouter.extproc.routing;

import java.util.List;

/**
 * The router's own policy: lowest {@link CostModel} cost, so cache savings and queueing are weighed in one
 * number. Ties go to the least-loaded worker, then at random. With a temperature above zero it samples
 * (softmax over normalised costs) instead of taking the argmin. With the imbalance gate on, a fleet whose
 * in-flight counts are spread beyond both thresholds goes to the least-loaded worker first (SGLang's rule).
 * Without block hashes every overlap is zero and the same cost is a pure load balance (reason
 * {@code load_only}).
 */
public final class KvAwarePolicy implements RoutingPolicy {

  public static final String NAME = "kv_aware";

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public Choice choose(Scoring s) {
    Weights w = s.weights();
    List<Candidate> cs = s.candidates();
    if (w.imbalanceGate() && cs.size() > 1 && imbalanced(cs, w)) {
      return new Choice(Selection.argmin(cs, c -> c.load().requests(), Candidate::cost, s.rng()), "imbalance_gate");
    }
    if (w.temperature() > 0) {
      return new Choice(Selection.softmax(cs, Candidate::cost, w.temperature(), s.rng()),
          s.hasPrompt() ? "softmax" : "load_only");
    }
    return new Choice(Selection.argmin(cs, Candidate::cost, Candidate::loadCost, s.rng()),
        s.hasPrompt() ? "lowest_cost" : "load_only");
  }

  static boolean imbalanced(List<Candidate> cs, Weights w) {
    long min = Long.MAX_VALUE;
    long max = Long.MIN_VALUE;
    for (int i = 0; i < cs.size(); i++) {
      long r = cs.get(i).load().requests();
      min = Math.min(min, r);
      max = Math.max(max, r);
    }
    return max - min > w.imbalanceAbs() && max > w.imbalanceRel() * min;
  }
}
