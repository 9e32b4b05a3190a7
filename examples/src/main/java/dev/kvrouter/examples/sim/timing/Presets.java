package dev.kvrouter.examples.sim.timing;

import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Collectors;

/**
 * The calibrated presets. Sources of every figure are in {@code docs/simulator.md}; in short, model shapes are
 * the models' {@code config.json}, GPU figures their NVIDIA datasheets, and the efficiency factors are fitted to
 * published single-request vLLM decode latencies of Llama-3.1-8B on H100 and A100.
 */
public final class Presets {

  private static final long GIB = 1L << 30;
  private static final long MIB = 1L << 20;

  /** meta-llama/Llama-3.1-8B-Instruct, BF16. */
  public static final ModelSpec LLAMA_3_1_8B = new ModelSpec("meta-llama/Llama-3.1-8B-Instruct",
      32, 4096, 32, 8, 128, 14336, 128256, false, 2, 2, 131072);

  /** Qwen/Qwen3-8B, BF16. */
  public static final ModelSpec QWEN3_8B = new ModelSpec("Qwen/Qwen3-8B",
      36, 4096, 32, 8, 128, 12288, 151936, false, 2, 2, 40960);

  /** google/gemma-3-4b-it's language model, BF16: no preset, the model of the one published Gemma 3 check. */
  public static final ModelSpec GEMMA_3_4B = new ModelSpec("google/gemma-3-4b-it",
      34, 2560, 8, 4, 256, 10240, 262208, true, 2, 2, 131072);

  /**
   * google/gemma-3-12b-it's language model, BF16. Its sliding-window layers are counted as full attention: with KV
   * events on (the router needs them) vLLM turns the hybrid KV cache manager off and gives every layer a full KV
   * cache; their compute is counted as full attention too, which overstates prompts beyond the 1,024-token window.
   */
  public static final ModelSpec GEMMA_3_12B = new ModelSpec("google/gemma-3-12b-it",
      48, 3840, 16, 8, 256, 15360, 262208, true, 2, 2, 131072);

  /**
   * google/gemma-3-27b-it's language model, BF16 (sliding windows as for {@link #GEMMA_3_12B}). Served with
   * {@code --max-model-len 32768}: vLLM refuses the default 131,072 on one 80 GB GPU, as one sequence would not fit
   * in the KV cache.
   */
  public static final ModelSpec GEMMA_3_27B = new ModelSpec("google/gemma-3-27b-it",
      62, 5376, 32, 16, 128, 21504, 262208, true, 2, 2, 32768);

  /**
   * Gemma 3's vision tower (SigLIP So400m at 896 x 896, patch 14: 4,096 patches) and its projector, average-pooled
   * to 256 tokens per image; {@code projectTo} is the language model's hidden size.
   */
  public static VisionEncoder gemma3Vision(int projectTo) {
    return new VisionEncoder("siglip-so400m-patch14-896", 27, 1152, 4304, 896, 14, 256, projectTo, 2);
  }

  /** PCIe Gen5 x16: 128 GB/s both directions together (H100 datasheet), 64 GB/s each way. */
  public static final double PCIE_GEN5_X16 = 64e9;
  /** PCIe Gen4 x16: 64 GB/s both directions together (A100 datasheet), 32 GB/s each way. */
  public static final double PCIE_GEN4_X16 = 32e9;

  /** H100 SXM5 80GB: 989.4 TFLOP/s dense BF16, 3.35 TB/s HBM3, 81,559 MiB as CUDA reports it, PCIe Gen5. */
  public static final GpuSpec H100_SXM = new GpuSpec("NVIDIA H100 80GB HBM3", 989.4e12, 3.35e12, 81559 * MIB,
      PCIE_GEN5_X16);

  /** A100 SXM4 80GB: 312 TFLOP/s dense BF16, 2.039 TB/s HBM2e, 81,920 MiB, PCIe Gen4. */
  public static final GpuSpec A100_SXM_80G = new GpuSpec("NVIDIA A100-SXM4-80GB", 312e12, 2.039e12, 81920 * MIB,
      PCIE_GEN4_X16);

