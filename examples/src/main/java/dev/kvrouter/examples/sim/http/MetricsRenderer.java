package dev.kvrouter.examples.sim.http;

import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.engine.EngineStats;
import dev.kvrouter.examples.sim.engine.Histogram;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * Renders an engine's counters in the Prometheus text format under vLLM's metric names and labels
 * ({@code model_name}, {@code engine}), so a router or dashboard that scrapes vLLM scrapes the simulator the
 * same way. Counters follow prometheus_client's convention ({@code # TYPE x counter}, sample {@code x_total}).
 * The simulator's own truth counters are under {@code kvrouter_sim_}.
 */
final class MetricsRenderer {

  private final String labels;
  private final String cacheConfigLabels;

  MetricsRenderer(EngineConfig config, Double gpuMemoryUtilization) {
    this.labels = "engine=\"" + config.dpRank() + "\",model_name=\"" + escape(config.model()) + "\"";
    Map<String, String> cc = new LinkedHashMap<>();
    cc.put("block_size", Integer.toString(config.blockSize()));
    cc.put("cache_dtype", "auto");
    cc.put("enable_prefix_caching", config.enablePrefixCaching() ? "True" : "False");
    if (gpuMemoryUtilization != null) {
      cc.put("gpu_memory_utilization", Double.toString(gpuMemoryUtilization));
    }
    cc.put("num_cpu_blocks", Integer.toString(config.numCpuBlocks()));
    cc.put("num_gpu_blocks", Integer.toString(config.numGpuBlocks()));
    StringBuilder b = new StringBuilder();
    cc.forEach((k, v) -> b.append(k).append("=\"").append(escape(v)).append("\","));
    b.append(labels);
    this.cacheConfigLabels = b.toString();
  }

