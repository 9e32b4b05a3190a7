package dev.kvrouter.extproc.decision;

/**
 * Predicted versus actual cached tokens for one request: the authoritative test of the router's picture of the
 * fleet's caches.
 *
 * @param predicted cached tokens the router expected (its effective overlap in whole blocks, capped like vLLM)
 * @param actual {@code usage.prompt_tokens_details.cached_tokens} from the worker, or -1 when not reported
 * @param blockSize the request's block size
 * @param followed false when the response observer left the response after its first chunk, so its usage was
 *     never read (streamed responses outside the {@code observability.truth_check_every} sample)
 */
public record TruthCheck(long predicted, long actual, int blockSize, boolean followed) {

  public TruthCheck(long predicted, long actual, int blockSize) {
    this(predicted, actual, blockSize, true);
  }

  /** A request whose usage the router chose not to read. */
  public static TruthCheck skipped(long predicted, int blockSize) {
    return new TruthCheck(predicted, -1, blockSize, false);
  }

  /** Outcome labels. */
  public static final String WITHIN_BLOCK = "within_block";
  public static final String OVER = "over";
  public static final String UNDER = "under";
  public static final String UNKNOWN = "unknown";
  public static final String SKIPPED = "skipped";

  /**
   * {@code within_block} when predicted and actual differ by less than one block; {@code over} when the router
   * expected at least a block more than the worker had (a stale or wrong index: the request paid prefill the
   * router did not account for); {@code under} when the worker had at least a block more (missed affinity);
   * {@code unknown} without a reported count; {@code skipped} when the response was not followed to its usage.
   */
  public String outcome() {
    if (!followed) {
      return SKIPPED;
    }
    if (actual < 0) {
      return UNKNOWN;
    }
    long err = predicted - actual;
    if (Math.abs(err) < blockSize) {
      return WITHIN_BLOCK;
    }
    return err > 0 ? OVER : UNDER;
  }

  /** |predicted - actual| in blocks, or -1 when unknown. */
  public double errorBlocks() {
    return actual < 0 ? -1 : Math.abs(predicted - actual) / (double) blockSize;
  }
}