  /** A100 SXM4 40GB: 312 TFLOP/s dense BF16, 1.555 TB/s HBM2, 40,960 MiB (used for calibration), PCIe Gen4. */
  public static final GpuSpec A100_SXM_40G = new GpuSpec("NVIDIA A100-SXM4-40GB", 312e12, 1.555e12, 40960 * MIB,
      PCIE_GEN4_X16);

  /** Achieved fraction of peak FLOP/s in prefill (assumed; see docs). */
  public static final double MFU = 0.5;
  /** Achieved fraction of HBM bandwidth in decode (fitted). */
  public static final double BANDWIDTH_EFFICIENCY = 0.8;
  /**
   * Achieved fraction of the host link's one-way bandwidth when vLLM's offloading connector copies KV blocks
   * (assumed: pinned host memory, DMA copies of 2 MiB blocks; see docs/benchmarks/offload.md).
   */
  public static final double HOST_LINK_EFFICIENCY = 0.8;
  /** Fixed per-step overhead (fitted). */
  public static final long STEP_OVERHEAD_NANOS = 500_000;
  /** vLLM's default {@code --gpu-memory-utilization}. */
  public static final double GPU_MEMORY_UTILIZATION = 0.9;
  /** Activations, CUDA graphs and non-torch memory that vLLM's profiling reserves (assumed; see docs). */
  public static final long NON_KV_OVERHEAD = 5 * GIB / 2;

  public static final Preset LLAMA_3_1_8B_H100 = preset("llama3.1-8b-h100", LLAMA_3_1_8B, H100_SXM);
  public static final Preset LLAMA_3_1_8B_A100 = preset("llama3.1-8b-a100", LLAMA_3_1_8B, A100_SXM_80G);
  public static final Preset LLAMA_3_1_8B_A100_40G = preset("llama3.1-8b-a100-40g", LLAMA_3_1_8B, A100_SXM_40G);
  public static final Preset QWEN3_8B_H100 = preset("qwen3-8b-h100", QWEN3_8B, H100_SXM);
  public static final Preset GEMMA_3_12B_H100 = preset("gemma3-12b-h100", GEMMA_3_12B, H100_SXM,
      gemma3Vision(GEMMA_3_12B.hidden()));
  public static final Preset GEMMA_3_27B_H100 = preset("gemma3-27b-h100", GEMMA_3_27B, H100_SXM,
      gemma3Vision(GEMMA_3_27B.hidden()));

  /** The preset used when none is named. */
  public static final Preset DEFAULT = LLAMA_3_1_8B_H100;

  private static final Map<String, Preset> BY_ID = List.of(LLAMA_3_1_8B_H100, LLAMA_3_1_8B_A100,
      LLAMA_3_1_8B_A100_40G, QWEN3_8B_H100, GEMMA_3_12B_H100, GEMMA_3_27B_H100).stream()
      .collect(Collectors.toMap(Preset::id, Function.identity()));

  private Presets() {}

  private static Preset preset(String id, ModelSpec m, GpuSpec g) {
    return preset(id, m, g, null);
  }

  private static Preset preset(String id, ModelSpec m, GpuSpec g, VisionEncoder vision) {
    return new Preset(id, m, g, MFU, BANDWIDTH_EFFICIENCY, STEP_OVERHEAD_NANOS, GPU_MEMORY_UTILIZATION,
        NON_KV_OVERHEAD, HOST_LINK_EFFICIENCY, vision);
  }

  /** The preset named {@code id} (case-insensitive). */
  public static Preset byId(String id) {
    Preset p = BY_ID.get(id.toLowerCase(Locale.ROOT));
    if (p == null) {
      throw new IllegalArgumentException("unknown preset '" + id + "'; known: " + BY_ID.keySet());
    }
    return p;
  }

  public static List<Preset> all() {
    return List.copyOf(BY_ID.values());
  }
}
