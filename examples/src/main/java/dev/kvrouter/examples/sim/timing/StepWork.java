package dev.kvrouter.examples.sim.timing;

/**
 * What one engine step computes, summed over the requests scheduled in it: the input of a {@link TimingModel}.
 *
 * @param scheduledSeqs requests that got tokens in this step
 * @param newTokens tokens whose KV is computed in this step (prefill chunks plus one per decode)
 * @param prefillTokens the part of {@code newTokens} that are prompt positions (first computation or recompute)
 * @param sampledSeqs requests that sample a token at the end of this step (they need logits)
 * @param attentionPairs query-key pairs of causal attention: for a request with {@code c} tokens already cached
 *     and {@code n} new ones, {@code n * c + n * (n + 1) / 2}
 * @param kvTokensRead tokens of KV cache read by attention, {@code c + n} per request
 * @param encodedItems media items (images) the vision encoder runs on in this step
 */
public record StepWork(
    int scheduledSeqs,
    long newTokens,
    long prefillTokens,
    int sampledSeqs,
    double attentionPairs,
    long kvTokensRead,
    int encodedItems) {

  public static final StepWork EMPTY = new StepWork(0, 0, 0, 0, 0, 0, 0);

  /** A step of text only. */
  public StepWork(int scheduledSeqs, long newTokens, long prefillTokens, int sampledSeqs, double attentionPairs,
      long kvTokensRead) {
    this(scheduledSeqs, newTokens, prefillTokens, sampledSeqs, attentionPairs, kvTokensRead, 0);
  }

  /** Accumulates the work of one request into a step total; not thread-safe. */
  public static final class Builder {
    private int seqs;
    private long tokens;
    private long prefill;
    private int sampled;
    private double pairs;
    private long kvRead;
    private int encoded;

    /**
     * @param cachedBefore tokens of this request already in the KV cache before the step ({@code c})
     * @param newTokens tokens computed for it in this step ({@code n})
     * @param promptTokens its prompt length (positions below it are prefill)
     * @param samples whether it samples a token at the end of the step
     */
    public Builder add(long cachedBefore, long newTokens, long promptTokens, boolean samples) {
      seqs++;
      tokens += newTokens;
      prefill += Math.max(0, Math.min(cachedBefore + newTokens, promptTokens) - cachedBefore);
      if (samples) {
        sampled++;
      }
      pairs += (double) newTokens * cachedBefore + (double) newTokens * (newTokens + 1) / 2.0;
      kvRead += cachedBefore + newTokens;
      return this;
    }

    /** Counts {@code items} media items encoded in this step. */
    public Builder encode(int items) {
      encoded += items;
      return this;
    }

    public StepWork build() {
      return new StepWork(seqs, tokens, prefill, sampled, pairs, kvRead, encoded);
    }
  }
}
