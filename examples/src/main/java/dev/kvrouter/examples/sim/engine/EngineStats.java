package dev.kvrouter.examples.sim.engine;

/**
 * A consistent snapshot of an engine's counters: the truth the benchmarks report. Counters are cumulative over
 * the worker's life (they survive engine restarts, like a Prometheus counter of a long-lived exporter would not;
 * {@link #restarts()} says how many there were).
 *
 * @param numRunning requests in the running set
 * @param numWaiting requests waiting (new or preempted)
 * @param kvUsage fraction of usable KV blocks referenced by requests
 * @param numGpuBlocks configured blocks, including the null block
 * @param cachedBlocks blocks currently holding a cached prefix (referenced or not)
 * @param prefixQueryTokens prompt tokens looked up in the prefix cache at first scheduling
 * @param prefixHitTokens of those, tokens found cached
 * @param promptTokens prompt tokens of requests admitted to run
 * @param cachedPromptTokens prompt tokens served from cache ({@code cached_tokens}, summed over requests)
 * @param prefillTokensComputed prompt and recomputed tokens whose KV was computed (includes recompute after
 *     preemption, so it can exceed {@code promptTokens - cachedPromptTokens})
 * @param generationTokens tokens generated
 * @param finishedRequests requests that completed
 * @param failedRequests requests that failed (invalid, refused, aborted, crashed)
 * @param preemptions preemptions
 * @param evictions cached blocks evicted
 * @param steps engine steps executed
 * @param busyNanos simulated time spent in steps
 * @param restarts engine restarts (crash recoveries)
 * @param ttft time-to-first-token histogram, seconds
 * @param e2e end-to-end latency histogram, seconds
 * @param itl inter-token latency histogram, seconds
 * @param offload the CPU offload tier's figures ({@link Offload#NONE} when it is off)
 * @param media what happened to the media items the scheduler reached
 * @param firstTokenLateNanos in real time, summed over the first tokens in {@code ttft}: how long after its
 *     step's modelled end the engine thread got to apply it (a loaded host's lateness, not the model's); 0 in
 *     virtual time
 */
public record EngineStats(
    int numRunning,
    int numWaiting,
    double kvUsage,
    int numGpuBlocks,
    int cachedBlocks,
    long prefixQueryTokens,
    long prefixHitTokens,
    long promptTokens,
    long cachedPromptTokens,
    long prefillTokensComputed,
    long generationTokens,
    long finishedRequests,
    long failedRequests,
    long preemptions,
    long evictions,
    long steps,
    long busyNanos,
    long restarts,
    Histogram ttft,
    Histogram e2e,
    Histogram itl,
    Offload offload,
    Media media,
    long firstTokenLateNanos) {

  /**
   * Media items (images) by what the scheduler did with each one the first time a chunk reached it.
   *
   * @param encoderRuns encoded by the vision encoder (in the step that reached it)
   * @param skippedByPrefix not encoded: its positions were in the request's prefix-cache hit
   * @param encoderCacheHits not encoded: its output was in the encoder cache
   */
  public record Media(long encoderRuns, long skippedByPrefix, long encoderCacheHits) {

    static Media of(Counters c) {
      return new Media(c.encoderRuns, c.encoderSkippedByPrefix, c.encoderCacheHits);
    }
  }

  /**
   * The CPU offload tier (vLLM's native offloading): its size and traffic. {@code cachedPromptTokens} of the
   * engine already includes the tokens loaded from here, as vLLM's {@code cached_tokens} does.
   *
   * @param numCpuBlocks configured CPU blocks
   * @param cpuCachedBlocks blocks held now (ready or being stored)
   * @param externalQueryTokens tokens of requests looked up in the tier ({@code vllm:external_prefix_cache_queries})
   * @param externalHitTokens tokens loaded from it instead of computed ({@code vllm:external_prefix_cache_hits};
   *     includes the one token recomputed when the whole prompt was found)
   * @param loadBytes bytes copied host to device ({@code vllm:kv_offload_load_bytes})
   * @param loadNanos time those copies took on the link ({@code vllm:kv_offload_load_time}, nanoseconds)
   * @param storeBytes bytes copied device to host ({@code vllm:kv_offload_store_bytes})
   * @param storeNanos time those copies took ({@code vllm:kv_offload_store_time}, nanoseconds)
   * @param storesSkipped store attempts dropped for want of evictable CPU blocks ({@code vllm:kv_offload_stores_skipped})
   * @param evictions CPU blocks evicted
   */
  public record Offload(int numCpuBlocks, int cpuCachedBlocks, long externalQueryTokens, long externalHitTokens,
      long loadBytes, long loadNanos, long storeBytes, long storeNanos, long storesSkipped, long evictions) {

    public static final Offload NONE = new Offload(0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  }
}
