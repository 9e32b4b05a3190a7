package dev.kvrouter.examples.workload;

/**
 * SplitMix64: a tiny generator whose output is fixed by its published algorithm, so a workload built from a
 * seed is the same on every JDK (the JDK's generators do not promise that). Not thread-safe; one per builder.
 */
final class Rng {

  private static final long GOLDEN = 0x9E3779B97F4A7C15L;

  private long state;

  Rng(long seed) {
    this.state = seed;
  }

  /** The SplitMix64 finalizer: a bijective 64-bit mix. */
  static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }

  /** A seed derived from several parts (workload seed, kind, indices); order matters. */
  static long derive(long... parts) {
    long h = 0x6C6F616467656E31L;
    for (long p : parts) {
      h = mix(h ^ mix(p + GOLDEN));
    }
    return h;
  }

  long nextLong() {
    state += GOLDEN;
    return mix(state);
  }

  /** Uniform in [0, 1). */
  double nextDouble() {
    return (nextLong() >>> 11) * 0x1.0p-53;
  }

  /** Uniform in [0, bound); the modulo bias is below 2^-40 for the bounds used here. */
  int nextInt(int bound) {
    if (bound <= 0) {
      throw new IllegalArgumentException("bound must be positive: " + bound);
    }
    return (int) ((nextLong() >>> 1) % bound);
  }

  /** Uniform in [min, max], both inclusive. */
  int nextInt(int min, int max) {
    return min + nextInt(max - min + 1);
  }

  /** Standard normal (Box-Muller, one of the pair; the generator's output stays defined by SplitMix64). */
  double nextGaussian() {
    double u = 1.0 - nextDouble();
    double v = nextDouble();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /** Exponentially distributed with the given mean (inter-arrival times of a Poisson process). */
  double nextExponential(double mean) {
    return -mean * Math.log(1.0 - nextDouble());
  }
}
