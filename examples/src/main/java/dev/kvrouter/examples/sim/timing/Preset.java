package dev.kvrouter.examples.sim.timing;

import java.util.Objects;

/**
 * A model on a GPU as vLLM would serve it: the timing model and the KV capacity that follow from them.
 *
 * <p>KV capacity follows vLLM's own accounting: of {@code gpuMemoryUtilization * memory}, the weights and the
 * profiled non-KV memory (activations at {@code max_num_batched_tokens}, CUDA graphs, non-torch allocations)
 * are taken away and the rest is cut into blocks of {@code blockSize * kvBytesPerToken}.
 *
 * @param id the name used on the command line, e.g. {@code llama3.1-8b-h100}
 * @param model the model
 * @param gpu the GPU (one per worker: tensor parallel 1)
 * @param mfu see {@link RooflineTimingModel}
 * @param bandwidthEfficiency see {@link RooflineTimingModel}
 * @param overheadNanos see {@link RooflineTimingModel}
 * @param gpuMemoryUtilization vLLM's {@code --gpu-memory-utilization} (default 0.9)
 * @param nonKvOverheadBytes memory vLLM's profiling run reserves besides weights and KV
 * @param hostLinkEfficiency see {@link RooflineTimingModel}: achieved fraction of the GPU's host link bandwidth
 *     when KV blocks are copied to or from host memory (CPU offload)
 * @param vision the model's vision tower, or null for a text-only model; its weights take GPU memory too
 */
public record Preset(
    String id,
    ModelSpec model,
    GpuSpec gpu,
    double mfu,
    double bandwidthEfficiency,
    long overheadNanos,
    double gpuMemoryUtilization,
    long nonKvOverheadBytes,
    double hostLinkEfficiency,
    VisionEncoder vision) {

  public Preset {
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(model, "model");
    Objects.requireNonNull(gpu, "gpu");
    if (!(gpuMemoryUtilization > 0 && gpuMemoryUtilization <= 1)) {
      throw new IllegalArgumentException("gpuMemoryUtilization must be in (0, 1]");
    }
  }

  /** The scheduler limits {@code vllm serve} picks for this GPU when the flags are not given. */
  public BatchLimits batchLimits() {
    return BatchLimits.vllmServerDefaults(gpu);
  }

  public RooflineTimingModel timingModel() {
    return new RooflineTimingModel(model, gpu, mfu, bandwidthEfficiency, overheadNanos, hostLinkEfficiency,
        vision);
  }

  /**
   * CPU blocks of vLLM's native offloading for {@code --kv-offloading-size} GiB per worker (tensor parallel 1):
   * the connector's {@code cpu_bytes_to_use} cut into blocks of {@code blockSize * kvBytesPerToken}. 0 GiB is off.
   */
  public int numCpuBlocks(int blockSize, double kvOffloadingSizeGib) {
    if (blockSize <= 0 || !(kvOffloadingSizeGib >= 0) || Double.isInfinite(kvOffloadingSizeGib)) {
      throw new IllegalArgumentException("blockSize must be positive and the offloading size a finite GiB >= 0");
    }
    long bytes = (long) (kvOffloadingSizeGib * (1L << 30));
    return (int) Math.min(Integer.MAX_VALUE, bytes / ((long) blockSize * model.kvBytesPerToken()));
  }

  /** Bytes left for the KV cache after weights and profiled overhead. */
  public long kvCacheBytes() {
    long weights = model.weightBytes() + (vision == null ? 0 : vision.weightBytes());
    return (long) (gpu.memoryBytes() * gpuMemoryUtilization) - weights - nonKvOverheadBytes;
  }

  /** vLLM's {@code num_gpu_blocks} for this block size (including the one null block vLLM reserves). */
  public int numGpuBlocks(int blockSize) {
    if (blockSize <= 0) {
      throw new IllegalArgumentException("blockSize must be positive");
    }
    long perBlock = (long) blockSize * model.kvBytesPerToken();
    long blocks = kvCacheBytes() / perBlock;
    if (blocks < 2) {
      throw new IllegalStateException("preset " + id + " leaves no room for a KV cache");
    }
    return (int) Math.min(Integer.MAX_VALUE, blocks);
  }
}
