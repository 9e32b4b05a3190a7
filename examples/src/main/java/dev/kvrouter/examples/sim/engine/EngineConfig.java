package dev.kvrouter.examples.sim.engine;

import dev.kvrouter.examples.sim.timing.Preset;
import java.util.List;
import java.util.Objects;

/**
 * The engine arguments of one simulated vLLM worker, named after vLLM's flags.
 *
 * @param model the served model name; the cache namespace of every request starts from it
 * @param adapters LoRA adapter names this worker accepts as {@code model} (their blocks get their own namespace)
 * @param blockSize {@code --block-size}, tokens per KV block
 * @param numGpuBlocks {@code num_gpu_blocks}, including the null block vLLM reserves
 * @param maxNumSeqs {@code --max-num-seqs}, the most requests running at once
 * @param maxNumBatchedTokens {@code --max-num-batched-tokens}, the token budget of one step
 * @param maxModelLen {@code --max-model-len}, prompt plus output
 * @param longPrefillTokenThreshold {@code --long-prefill-token-threshold}, 0 = off
 * @param enableChunkedPrefill {@code --enable-chunked-prefill} (vLLM v1 default on)
 * @param enablePrefixCaching {@code --enable-prefix-caching} (vLLM v1 default on)
 * @param maxWaitingRequests bound on the waiting queue; beyond it requests are refused (memory stays bounded)
 * @param vocabSize token ids must be below this; 0 = not checked
 * @param seed seed of everything random in the engine (engine hashes); 0 = a fresh random seed per process start,
 *     as a real engine process has
 * @param dpRank data-parallel rank stamped on event batches
 * @param numCpuBlocks blocks of vLLM's native CPU offload tier ({@code --kv-offloading-size} with
 *     {@code --kv-offloading-backend native}, converted to blocks), 0 = no offload
 * @param disableChunkedMmInput {@code --disable-chunked-mm-input}: a prefill chunk that would end inside an image
 *     stops before it instead (vLLM forces it for Gemma 3, whose attention within an image is bidirectional)
 */
