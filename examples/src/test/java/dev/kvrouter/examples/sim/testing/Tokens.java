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

  /** The parts one after another. */
  public static int[] concat(int[]... parts) {
    int n = 0;
    for (int[] p : parts) {
      n += p.length;
    }
    int[] out = new int[n];
    int at = 0;
    for (int[] p : parts) {
      System.arraycopy(p, 0, out, at, p.length);
      at += p.length;
    }
    return out;
  }
}
