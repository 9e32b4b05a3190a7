package dev.kvrouter.extproc.routing;

import dev.kvrouter.index.Mix;
import dev.kvrouter.index.WorkerId;
import java.util.ArrayList;
import java.util.List;

/**
 * The router's own policy: lowest {@link CostModel} cost, so cache savings and queueing are weighed in one
 * number. Ties go to the least-loaded worker, then to the one given a request least recently, then to the one
 * a hash of the prompt's first block and the worker's identity ranks first (random without a prompt). The second
 * rule matters for a prompt no worker holds on an idle fleet: every worker ties, and a random pick leaves some
 * workers holding several of the fleet's shared prefixes and others none (measured through Envoy: 16 system
 * prompts over 8 workers, one worker got no request at all); least recently given deals new prefixes out like
 * round-robin. Both rules read only what every router replica knows alike (the ledger's turns are shared with
 * the reservations), so replicas that route best-of-N siblings at the same moment break the tie the same way
 * (with a per-replica order and a random draw, two synced replicas split a third of best-of-4's groups in virtual
 * time). With a temperature above zero it samples
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
    long first = firstBlock(s);
    Candidate c = Selection.argmin(pool, Candidate::cost, Candidate::loadCost, Candidate::lastTurn,
        first == 0 ? x -> 0 : x -> rank(first, x.id()), s.rng());
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
    long total = Candidate.totalRequests(cs);
    long weights = Candidate.totalWeight(cs);
    List<Candidate> under = null;
    for (int i = 0; i < cs.size(); i++) {
      Candidate x = cs.get(i);
      boolean over = x.load().requests() >= bound(c, total, x.weight(), weights);
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

  /** The prompt's first block hash, or 0 when the request has none (short, or not tokenized). */
  private static long firstBlock(Scoring s) {
    if (!s.hasPrompt() || s.request() == null || s.request().prompt() == null) {
      return 0;
    }
    long[] hashes = s.request().prompt().blockHashes();
    return hashes.length == 0 ? 0 : hashes[0];
  }

  /**
   * Rendezvous hashing's rank of a worker for a prompt: the same on every replica (String.hashCode is specified),
   * spread evenly over workers across prompts.
   */
  static long rank(long firstBlock, WorkerId id) {
    return Mix.mix(firstBlock ^ Mix.mix(id.name().hashCode() * 31L + id.dpRank()));
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