public record EngineConfig(
    String model,
    List<String> adapters,
    int blockSize,
    int numGpuBlocks,
    int maxNumSeqs,
    int maxNumBatchedTokens,
    int maxModelLen,
    int longPrefillTokenThreshold,
    boolean enableChunkedPrefill,
    boolean enablePrefixCaching,
    int maxWaitingRequests,
    int vocabSize,
    long seed,
    int dpRank,
    int numCpuBlocks,
    boolean disableChunkedMmInput) {

  /** vLLM's default {@code --block-size} on CUDA. */
  public static final int DEFAULT_BLOCK_SIZE = 16;
  /**
   * {@code --max-num-seqs} of a builder without a preset. A preset's engines take vLLM's default for its GPU
   * instead ({@link Preset#batchLimits()}: 1024 on an H100, 256 on an A100).
   */
  public static final int DEFAULT_MAX_NUM_SEQS = 256;
  /**
   * {@code --max-num-batched-tokens} of a builder without a preset. A preset's engines take vLLM's default for its
   * GPU instead ({@link Preset#batchLimits()}: 8192 on an H100, 2048 on an A100).
   */
  public static final int DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192;

  public EngineConfig {
    Objects.requireNonNull(model, "model");
    adapters = adapters == null ? List.of() : List.copyOf(adapters);
    if (blockSize < 1 || blockSize > 1024) {
      throw new IllegalArgumentException("blockSize must be in [1, 1024], was " + blockSize);
    }
    if (numGpuBlocks < 2) {
      throw new IllegalArgumentException("numGpuBlocks must be >= 2 (one is the null block), was " + numGpuBlocks);
    }
    if (maxNumSeqs < 1 || maxNumBatchedTokens < 1 || maxModelLen < 2 || maxWaitingRequests < 1) {
      throw new IllegalArgumentException("maxNumSeqs, maxNumBatchedTokens, maxWaitingRequests must be >= 1 and "
          + "maxModelLen >= 2");
    }
    if (!enableChunkedPrefill && maxNumBatchedTokens < maxModelLen) {
      throw new IllegalArgumentException("without chunked prefill maxNumBatchedTokens (" + maxNumBatchedTokens
          + ") must be >= maxModelLen (" + maxModelLen + "), as vLLM requires");
    }
    if (longPrefillTokenThreshold < 0 || vocabSize < 0 || dpRank < 0 || numCpuBlocks < 0) {
      throw new IllegalArgumentException("longPrefillTokenThreshold, vocabSize, dpRank and numCpuBlocks must be "
          + ">= 0");
    }
    if (numCpuBlocks > 0 && !enablePrefixCaching) {
      throw new IllegalArgumentException("the simulated CPU offload tier needs prefix caching (it finds offloaded "
          + "blocks by their prefix-cache identity)");
    }
  }

  /** Whether the native CPU offload tier is on. */
  public boolean offloadEnabled() {
    return numCpuBlocks > 0;
  }

  /** Blocks requests can use: all but vLLM's null block. */
  public int usableBlocks() {
    return numGpuBlocks - 1;
  }

  public static Builder builder(String model) {
    return new Builder(model);
  }

  /**
   * A builder with vLLM's defaults for {@code preset}'s GPU (its scheduler limits, {@link Preset#batchLimits()})
   * and the preset's KV capacity and context length.
   */
  public static Builder fromPreset(Preset preset, int blockSize) {
    return new Builder(preset.model().name())
        .maxNumSeqs(preset.batchLimits().maxNumSeqs())
        .maxNumBatchedTokens(preset.batchLimits().maxNumBatchedTokens())
        .blockSize(blockSize)
        .numGpuBlocks(preset.numGpuBlocks(blockSize))
        .maxModelLen(preset.model().maxModelLen())
        .vocabSize(preset.model().vocab())
        // the only presets with a vision tower are Gemma 3's, for which vLLM forces this on
        .disableChunkedMmInput(preset.vision() != null);
  }

  public Builder toBuilder() {
    return new Builder(model).adapters(adapters).blockSize(blockSize).numGpuBlocks(numGpuBlocks)
        .maxNumSeqs(maxNumSeqs).maxNumBatchedTokens(maxNumBatchedTokens).maxModelLen(maxModelLen)
        .longPrefillTokenThreshold(longPrefillTokenThreshold).enableChunkedPrefill(enableChunkedPrefill)
        .enablePrefixCaching(enablePrefixCaching).maxWaitingRequests(maxWaitingRequests).vocabSize(vocabSize)
        .seed(seed).dpRank(dpRank).numCpuBlocks(numCpuBlocks)
        .disableChunkedMmInput(disableChunkedMmInput);
  }

  /** Mutable builder; defaults are vLLM's. */
  public static final class Builder {
    private String model;
    private List<String> adapters = List.of();
    private int blockSize = DEFAULT_BLOCK_SIZE;
    private int numGpuBlocks = 1024;
    private int maxNumSeqs = DEFAULT_MAX_NUM_SEQS;
    private int maxNumBatchedTokens = DEFAULT_MAX_NUM_BATCHED_TOKENS;
    private int maxModelLen = 32768;
    private int longPrefillTokenThreshold;
    private boolean enableChunkedPrefill = true;
    private boolean enablePrefixCaching = true;
    private int maxWaitingRequests = 16384;
    private int vocabSize;
    private long seed;
    private int dpRank;
    private int numCpuBlocks;
    private boolean disableChunkedMmInput;

    private Builder(String model) {
      this.model = model;
    }

    public Builder model(String v) { model = v; return this; }
    public Builder adapters(List<String> v) { adapters = v; return this; }
    public Builder blockSize(int v) { blockSize = v; return this; }
    public Builder numGpuBlocks(int v) { numGpuBlocks = v; return this; }
    public Builder maxNumSeqs(int v) { maxNumSeqs = v; return this; }
    public Builder maxNumBatchedTokens(int v) { maxNumBatchedTokens = v; return this; }
    public Builder maxModelLen(int v) { maxModelLen = v; return this; }
    public Builder longPrefillTokenThreshold(int v) { longPrefillTokenThreshold = v; return this; }
    public Builder enableChunkedPrefill(boolean v) { enableChunkedPrefill = v; return this; }
    public Builder enablePrefixCaching(boolean v) { enablePrefixCaching = v; return this; }
    public Builder maxWaitingRequests(int v) { maxWaitingRequests = v; return this; }
    public Builder vocabSize(int v) { vocabSize = v; return this; }
    public Builder seed(long v) { seed = v; return this; }
    public Builder dpRank(int v) { dpRank = v; return this; }
    public Builder numCpuBlocks(int v) { numCpuBlocks = v; return this; }
    public Builder disableChunkedMmInput(boolean v) { disableChunkedMmInput = v; return this; }

    /**
     * The command line's overrides of what {@link #fromPreset} set: each value replaces the builder's when it is
     * above 0, and 0 keeps it (the preset's capacity, scheduler limits or context length).
     */
    public Builder overrides(int numGpuBlocks, int maxNumSeqs, int maxNumBatchedTokens, int maxModelLen) {
      if (numGpuBlocks > 0) {
        this.numGpuBlocks = numGpuBlocks;
      }
      if (maxNumSeqs > 0) {
        this.maxNumSeqs = maxNumSeqs;
      }
      if (maxNumBatchedTokens > 0) {
        this.maxNumBatchedTokens = maxNumBatchedTokens;
      }
      if (maxModelLen > 0) {
        this.maxModelLen = maxModelLen;
      }
      return this;
    }

    public EngineConfig build() {
      return new EngineConfig(model, adapters, blockSize, numGpuBlocks, maxNumSeqs, maxNumBatchedTokens,
          maxModelLen, longPrefillTokenThreshold, enableChunkedPrefill, enablePrefixCaching, maxWaitingRequests,
          vocabSize, seed, dpRank, numCpuBlocks, disableChunkedMmInput);
    }
  }
}
