package dev.kvrouter.examples.sim.timing;

/** How long one engine step takes on the simulated hardware. Pure and thread-safe. */
@FunctionalInterface
public interface TimingModel {

  /** Duration of a step doing {@code work}, in nanoseconds; 0 for an empty step. */
  long stepNanos(StepWork work);

  /**
   * Nanoseconds to copy the KV of {@code tokens} tokens between GPU and host memory in one direction (CPU
   * offload). The copies run on their own DMA stream beside the steps, so they delay the request that waits for
   * them, not the step. 0 for a model without a host link.
   */
  default long kvTransferNanos(long tokens) {
    return 0;
  }

  /** Bytes of KV cache of {@code tokens} tokens (what an offload copy moves); 0 when unknown. */
  default long kvBytes(long tokens) {
    return 0;
  }
}
