package dev.kvrouter.extproc.routing;

import java.util.List;
import java.util.function.ToDoubleFunction;
import java.util.function.ToLongFunction;
import java.util.random.RandomGenerator;

/**
 * Picking one candidate by a key: argmin with tie-breaks, softmax sampling, uniform. One pass, no allocation.
 * Values within a relative 1e-9 of each other are ties, so float noise never decides.
 */
public final class Selection {

  static final double EPS = 1e-9;

  private Selection() {}

  static boolean same(double a, double b) {
    return Math.abs(a - b) <= EPS * Math.max(1.0, Math.max(Math.abs(a), Math.abs(b)));
  }

  /**
   * The candidate with the lowest {@code key}; ties by the lowest {@code tie}; remaining ties uniformly at random
   * (reservoir sampling).
   */
  public static Candidate argmin(List<Candidate> cs, ToDoubleFunction<Candidate> key, ToDoubleFunction<Candidate> tie,
      RandomGenerator rng) {
    return argmin(cs, key, tie, c -> 0, rng);
  }

  /** The same with a third key, {@code last}, before the random draw ({@code last} compares exactly). */
  public static Candidate argmin(List<Candidate> cs, ToDoubleFunction<Candidate> key, ToDoubleFunction<Candidate> tie,
      ToLongFunction<Candidate> last, RandomGenerator rng) {
    return argmin(cs, key, tie, last, c -> 0, rng);
  }

  /**
   * The same with a fourth key, {@code then}, after {@code last} and before the random draw (exact too). The
   * exact keys are read only for candidates tied on the first two, so a costly one costs nothing without ties.
   */
  public static Candidate argmin(List<Candidate> cs, ToDoubleFunction<Candidate> key, ToDoubleFunction<Candidate> tie,
      ToLongFunction<Candidate> last, ToLongFunction<Candidate> then, RandomGenerator rng) {
    Candidate best = null;
    double bestKey = 0;
    double bestTie = 0;
    boolean exactRead = false; // bestLast and bestThen read for the current best
    long bestLast = 0;
    long bestThen = 0;
    int ties = 0;
    for (int i = 0; i < cs.size(); i++) {
      Candidate c = cs.get(i);
      double k = key.applyAsDouble(c);
      double t = tie.applyAsDouble(c);
      if (best == null || (!same(k, bestKey) && k < bestKey) || (same(k, bestKey) && !same(t, bestTie) && t < bestTie)) {
        best = c;
        bestKey = k;
        bestTie = t;
        exactRead = false;
        ties = 1;
        continue;
      }
      if (!same(k, bestKey) || !same(t, bestTie)) {
        continue;
      }
      if (!exactRead) {
        bestLast = last.applyAsLong(best);
        bestThen = then.applyAsLong(best);
        exactRead = true;
      }
      long l = last.applyAsLong(c);
      if (l > bestLast) {
        continue;
      }
      long n = then.applyAsLong(c);
      if (l < bestLast || n < bestThen) {
        best = c;
        bestLast = l;
        bestThen = n;
        ties = 1;
      } else if (n == bestThen) {
        ties++;
        if (rng.nextInt(ties) == 0) {
          best = c;
        }
      }
    }
    return best;
  }

  /**
   * Samples with {@code p_i ∝ exp(-(k_i - k_min) / ((k_max - k_min) x temperature))} (Dynamo's router
   * temperature); all keys equal means uniform.
   */
  public static Candidate softmax(List<Candidate> cs, ToDoubleFunction<Candidate> key, double temperature,
      RandomGenerator rng) {
    double min = Double.POSITIVE_INFINITY;
    double max = Double.NEGATIVE_INFINITY;
    for (int i = 0; i < cs.size(); i++) {
      double k = key.applyAsDouble(cs.get(i));
      min = Math.min(min, k);
      max = Math.max(max, k);
    }
    if (same(min, max)) {
      return uniform(cs, rng);
    }
    double scale = (max - min) * temperature;
    double total = 0;
    for (int i = 0; i < cs.size(); i++) {
      total += Math.exp(-(key.applyAsDouble(cs.get(i)) - min) / scale);
    }
    double u = rng.nextDouble() * total;
    for (int i = 0; i < cs.size(); i++) {
      u -= Math.exp(-(key.applyAsDouble(cs.get(i)) - min) / scale);
      if (u < 0) {
        return cs.get(i);
      }
    }
    return cs.get(cs.size() - 1);
  }

  public static Candidate uniform(List<Candidate> cs, RandomGenerator rng) {
    return cs.get(rng.nextInt(cs.size()));
  }
}
