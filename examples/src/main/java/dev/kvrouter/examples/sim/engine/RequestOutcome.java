package dev.kvrouter.examples.sim.engine;

/**
 * A request that finished normally, with the engine's own truth about it.
 *
 * @param id the request id
 * @param reason why it stopped
 * @param promptTokens prompt length
 * @param completionTokens tokens generated
 * @param cachedTokens prompt tokens served from the prefix cache when it was first scheduled (vLLM's
 *     {@code num_cached_tokens}, reported as {@code usage.prompt_tokens_details.cached_tokens})
 * @param arrivalNanos when the engine received it (clock time)
 * @param firstTokenNanos when its first token was produced
 * @param finishNanos when its last token was produced
 * @param preemptions how often it was preempted (and recomputed)
 */
public record RequestOutcome(String id, FinishReason reason, int promptTokens, int completionTokens,
    int cachedTokens, long arrivalNanos, long firstTokenNanos, long finishNanos, int preemptions) {

  public long ttftNanos() {
    return firstTokenNanos - arrivalNanos;
  }
}
