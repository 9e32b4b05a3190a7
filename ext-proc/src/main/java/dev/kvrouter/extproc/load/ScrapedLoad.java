package dev.kvrouter.extproc.load;

/**
 * What a worker last reported about itself on its Prometheus endpoint, brought within what an engine can report.
 *
 * @param running requests the engine is running ({@code vllm:num_requests_running})
 * @param waiting requests queued in the engine ({@code vllm:num_requests_waiting})
 * @param kvUsage fraction of KV blocks in use, 0..1 ({@code vllm:kv_cache_usage_perc}), NaN when not reported
 * @param numGpuBlocks KV capacity in blocks ({@code vllm:cache_config_info{num_gpu_blocks}}), 0 when unknown
 * @param atNanos when the scrape arrived (the ledger's clock)
 */
public record ScrapedLoad(double running, double waiting, double kvUsage, long numGpuBlocks, long atNanos) {

  /**
   * More requests than any engine holds. A page may carry any finite number (a broken exporter, a counter that
   * wrapped): rounded, a huge one saturated at Long.MAX_VALUE and the ledger's "since" counter added to it wrapped
   * the load negative, so the worker reporting the most looked idle, and a negative one wrapped the other way.
   */
  static final double MAX_REQUESTS = 1e9;

  public ScrapedLoad {
    running = requests(running);
    waiting = requests(waiting);
    kvUsage = Double.isNaN(kvUsage) ? Double.NaN : Math.min(1, Math.max(0, kvUsage));
    numGpuBlocks = Math.max(0, numGpuBlocks);
  }

  private static double requests(double reported) {
    return Double.isNaN(reported) ? 0 : Math.min(MAX_REQUESTS, Math.max(0, reported));
  }
}
