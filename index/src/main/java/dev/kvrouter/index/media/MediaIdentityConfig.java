package dev.kvrouter.index.media;

import java.time.Duration;
import java.util.Objects;

/**
 * Bounds of {@link MediaIdentities}: how many learned identifiers and pending correlations are kept, and for how
 * long.
 *
 * @param enabled learn engine identifiers at all (off: media without a client {@code uuid} keep the router's
 *     {@code kvr1-mm:} identifier, as before)
 * @param maxLearned the most learned (namespace, router identifier) entries; least recently used go first
 * @param learnedTtl a learned identifier is forgotten this long after it was learned, so a URL whose content
 *     changed is learned afresh at the latest then
 * @param maxPending the most pending (worker, parent block) slots awaiting the worker's store
 * @param pendingTtl how long a routed item waits for its worker's {@code BlockStored} (queueing plus prefill)
 */
public record MediaIdentityConfig(boolean enabled, int maxLearned, Duration learnedTtl, int maxPending,
    Duration pendingTtl) {

  /** Pending entries kept per (worker, parent) slot: concurrent items after the same text on one worker. */
  public static final int PER_SLOT = 8;

  public MediaIdentityConfig {
    Objects.requireNonNull(learnedTtl, "learnedTtl");
    Objects.requireNonNull(pendingTtl, "pendingTtl");
    if (maxLearned < 1 || maxPending < 1) {
      throw new IllegalArgumentException("media identity bounds must be positive, were " + maxLearned + " learned, "
          + maxPending + " pending");
    }
    if (learnedTtl.isNegative() || learnedTtl.isZero() || pendingTtl.isNegative() || pendingTtl.isZero()) {
      throw new IllegalArgumentException("media identity TTLs must be positive");
    }
  }

  /** 100,000 learned identifiers for 30 minutes, 65,536 pending slots for 30 s. */
  public static MediaIdentityConfig defaults() {
    return new MediaIdentityConfig(true, 100_000, Duration.ofMinutes(30), 65_536, Duration.ofSeconds(30));
  }

  /** Learning switched off. */
  public static MediaIdentityConfig disabled() {
    MediaIdentityConfig d = defaults();
    return new MediaIdentityConfig(false, d.maxLearned, d.learnedTtl, d.maxPending, d.pendingTtl);
  }
}
