package dev.kvrouter.extproc.routing;

import dev.kvrouter.index.WorkerId;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The router's own policy: lowest {@link CostModel} cost, so cache savings and queueing are weighed in one
 * number. Ties go to the least-loaded worker, then to the one this policy chose least recently, then at random.
 * The second rule matters for a prompt no worker holds on an idle fleet: every worker ties, and a random pick
 * leaves some workers holding several of the fleet's shared prefixes and others none (measured through Envoy:
 * 16 system prompts over 8 workers, one worker got no request at all); least recently chosen deals new prefixes
 * out like round-robin. With a temperature above zero it samples
 * (softmax over normalised costs) instead of taking the argmin. With the imbalance gate on, a fleet whose
 * in-flight counts are spread beyond both thresholds goes to the least-loaded worker first (SGLang's rule).
 * With {@code bounded_load} c set, a worker already running its bound of in-flight requests (c times its weight
 * share of the fleet's, the new request included, rounded up: consistent hashing with bounded loads, Mirrokni et
 * al.) is skipped; the lowest cost among the rest wins (reason {@code bounded_load} when the skipped worker was
 * the cheapest). Unlike the gate, the cost still picks among the workers left, and the bound scales with the load
 * instead of waiting for an absolute spread (docs/routing.md has what it costs in cache).
 * Without block hashes every overlap is zero and the same cost is a pure load balance (reason
 * {@code load_only}).
 */
public final class KvAwarePolicy implements RoutingPolicy {

  public static final String NAME = "kv_aware";

  /** Sequence number of this policy's last choice of each worker; bounded by the fleet (stale entries pruned). */
  private final ConcurrentHashMap<WorkerId, Long> lastChosen = new ConcurrentHashMap<>();
  private final AtomicLong sequence = new AtomicLong();

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
    List<Candidate> pool = w.boundedLoad() > 0 && cs.size() > 1 ? withinBound(cs, w.boundedLoad()) : cs;
    if (w.temperature() > 0) {
      return new Choice(Selection.softmax(pool, Candidate::cost, w.temperature(), s.rng()),
          s.hasPrompt() ? "softmax" : "load_only");
    }
    Candidate c = Selection.argmin(pool, Candidate::cost, Candidate::loadCost,
        x -> lastChosen.getOrDefault(x.id(), 0L), s.rng());
    remember(c, cs);
    if (pool != cs && cheapest(cs) < c.cost()) {
      return new Choice(c, "bounded_load");
    }
    return new Choice(c, s.hasPrompt() ? "lowest_cost" : "load_only");
  }

  /**
   * The candidates under their bound: {@code requests < ceil(c x (total + 1) x weight / total weight)}. The
   * least-loaded worker relative to its weight is always under it (c >= 1), so the result is never empty; the
   * list itself when nobody is over, so the common case allocates nothing.
   */
  static List<Candidate> withinBound(List<Candidate> cs, double c) {
    long total = 0;
    long weights = 0;
    for (int i = 0; i < cs.size(); i++) {
      total += cs.get(i).load().requests();
      weights += Math.max(1, cs.get(i).worker().weight());
    }
    List<Candidate> under = null;
    for (int i = 0; i < cs.size(); i++) {
      Candidate x = cs.get(i);
      boolean over = x.load().requests() >= bound(c, total, Math.max(1, x.worker().weight()), weights);
      if (over && under == null) {
        under = new ArrayList<>(cs.subList(0, i));
      } else if (!over && under != null) {
        under.add(x);
      }
    }
    return under == null || under.isEmpty() ? cs : under;
  }

  /** Mirrokni et al.'s capacity of one bin: {@code ceil(c x (m + 1) x weight / total weight)}. */
  static long bound(double c, long inFlight, long weight, long totalWeight) {
    return (long) Math.ceil(c * (inFlight + 1) * weight / (double) totalWeight);
  }

  private static double cheapest(List<Candidate> cs) {
    double min = Double.POSITIVE_INFINITY;
    for (int i = 0; i < cs.size(); i++) {
      min = Math.min(min, cs.get(i).cost());
    }
    return min;
  }

  private void remember(Candidate chosen, List<Candidate> cs) {
    lastChosen.put(chosen.id(), sequence.incrementAndGet());
    if (lastChosen.size() > 2 * cs.size() + 64) { // workers that left: forget them, keep the map fleet-sized
      Set<WorkerId> live = new HashSet<>();
      cs.forEach(x -> live.add(x.id()));
      lastChosen.keySet().retainAll(live);
    }
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
