package dev.kvrouter.examples.sim.engine;

/** Cumulative counters of a worker, kept across engine restarts. Owned by the engine thread. */
final class Counters {
  long prefixQueryTokens;
  long prefixHitTokens;
  long promptTokens;
  long cachedPromptTokens;
  long prefillTokensComputed;
  long generationTokens;
  long finishedRequests;
  long failedRequests;
  long preemptions;
  long evictionsBeforeRestart;
  long steps;
  long busyNanos;
  long restarts;
  /** Offload: tokens looked up in the CPU tier ({@code vllm:external_prefix_cache_queries}). */
  long externalQueryTokens;
  /** Offload: tokens loaded from the CPU tier ({@code vllm:external_prefix_cache_hits}). */
  long externalHitTokens;
  long offloadLoadBytes;
  long offloadLoadNanos;
  long offloadStoreBytes;
  long offloadStoreNanos;
  long offloadStoresSkipped;
  long cpuEvictionsBeforeRestart;
  /** Media items the vision encoder ran on. */
  long encoderRuns;
  /** Media items not encoded because their positions were in the prefix-cache hit. */
  long encoderSkippedByPrefix;
  /** Media items not encoded because their output was in the encoder cache. */
  long encoderCacheHits;
  /**
   * Real time only: how late, summed over first tokens, the clock thread applied the step that produced each one
   * after the step's modelled end (the TTFT histogram times the model; the client sees the late application).
   */
  long firstTokenLateNanos;
  final Histogram ttft = new Histogram(Histogram.TTFT_BUCKETS);
  final Histogram e2e = new Histogram(Histogram.E2E_BUCKETS);
  final Histogram itl = new Histogram(Histogram.ITL_BUCKETS);
}