  /**
   * The engine's metrics, with the server's own TTFT of streamed responses: {@code firstChunkSeconds} summed over
   * {@code firstChunks} responses, from the request taken to its first token chunk flushed.
   */
  String render(EngineStats s, boolean up, double firstChunkSeconds, long firstChunks) {
    StringBuilder b = new StringBuilder(8192);
    gauge(b, "vllm:num_requests_running", "Number of requests in model execution batches.", s.numRunning());
    gauge(b, "vllm:num_requests_waiting", "Number of requests waiting to be processed.", s.numWaiting());
    gauge(b, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", s.kvUsage());
    gauge(b, "vllm:gpu_cache_usage_perc", "GPU KV-cache usage (deprecated name of vllm:kv_cache_usage_perc).",
        s.kvUsage());
    counter(b, "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
        s.prefixQueryTokens());
    counter(b, "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
        s.prefixHitTokens());
    counter(b, "vllm:prompt_tokens", "Number of prefill tokens processed.", s.promptTokens());
    counter(b, "vllm:generation_tokens", "Number of generation tokens processed.", s.generationTokens());
    counter(b, "vllm:num_preemptions", "Cumulative number of preemptions from the engine.", s.preemptions());
    b.append("# HELP vllm:request_success Count of successfully processed requests.\n");
    b.append("# TYPE vllm:request_success counter\n");
    b.append("vllm:request_success_total{").append(labels).append(",finished_reason=\"length\"} ")
        .append(num(s.finishedRequests())).append('\n');
    histogram(b, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", s.ttft());
    histogram(b, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", s.itl());
    histogram(b, "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", s.e2e());
    b.append("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n");
    b.append("# TYPE vllm:cache_config_info gauge\n");
    b.append("vllm:cache_config_info{").append(cacheConfigLabels).append("} 1.0\n");

    EngineStats.Offload o = s.offload();
    if (o.numCpuBlocks() > 0) {
      offload(b, s, o);
    }

    gauge(b, "kvrouter_sim_up", "1 while the simulated engine process is up, 0 while crashed.", up ? 1 : 0);
    counter(b, "kvrouter_sim_prompt_tokens_cached", "Prompt tokens served from the prefix cache (cached_tokens).",
        s.cachedPromptTokens());
    counter(b, "kvrouter_sim_prefill_tokens_computed",
        "Prompt tokens whose KV was computed, recomputation after preemption included.", s.prefillTokensComputed());
    counter(b, "kvrouter_sim_evicted_blocks", "Cached KV blocks evicted.", s.evictions());
    gauge(b, "kvrouter_sim_cached_blocks", "KV blocks currently holding a cached prefix.", s.cachedBlocks());
    counter(b, "kvrouter_sim_failed_requests", "Requests refused, aborted or lost in a crash.",
        s.failedRequests());
    counter(b, "kvrouter_sim_engine_restarts", "Engine restarts after a crash.", s.restarts());
    counter(b, "kvrouter_sim_steps", "Engine steps executed.", s.steps());
    counter(b, "kvrouter_sim_busy_seconds", "Simulated seconds the engine spent in steps.", s.busyNanos() / 1e9);
    counter(b, "kvrouter_sim_first_token_late_seconds", "Summed over first tokens: how long after its step's "
        + "modelled end the engine thread applied it (host load; vllm:time_to_first_token_seconds times the model).",
        s.firstTokenLateNanos() / 1e9);
    counter(b, "kvrouter_sim_http_first_chunk_seconds", "Summed over streamed responses: request taken by the HTTP "
        + "server to its first token chunk flushed (parsing, tokenizing, hand-offs, the engine, the writer).",
        firstChunkSeconds);
    counter(b, "kvrouter_sim_http_first_chunks", "Streamed responses whose first token chunk was flushed.",
        firstChunks);
    return b.toString();
  }

  /** vLLM's metrics of a KV connector's prefix cache and of the native offloading connector. */
  private void offload(StringBuilder b, EngineStats s, EngineStats.Offload o) {
    counter(b, "vllm:external_prefix_cache_queries", "External prefix cache queries from KV connector "
        + "cross-instance cache sharing, in terms of number of queried tokens.", o.externalQueryTokens());
    counter(b, "vllm:external_prefix_cache_hits", "External prefix cache hits from KV connector "
        + "cross-instance cache sharing, in terms of number of cached tokens.", o.externalHitTokens());
    counter(b, "vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).",
        s.cachedPromptTokens());
    b.append("# HELP vllm:prompt_tokens_by_source Number of prompt tokens by source.\n");
    b.append("# TYPE vllm:prompt_tokens_by_source counter\n");
    long[] bySource = {s.promptTokens() - s.cachedPromptTokens(), s.prefixHitTokens(), o.externalHitTokens()};
    String[] sources = {"local_compute", "local_cache_hit", "external_kv_transfer"};
    for (int i = 0; i < sources.length; i++) {
      b.append("vllm:prompt_tokens_by_source_total{").append(labels).append(",source=\"").append(sources[i])
          .append("\"} ").append(num(bySource[i])).append('\n');
    }
    counter(b, "vllm:kv_offload_load_bytes", "Total bytes loaded from offload storage to GPU.", o.loadBytes());
    counter(b, "vllm:kv_offload_load_time", "Total load time from offload storage to GPU, in seconds.",
        o.loadNanos() / 1e9);
    counter(b, "vllm:kv_offload_store_bytes", "Total bytes stored from GPU to offload storage.", o.storeBytes());
    counter(b, "vllm:kv_offload_store_time", "Total store time from GPU to offload storage, in seconds.",
        o.storeNanos() / 1e9);
    counter(b, "vllm:kv_offload_stores_skipped", "Stores skipped for lack of evictable CPU blocks.",
        o.storesSkipped());
    gauge(b, "vllm:kv_offload_cpu_cache_usage_perc", "CPU offload cache usage. 1 means 100 percent usage.",
        (double) o.cpuCachedBlocks() / o.numCpuBlocks());
    counter(b, "kvrouter_sim_cpu_evicted_blocks", "CPU offload blocks evicted.", o.evictions());
  }

  private void gauge(StringBuilder b, String name, String help, double v) {
    b.append("# HELP ").append(name).append(' ').append(help).append('\n');
    b.append("# TYPE ").append(name).append(" gauge\n");
    b.append(name).append('{').append(labels).append("} ").append(num(v)).append('\n');
  }

  private void counter(StringBuilder b, String name, String help, double v) {
    b.append("# HELP ").append(name).append(' ').append(help).append('\n');
    b.append("# TYPE ").append(name).append(" counter\n");
    b.append(name).append("_total{").append(labels).append("} ").append(num(v)).append('\n');
  }

  private void histogram(StringBuilder b, String name, String help, Histogram h) {
    b.append("# HELP ").append(name).append(' ').append(help).append('\n');
    b.append("# TYPE ").append(name).append(" histogram\n");
    double[] bounds = h.bounds();
    long cumulative = 0;
    for (int i = 0; i < bounds.length; i++) {
      cumulative += h.bucket(i);
      b.append(name).append("_bucket{").append(labels).append(",le=\"").append(num(bounds[i])).append("\"} ")
          .append(num(cumulative)).append('\n');
    }
    cumulative += h.bucket(bounds.length);
    b.append(name).append("_bucket{").append(labels).append(",le=\"+Inf\"} ").append(num(cumulative)).append('\n');
    b.append(name).append("_count{").append(labels).append("} ").append(num(h.count())).append('\n');
    b.append(name).append("_sum{").append(labels).append("} ").append(num(h.sum())).append('\n');
  }

  /**
   * What prometheus_client's exposition app returns for {@code name[]} parameters: the samples of those names
   * only, each family's HELP and TYPE lines kept when one of its samples is. vLLM serves that app on
   * {@code /metrics/}; its {@code /metrics} handler ignores the parameters.
   */
  static String restrict(String page, Set<String> sampleNames) {
    StringBuilder out = new StringBuilder();
    StringBuilder header = new StringBuilder();
    StringBuilder samples = new StringBuilder();
    for (String line : page.split("\n")) {
      if (line.startsWith("# HELP ")) {
        out.append(samples.isEmpty() ? "" : header).append(samples);
        header.setLength(0);
        samples.setLength(0);
        header.append(line).append('\n');
      } else if (line.startsWith("#")) {
        header.append(line).append('\n');
      } else if (!line.isEmpty()) {
        int end = line.indexOf('{');
        String name = line.substring(0, end >= 0 ? end : line.indexOf(' '));
        if (sampleNames.contains(name)) {
          samples.append(line).append('\n');
        }
      }
    }
    out.append(samples.isEmpty() ? "" : header).append(samples);
    return out.toString();
  }

  /** prometheus_client prints floats Python-style: integral values as "3.0". */
  private static String num(double v) {
    if (v == Math.rint(v) && Math.abs(v) < 1e15) {
      return String.format(Locale.ROOT, "%.1f", v);
    }
    return Double.toString(v);
  }

  private static String escape(String v) {
    return v.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
  }
}
