package dev.kvrouter.examples.workload;

/** A length drawn uniformly from {@code [min, max]} (both inclusive); {@code min == max} is a fixed length. */
public record IntRange(int min, int max) {

  public IntRange {
    if (min < 0 || max < min) {
      throw new IllegalArgumentException("range must satisfy 0 <= min <= max, was " + min + ".." + max);
    }
  }

  public static IntRange fixed(int v) {
    return new IntRange(v, v);
  }

  /** Parses {@code "64"} or {@code "32..128"}. */
  public static IntRange parse(String s) {
    String t = s.trim();
    int dots = t.indexOf("..");
    try {
      if (dots < 0) {
        return fixed(Integer.parseInt(t));
      }
      return new IntRange(Integer.parseInt(t.substring(0, dots).trim()), Integer.parseInt(t.substring(dots + 2).trim()));
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("not a length or range (\"64\" or \"32..128\"): " + s, e);
    }
  }

  int draw(Rng rng) {
    return min == max ? min : rng.nextInt(min, max);
  }

  double mean() {
    return (min + max) / 2.0;
  }

  @Override
  public String toString() {
    return min == max ? Integer.toString(min) : min + ".." + max;
  }
}
