package dev.kvrouter.examples.report;

/**
 * A worker's cumulative engine counters (or their change over a run), read from its {@code /metrics}. Absent
 * series are {@code NaN}. vLLM names: {@code vllm:prompt_tokens_total} (prompt tokens of admitted requests,
 * cached or not), {@code vllm:prefix_cache_hits_total} / {@code vllm:prefix_cache_queries_total} (in tokens),
 * {@code vllm:generation_tokens_total}, {@code vllm:request_success_total}. The simulated worker also exports
 * its ground truth: {@code kvrouter_sim_prefill_tokens_computed_total} and
 * {@code kvrouter_sim_prompt_tokens_cached_total}. {@code ttftSecondsSum} / {@code ttftCount} are the engine's own
 * {@code vllm:time_to_first_token_seconds} histogram's {@code _sum} and {@code _count}: TTFT from the request's
 * arrival at the engine, without the proxy, router and client in front of it. The simulated worker times that
 * histogram by its model; {@code simFirstTokenLateSeconds} ({@code kvrouter_sim_first_token_late_seconds_total})
 * sums how late a loaded host let it apply each first token after that, and {@code simHttpFirstChunkSeconds} /
 * {@code simHttpFirstChunks} its HTTP server's own TTFT of streamed responses (request taken to first token chunk
 * flushed).
 */
public record WorkerCounters(double promptTokens, double prefixCacheHits, double prefixCacheQueries,
    double generationTokens, double requestSuccess, double simPrefillComputed, double simPromptTokensCached,
    double ttftSecondsSum, double ttftCount, double simFirstTokenLateSeconds, double simHttpFirstChunkSeconds,
    double simHttpFirstChunks) {

  public static final WorkerCounters ABSENT =
      new WorkerCounters(Double.NaN, Double.NaN, Double.NaN, Double.NaN, Double.NaN, Double.NaN, Double.NaN);

  /** Counters without the engine's TTFT histogram. */
  public WorkerCounters(double promptTokens, double prefixCacheHits, double prefixCacheQueries,
      double generationTokens, double requestSuccess, double simPrefillComputed, double simPromptTokensCached) {
    this(promptTokens, prefixCacheHits, prefixCacheQueries, generationTokens, requestSuccess, simPrefillComputed,
        simPromptTokensCached, Double.NaN, Double.NaN, Double.NaN, Double.NaN, Double.NaN);
  }

  /**
   * The change from {@code before} to this. A counter that went down was reset (a worker restarted), and as in
   * Prometheus' {@code increase()} the value after the reset is taken as the change.
   */
  public WorkerCounters minus(WorkerCounters before) {
    return new WorkerCounters(d(promptTokens, before.promptTokens), d(prefixCacheHits, before.prefixCacheHits),
        d(prefixCacheQueries, before.prefixCacheQueries), d(generationTokens, before.generationTokens),
        d(requestSuccess, before.requestSuccess), d(simPrefillComputed, before.simPrefillComputed),
        d(simPromptTokensCached, before.simPromptTokensCached), d(ttftSecondsSum, before.ttftSecondsSum),
        d(ttftCount, before.ttftCount), d(simFirstTokenLateSeconds, before.simFirstTokenLateSeconds),
        d(simHttpFirstChunkSeconds, before.simHttpFirstChunkSeconds), d(simHttpFirstChunks, before.simHttpFirstChunks));
  }

  /** Prompt tokens whose KV the worker computed: the simulator's truth, else prompt tokens minus cache hits. */
  public double computedPrefillTokens() {
    if (!Double.isNaN(simPrefillComputed)) {
      return simPrefillComputed;
    }
    return promptTokens - prefixCacheHits;
  }

  /** Prompt tokens served from the prefix cache: the simulator's truth, else the hit counter. */
  public double cachedPromptTokens() {
    return Double.isNaN(simPromptTokensCached) ? prefixCacheHits : simPromptTokensCached;
  }

  private static double d(double after, double before) {
    if (Double.isNaN(after)) {
      return Double.NaN;
    }
    if (Double.isNaN(before)) {
      return after;
    }
    return after >= before ? after - before : after;
  }
}
