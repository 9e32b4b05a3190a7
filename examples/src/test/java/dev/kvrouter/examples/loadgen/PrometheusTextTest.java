package dev.kvrouter.examples.loadgen;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;
import org.junit.jupiter.api.Test;

class PrometheusTextTest {

  @Test
  void sumsSeriesPerSampleNameAndSkipsCommentsAndJunk() {
    String text = """
        # HELP vllm:prompt_tokens Number of prefill tokens processed.
        # TYPE vllm:prompt_tokens counter
        vllm:prompt_tokens_total{engine="0",model_name="m"} 1200.0
        vllm:prompt_tokens_total{engine="1",model_name="a \\"quoted} name"} 34.5
        vllm:prefix_cache_hits_total 7 1712345678000
        vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 3.0
        vllm:weird{le="x"} +Inf
        garbage line without value
        vllm:num_requests_running{engine="0"}   2.0
        """;
    Map<String, Double> s = PrometheusText.sums(text);
    assertThat(s).containsEntry("vllm:prompt_tokens_total", 1234.5)
        .containsEntry("vllm:prefix_cache_hits_total", 7.0)
        .containsEntry("vllm:e2e_request_latency_seconds_bucket", 3.0)
        .containsEntry("vllm:weird", Double.POSITIVE_INFINITY)
        .containsEntry("vllm:num_requests_running", 2.0)
        .doesNotContainKey("garbage");
  }

  @Test
  void readsCountersUnderCurrentAndOlderVllmNames() {
    var c = WorkerMetrics.counters(PrometheusText.sums("""
        vllm:prompt_tokens_total 100
        vllm:gpu_prefix_cache_hits_total 40
        vllm:gpu_prefix_cache_queries_total 90
        """));
    assertThat(c.promptTokens()).isEqualTo(100);
    assertThat(c.prefixCacheHits()).isEqualTo(40);
    assertThat(c.prefixCacheQueries()).isEqualTo(90);
    assertThat(c.computedPrefillTokens()).isEqualTo(60);
    assertThat(c.simPrefillComputed()).isNaN();
    var sim = WorkerMetrics.counters(PrometheusText.sums("""
        vllm:prompt_tokens_total 100
        vllm:prefix_cache_hits_total 50
        kvrouter_sim_prefill_tokens_computed_total 70
        kvrouter_sim_prompt_tokens_cached_total 45
        """));
    assertThat(sim.computedPrefillTokens()).isEqualTo(70);
    assertThat(sim.cachedPromptTokens()).isEqualTo(45);
    assertThat(sim.ttftCount()).as("no histogram exported").isNaN();
  }

  @Test
  void readsTheEnginesTtftHistogramsSumAndCountNotItsBuckets() {
    var c = WorkerMetrics.counters(PrometheusText.sums("""
        vllm:time_to_first_token_seconds_bucket{le="0.01",model_name="m"} 3.0
        vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 4.0
        vllm:time_to_first_token_seconds_count{model_name="m"} 4.0
        vllm:time_to_first_token_seconds_sum{model_name="m"} 0.062
        kvrouter_sim_first_token_late_seconds_total{model_name="m"} 0.004
        kvrouter_sim_http_first_chunk_seconds_total{model_name="m"} 0.09
        kvrouter_sim_http_first_chunks_total{model_name="m"} 4
        """));
    assertThat(c.ttftCount()).isEqualTo(4);
    assertThat(c.ttftSecondsSum()).isEqualTo(0.062);
    assertThat(c.simFirstTokenLateSeconds()).isEqualTo(0.004);
    assertThat(c.simHttpFirstChunkSeconds()).isEqualTo(0.09);
    assertThat(c.simHttpFirstChunks()).isEqualTo(4);
  }
}
