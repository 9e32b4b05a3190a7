package dev.kvrouter.examples.workload;

import java.util.Locale;

/** How synthetic arrivals are spaced at a given mean rate. */
public enum Arrival {
  /** Exponential gaps: a Poisson process, the usual open-loop model of independent users. */
  POISSON,
  /** Constant gaps: the same mean rate without burstiness, handy for timing tests. */
  UNIFORM;

  public static Arrival parse(String s) {
    return switch (s.trim().toLowerCase(Locale.ROOT)) {
      case "poisson" -> POISSON;
      case "uniform", "constant" -> UNIFORM;
      default -> throw new IllegalArgumentException("arrival must be poisson or uniform, was " + s);
    };
  }

  /** The gap to the next arrival, in microseconds, at {@code ratePerSecond} on average. */
  long nextGapMicros(Rng rng, double ratePerSecond) {
    if (!(ratePerSecond > 0)) {
      throw new IllegalArgumentException("rate must be positive, was " + ratePerSecond);
    }
    double mean = 1e6 / ratePerSecond;
    return Math.round(this == POISSON ? rng.nextExponential(mean) : mean);
  }
}
