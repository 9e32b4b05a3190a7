package dev.kvrouter.examples.sim.testing;

/** Deterministic token sequences for tests. */
public final class Tokens {

  private Tokens() {}

  /** {@code n} tokens starting at {@code start}, stepping by 7 (distinct, non-negative). */
  public static int[] seq(int n, int start) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = start + i * 7;
    }
    return t;
  }

  /** {@code a} followed by {@code b}. */
  public static int[] concat(int[] a, int[] b) {
    int[] out = java.util.Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }
}
