package dev.kvrouter.examples.sim.timing;

import java.util.Objects;

/**
 * The roofline of one GPU, from its datasheet.
 *
 * @param name marketing name
 * @param peakFlops dense BF16 tensor-core FLOP/s (without structured sparsity)
 * @param memoryBandwidth HBM bytes/s
 * @param memoryBytes device memory as CUDA reports it (what vLLM multiplies by {@code gpu_memory_utilization})
 * @param hostLinkBandwidth bytes/s of the host link in one direction (datasheet PCIe figure, half the
 *     bidirectional one): the bound on copying KV between GPU and host memory (CPU offload)
 */
public record GpuSpec(String name, double peakFlops, double memoryBandwidth, long memoryBytes,
    double hostLinkBandwidth) {

  public GpuSpec {
    Objects.requireNonNull(name, "name");
    if (peakFlops <= 0 || memoryBandwidth <= 0 || memoryBytes <= 0 || hostLinkBandwidth <= 0) {
      throw new IllegalArgumentException("GPU figures must be positive: " + name);
    }
  }
}
