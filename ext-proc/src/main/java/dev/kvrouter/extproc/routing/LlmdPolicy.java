package dev.kvrouter.extproc.routing;

import java.util.List;

/**
 * Anchor baseline: llm-d's endpoint picker in its precise prefix-cache profile (anchors §1.5, §2.1): the weighted
 * sum {@code 3 x prefix + 2 x kv-cache-utilization + 2 x queue}, highest wins, ties at random (its max-score picker
 * shuffles). Each scorer as llm-d computes it:
 *
 * <ul>
 *   <li>prefix: the longest run of leading blocks each worker's KV events show, GPU blocks weighted 1 and CPU blocks
 *       0.8 (its device-tier weights), min-max normalised over the workers that hold any of it (all equal: 1 each);
 *       a worker holding none scores 0. So with two holders the shorter one scores as low as a worker holding
 *       nothing. No speculative entries (optional in llm-d, off by default): the router's predictions do not count;
 *   <li>kv-cache-utilization: {@code 1 - kv_cache_usage_perc} as the load view has it (the scraped fraction, or
 *       this router's in-flight blocks over the worker's capacity when higher: a little fresher than llm-d's);
 *       an unknown usage scores as empty;
 *   <li>queue: {@code (max - waiting) / (max - min)} of {@code num_requests_waiting} over the candidates, as last
 *       scraped; all equal (or unknown): 1 each.
 * </ul>
 *
 * It reads the same load view as every policy (the scrape interval is the router's; llm-d scrapes every 50 ms,
 * {@code routing.scrape.interval_ms: 50} matches it). It is here so the A/B can put our cost beside llm-d's
 * scoring on the same run; it is not meant for production.
 */
public final class LlmdPolicy implements RoutingPolicy {

  public static final String NAME = "llm_d";

  static final double PREFIX_WEIGHT = 3;
  static final double KV_UTILIZATION_WEIGHT = 2;
  static final double QUEUE_WEIGHT = 2;
  static final double CPU_TIER_WEIGHT = 0.8;

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public Choice choose(Scoring s) {
    List<Candidate> cs = s.candidates();
    double minHit = Double.POSITIVE_INFINITY;
    double maxHit = 0;
    long minQ = Long.MAX_VALUE;
    long maxQ = Long.MIN_VALUE;
    for (int i = 0; i < cs.size(); i++) {
      Candidate c = cs.get(i);
      double hit = prefixBlocks(c.overlap());
      if (hit > 0) {
        minHit = Math.min(minHit, hit);
        maxHit = Math.max(maxHit, hit);
      }
      long q = waiting(c);
      minQ = Math.min(minQ, q);
      maxQ = Math.max(maxQ, q);
    }
    double lo = minHit;
    double hi = maxHit;
    long qLo = minQ;
    long qHi = maxQ;
    // Highest score; ties uniformly at random, as its picker's shuffle before sorting.
    Candidate best = Selection.argmin(cs, c -> -score(c, lo, hi, qLo, qHi), c -> 0, s.rng());
    return new Choice(best, s.hasPrompt() && maxHit > 0 ? "max_score" : "load_only");
  }

  static double score(Candidate c, double minHit, double maxHit, long minQ, long maxQ) {
    double hit = prefixBlocks(c.overlap());
    double prefix = hit <= 0 ? 0 : maxHit == minHit ? 1 : (hit - minHit) / (maxHit - minHit);
    double usage = c.load().kvUsage();
    double kv = Double.isNaN(usage) ? 1 : 1 - Math.min(1, Math.max(0, usage));
    double queue = maxQ == minQ ? 1 : (double) (maxQ - waiting(c)) / (maxQ - minQ);
    return PREFIX_WEIGHT * prefix + KV_UTILIZATION_WEIGHT * kv + QUEUE_WEIGHT * queue;
  }

  /** The tier-weighted longest leading run the worker's events show. */
  static double prefixBlocks(Overlap o) {
    return o.gpu() + CPU_TIER_WEIGHT * o.cpu();
  }

  private static long waiting(Candidate c) {
    return Math.max(0, c.load().waiting());
  }
}
