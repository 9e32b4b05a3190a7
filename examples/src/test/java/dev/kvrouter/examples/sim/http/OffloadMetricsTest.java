package dev.kvrouter.examples.sim.http;

import static dev.kvrouter.examples.sim.testing.Tokens.seq;
import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.sim.clock.VirtualClock;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.engine.OutputTokens;
import dev.kvrouter.examples.sim.engine.RequestSpec;
import dev.kvrouter.examples.sim.engine.SimEngine;
import dev.kvrouter.examples.sim.testing.RecordingObserver;
import dev.kvrouter.examples.sim.testing.RecordingSink;
import dev.kvrouter.examples.sim.timing.Presets;
import org.junit.jupiter.api.Test;

/** {@code /metrics} of a worker with a CPU offload tier carries vLLM's connector and offload metrics. */
class OffloadMetricsTest {

  private static final String L = "{engine=\"0\",model_name=\"m\"}";

  private static String metricsAfterOneRequest(int cpuBlocks) {
    VirtualClock clock = new VirtualClock();
    EngineConfig c = EngineConfig.builder("m").blockSize(16).numGpuBlocks(64).maxModelLen(1024).seed(1)
        .numCpuBlocks(cpuBlocks).build();
    SimEngine e = new SimEngine("w", c, clock, Presets.DEFAULT.timingModel(), new RecordingSink(),
        OutputTokens.range(1, 9));
    RecordingObserver o = new RecordingObserver();
    e.submitNow(RequestSpec.of("a", seq(32, 1), 1), o);
    clock.runUntilIdle(10_000);
    assertThat(o.outcome).isNotNull();
    return new MetricsRenderer(c, null).render(e.statsNow(), true, 0, 0);
  }

  @Test
  void storedBlocksShowInTheOffloadCounters() {
    String m = metricsAfterOneRequest(16);
    // 32 prompt tokens = 2 blocks copied to CPU: 2 x 2 MiB, 32 x 2.56 us
    assertThat(m).contains("vllm:kv_offload_store_bytes_total" + L + " 4194304.0\n");
    assertThat(m).contains("vllm:kv_offload_store_time_total" + L + " 8.192E-5\n");
    assertThat(m).contains("vllm:kv_offload_load_bytes_total" + L + " 0.0\n");
    assertThat(m).contains("vllm:kv_offload_cpu_cache_usage_perc" + L + " 0.125\n");
    assertThat(m).contains("vllm:external_prefix_cache_queries_total" + L + " 32.0\n");
    assertThat(m).contains("vllm:external_prefix_cache_hits_total" + L + " 0.0\n");
    assertThat(m).contains("vllm:prompt_tokens_by_source_total{engine=\"0\",model_name=\"m\",source=\"local_compute\"} 32.0\n");
    assertThat(m).contains("num_cpu_blocks=\"16\"");
  }

  @Test
  void withoutATierThereAreNoOffloadMetrics() {
    String m = metricsAfterOneRequest(0);
    assertThat(m).doesNotContain("kv_offload").doesNotContain("external_prefix_cache");
    assertThat(m).contains("num_cpu_blocks=\"0\"");
  }
}
