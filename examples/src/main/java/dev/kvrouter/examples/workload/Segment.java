package dev.kvrouter.examples.workload;

/**
 * A run of {@code length} deterministic token ids named by {@code seed} (see {@link TokenSpace#token}). Equal
 * seeds give equal tokens, and a shorter segment with the same seed is a prefix of a longer one, which is how
 * a trimmed last trace block stays a prefix of the full block. Prompts are lists of segments, so a prefix
 * shared by thousands of requests is one small record, not thousands of arrays.
 */
public record Segment(long seed, int length) {

  public Segment {
    if (length < 0) {
      throw new IllegalArgumentException("segment length must be >= 0, was " + length);
    }
  }
}
