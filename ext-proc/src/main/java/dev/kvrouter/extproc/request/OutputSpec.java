package dev.kvrouter.extproc.request;

/**
 * What a request asks of its output, for load estimation. Values the client left out take vLLM's defaults;
 * values of the wrong type are ignored here (these are hints; the engine validates them).
 *
 * @param maxTokens the output cap: {@code max_completion_tokens}, else {@code max_tokens}; vLLM's completions
 *     default of 16 when absent; -1 when unbounded (chat without a cap: up to the context length)
 * @param minTokens {@code min_tokens} (0 when absent)
 * @param ignoreEos {@code ignore_eos}: the output runs to exactly {@code maxTokens} (benchmark clients)
 * @param n {@code n}, the number of returned sequences (1 when absent)
 * @param bestOf {@code best_of} (older vLLM), sequences generated per prompt; 0 when absent
 */
public record OutputSpec(int maxTokens, int minTokens, boolean ignoreEos, int n, int bestOf) {

  /** vLLM's {@code CompletionRequest.max_tokens} default. */
  public static final int COMPLETIONS_DEFAULT_MAX_TOKENS = 16;

  /** Sequences decoded per prompt: the larger of {@code n} and {@code best_of}. */
  public int sequences() {
    return Math.max(1, Math.max(n, bestOf));
  }

  /**
   * Output tokens this request will decode at most per sequence when it is bounded, else {@code fallback} (a
   * policy's expected length for unbounded requests).
   */
  public int expectedTokens(int fallback) {
    if (ignoreEos && maxTokens > 0) {
      return maxTokens;
    }
    return maxTokens > 0 ? Math.max(minTokens, maxTokens) : Math.max(minTokens, fallback);
  }
}
