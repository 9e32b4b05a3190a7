package dev.kvrouter.examples.sim.timing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvrouter.examples.ab.VirtualSetup;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import org.junit.jupiter.api.Test;

class BatchLimitsTest {

  private static final long GIB = 1L << 30;

  @Test
  void vllmServesAnH100WithFourTimesTheA100sStepBudget() {
    assertThat(BatchLimits.vllmServerDefaults(Presets.H100_SXM)).isEqualTo(new BatchLimits(1024, 8192));
    // an 80 GB A100 is as large as an H100, and vLLM still gives it the small budget (PR #17885)
    assertThat(BatchLimits.vllmServerDefaults(Presets.A100_SXM_80G)).isEqualTo(new BatchLimits(256, 2048));
    assertThat(BatchLimits.vllmServerDefaults(Presets.A100_SXM_40G)).isEqualTo(new BatchLimits(256, 2048));
    // the line is device memory, 70 GiB: a 48 GB card gets the small budget, a 141 GB one the large
    GpuSpec l40s = new GpuSpec("NVIDIA L40S", 362e12, 0.864e12, 46068L * (1 << 20), Presets.PCIE_GEN4_X16);
    GpuSpec h200 = new GpuSpec("NVIDIA H200", 989.4e12, 4.8e12, 143771L * (1 << 20), Presets.PCIE_GEN5_X16);
    GpuSpec atTheLine = new GpuSpec("GPU", 1e12, 1e12, 70 * GIB, 1e9);
    GpuSpec underIt = new GpuSpec("GPU", 1e12, 1e12, 70 * GIB - 1, 1e9);
    assertThat(BatchLimits.vllmServerDefaults(l40s)).isEqualTo(new BatchLimits(256, 2048));
    assertThat(BatchLimits.vllmServerDefaults(h200)).isEqualTo(new BatchLimits(1024, 8192));
    assertThat(BatchLimits.vllmServerDefaults(atTheLine)).isEqualTo(new BatchLimits(1024, 8192));
    assertThat(BatchLimits.vllmServerDefaults(underIt)).isEqualTo(new BatchLimits(256, 2048));
    assertThatThrownBy(() -> new BatchLimits(0, 2048)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void enginesTakeTheirPresetsLimitsUnlessTheyAreGiven() {
    Preset a100 = Presets.byId("llama3.1-8b-a100-40g");
    EngineConfig fromPreset = EngineConfig.fromPreset(a100, 16).build();
    assertThat(fromPreset.maxNumBatchedTokens()).isEqualTo(2048);
    assertThat(fromPreset.maxNumSeqs()).isEqualTo(256);

    VirtualSetup h100 = VirtualSetup.defaults();
    assertThat(h100.engineConfig(0).maxNumBatchedTokens()).isEqualTo(8192);
    assertThat(h100.engineConfig(0).maxNumSeqs()).isEqualTo(1024);
    VirtualSetup onA100 = h100.withPreset(a100);
    assertThat(onA100.engineConfig(3).maxNumBatchedTokens()).isEqualTo(2048);
    assertThat(onA100.engineConfig(3).maxNumSeqs()).isEqualTo(256);
    VirtualSetup given = onA100.withEngineLimits(64, 8192);
    assertThat(given.engineConfig(0).maxNumBatchedTokens()).isEqualTo(8192);
    assertThat(given.engineConfig(0).maxNumSeqs()).isEqualTo(64);
    assertThatThrownBy(() -> h100.withEngineLimits(-1, 0)).isInstanceOf(IllegalArgumentException.class);
  }
}
