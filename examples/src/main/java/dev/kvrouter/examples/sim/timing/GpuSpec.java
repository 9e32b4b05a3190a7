package dev.kvrouter.examples.sim.timing;

import java.util.Objects;

/**
 * The roofline of one GPU, from its datasheet.
 *
 * @param name marketing name
 * @param peakFlops dense BF16 tensor-core FLOP/s (without structured sparsity)
 * @param memoryBandwidth HBM bytes/s
 * @param memoryBytes device memory as CUDA reports it (what vLLM multiplies by {@code gpu_memory_utilization})
 */
public record GpuSpec(String name, double peakFlops, double memoryBandwidth, long memoryBytes) {

  public GpuSpec {
    Objects.requireNonNull(name, "name");
    if (peakFlops <= 0 || memoryBandwidth <= 0 || memoryBytes <= 0) {
      throw new IllegalArgumentException("GPU figures must be positive: " + name);
    }
  }
}
