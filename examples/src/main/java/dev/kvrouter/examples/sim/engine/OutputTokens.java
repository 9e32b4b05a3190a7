package dev.kvrouter.examples.sim.engine;

/**
 * How the simulated model picks its output: a pure function of the request's output seed and the position, so
 * that the same request produces the same tokens on every worker (like greedy decoding) and runs are
 * reproducible.
 */
@FunctionalInterface
public interface OutputTokens {

  int tokenAt(long outputSeed, int index);

  /** Walks a fixed vocabulary cyclically from a seed-dependent start. */
  static OutputTokens cycling(int[] vocabulary) {
    if (vocabulary.length == 0) {
      throw new IllegalArgumentException("output vocabulary must not be empty");
    }
    int[] v = vocabulary.clone();
    return (seed, index) -> {
      long start = (seed ^ (seed >>> 31)) * 0x9E3779B97F4A7C15L;
      return v[(int) Math.floorMod(start + index, (long) v.length)];
    };
  }

  /** Token ids {@code [first, first + count)}: for token-id-only workers without a tokenizer. */
  static OutputTokens range(int first, int count) {
    int[] v = new int[count];
    for (int i = 0; i < count; i++) {
      v[i] = first + i;
    }
    return cycling(v);
  }
}
