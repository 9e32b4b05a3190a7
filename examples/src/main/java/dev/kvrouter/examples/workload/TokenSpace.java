package dev.kvrouter.examples.workload;

/**
 * The token ids a workload draws from: {@code [minId, maxIdExclusive)}. The default, [1000, 128000), avoids the
 * special and control tokens at the bottom of real vocabularies and stays inside both Llama 3 (128,256 ids) and
 * Qwen 3 (151,669) vocabularies, so the same prompts are valid for either model.
 */
public record TokenSpace(int minId, int maxIdExclusive) {

  public static final TokenSpace DEFAULT = new TokenSpace(1000, 128_000);

  public TokenSpace {
    if (minId < 0 || maxIdExclusive <= minId) {
      throw new IllegalArgumentException("token range must satisfy 0 <= min < max, was [" + minId + ", "
          + maxIdExclusive + ")");
    }
  }

  /** Parses {@code "1000..128000"} (max exclusive). */
  public static TokenSpace parse(String s) {
    IntRange r = IntRange.parse(s);
    return new TokenSpace(r.min(), r.max());
  }

  /** Token {@code pos} of the segment named {@code seed}: random access, so a segment never needs storing. */
  public int token(long seed, int pos) {
    long z = Rng.mix(seed + (pos + 1) * 0x9E3779B97F4A7C15L);
    // Lemire's multiply-shift maps the top 32 bits onto the range without a division
    return minId + (int) (((z >>> 32) * (maxIdExclusive - minId)) >>> 32);
  }

  /** Writes the segment's tokens into {@code dst} at {@code off}; returns the offset after them. */
  public int fill(Segment s, int[] dst, int off) {
    for (int i = 0; i < s.length(); i++) {
      dst[off + i] = token(s.seed(), i);
    }
    return off + s.length();
  }

  public int[] tokens(Segment s) {
    int[] t = new int[s.length()];
    fill(s, t, 0);
    return t;
  }

  @Override
  public String toString() {
    return minId + ".." + maxIdExclusive;
  }
}
