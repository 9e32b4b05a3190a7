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
  final Histogram ttft = new Histogram(Histogram.TTFT_BUCKETS);
  final Histogram e2e = new Histogram(Histogram.E2E_BUCKETS);
  final Histogram itl = new Histogram(Histogram.ITL_BUCKETS);
}
