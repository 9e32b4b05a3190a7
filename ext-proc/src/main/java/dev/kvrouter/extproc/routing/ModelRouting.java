package dev.kvrouter.extproc.routing;

import java.util.Objects;

/**
 * Routing settings for one model (or the defaults for all).
 *
 * @param policy default policy name
 * @param weights cost model weights and gate
 * @param busy busy thresholds
 * @param whenAllBusy what to do when every otherwise eligible worker is busy
 */
public record ModelRouting(String policy, Weights weights, BusyThresholds busy, WhenAllBusy whenAllBusy) {

  /** What to do when every worker is above a busy threshold. */
  public enum WhenAllBusy {
    /** Answer 429 with {@code Retry-After}: the client (or Envoy's retry policy) comes back later. */
    REJECT,
    /** Send it to the least-loaded worker anyway (visible as fallback {@code all_busy}). */
    LEAST_LOADED
  }

  public ModelRouting {
    Objects.requireNonNull(policy, "policy");
    Objects.requireNonNull(weights, "weights");
    Objects.requireNonNull(busy, "busy");
    Objects.requireNonNull(whenAllBusy, "whenAllBusy");
  }

  public static ModelRouting defaults(String policy) {
    return new ModelRouting(policy, Weights.DEFAULTS, BusyThresholds.OFF, WhenAllBusy.REJECT);
  }
}
