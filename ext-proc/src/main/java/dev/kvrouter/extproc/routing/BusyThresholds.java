package dev.kvrouter.extproc.routing;

import dev.kvrouter.extproc.load.WorkerLoad;

/**
 * Limits above which a worker takes no new requests (Dynamo's busy thresholds). Zero disables a limit; all
 * are off by default. Compared with the blended load ({@link dev.kvrouter.extproc.load.LoadTracker}).
 *
 * @param maxPrefillTokens queued prefill tokens
 * @param maxDecodeBlocks KV blocks held by in-flight requests
 * @param maxKvUsage fraction of the KV cache in use (needs the worker's metrics)
 * @param maxWaiting requests queued in the engine (needs the worker's metrics)
 */
public record BusyThresholds(long maxPrefillTokens, long maxDecodeBlocks, double maxKvUsage, long maxWaiting) {

  public static final BusyThresholds OFF = new BusyThresholds(0, 0, 0, 0);

  public BusyThresholds {
    if (maxPrefillTokens < 0 || maxDecodeBlocks < 0 || maxWaiting < 0 || !(maxKvUsage >= 0 && maxKvUsage <= 1)) {
      throw new IllegalArgumentException("busy thresholds must be >= 0 (max_kv_usage within 0..1)");
    }
  }

  /** Why {@code load} is busy ({@code busy_prefill_tokens}, ...), or null. */
  public String check(WorkerLoad load) {
    if (maxPrefillTokens > 0 && load.prefillTokens() >= maxPrefillTokens) {
      return "busy_prefill_tokens";
    }
    if (maxDecodeBlocks > 0 && load.decodeBlocks() >= maxDecodeBlocks) {
      return "busy_decode_blocks";
    }
    if (maxKvUsage > 0 && !Double.isNaN(load.kvUsage()) && load.kvUsage() >= maxKvUsage) {
      return "busy_kv_usage";
    }
    if (maxWaiting > 0 && load.waiting() >= maxWaiting) {
      return "busy_waiting_requests";
    }
    return null;
  }
}
