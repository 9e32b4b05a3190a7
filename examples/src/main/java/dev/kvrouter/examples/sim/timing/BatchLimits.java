package dev.kvrouter.examples.sim.timing;

import java.util.Locale;

/**
 * The scheduler's two limits: {@code --max-num-seqs} (requests running at once) and
 * {@code --max-num-batched-tokens} (tokens per step, the chunked-prefill budget).
 *
 * @param maxNumSeqs requests running at once
 * @param maxNumBatchedTokens tokens one step schedules
 */
public record BatchLimits(int maxNumSeqs, int maxNumBatchedTokens) {

  private static final long GIB = 1L << 30;

  public BatchLimits {
    if (maxNumSeqs < 1 || maxNumBatchedTokens < 1) {
      throw new IllegalArgumentException("maxNumSeqs and maxNumBatchedTokens must be >= 1");
    }
  }

  /**
   * What {@code vllm serve} picks on {@code gpu} when neither flag is given (vLLM's
   * {@code EngineArgs.get_batch_defaults}, OpenAI server): 8192 tokens and 1024 sequences on a GPU of at least
   * 70 GiB that is not an A100, else 2048 and 256. vLLM singles the A100 out because the larger budget cost it
   * throughput (vLLM PR #17885), so an A100 preset chunks a long prompt into four times as many steps as an H100
   * preset does.
   */
  public static BatchLimits vllmServerDefaults(GpuSpec gpu) {
    boolean large = gpu.memoryBytes() >= 70 * GIB && !gpu.name().toLowerCase(Locale.ROOT).contains("a100");
    return large ? new BatchLimits(1024, 8192) : new BatchLimits(256, 2048);
  }
}
