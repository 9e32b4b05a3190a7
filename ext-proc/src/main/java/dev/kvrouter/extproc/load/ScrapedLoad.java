package dev.kvrouter.extproc.load;

/**
 * What a worker last reported about itself on its Prometheus endpoint.
 *
 * @param running requests the engine is running ({@code vllm:num_requests_running})
 * @param waiting requests queued in the engine ({@code vllm:num_requests_waiting})
 * @param kvUsage fraction of KV blocks in use, 0..1 ({@code vllm:kv_cache_usage_perc}), NaN when not reported
 * @param numGpuBlocks KV capacity in blocks ({@code vllm:cache_config_info{num_gpu_blocks}}), 0 when unknown
 * @param atNanos when the scrape arrived (the ledger's clock)
 */
public record ScrapedLoad(double running, double waiting, double kvUsage, long numGpuBlocks, long atNanos) {}
