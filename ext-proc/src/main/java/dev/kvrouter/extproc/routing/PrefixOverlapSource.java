package dev.kvrouter.extproc.routing;

import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.media.MediaIdentities;
import java.util.List;

/**
 * Where the policy learns which worker already holds a request's prefix: the seam to the KV index. The lead
 * implements it over {@code dev.kvrouter.index.KvIndex}; {@link #NONE} knows nothing (every overlap is zero,
 * so kv_aware routes on load alone).
 *
 * <p>Called on request threads, concurrently; implementations read the index without blocking.
 */
public interface PrefixOverlapSource {

  /** Knows no cached blocks. */
  PrefixOverlapSource NONE = hashes -> worker -> Overlap.NONE;

  /**
   * Looks up one request.
   *
   * @param blockHashes the request's full-block hashes in chain order (namespace, adapter and tenant salt are
   *     folded into them by {@code BlockHasher}); never modified by the caller afterwards
   * @return per-worker overlap; workers holding nothing map to a zero overlap (with their stale flag)
   */
  Lookup lookup(long[] blockHashes);

  /**
   * Records that the router just sent this prefix to {@code worker}, so requests arriving before the worker's
   * events can still find it (predicted entries, with a short TTL on the index side). Must not block.
   */
  default void recordPrediction(WorkerId worker, long[] blockHashes) {}

  /**
   * How many times a worker's cache was emptied (its engine cleared it or restarted) since start; the router
   * forgets its eviction history when this moves, since those blocks were not evicted for want of memory.
   */
  default long cacheResets() {
    return 0;
  }

  /**
   * The engine's identifier learned for a media item the client sent without a uuid ({@code routerId} is the
   * router's {@code kvr1-mm:} identifier) in the cache namespace whose root seed is {@code namespace}, or null.
   * Must not block.
   */
  default String learnedMediaId(long namespace, String routerId) {
    return null;
  }

  /**
   * Records that the router sent such an item, not yet learned, to {@code worker}: its first block follows the
   * block hashed {@code parent} (the namespace root for block 0), and the item starts {@code offset} tokens into
   * that block. The worker's store of it teaches the engine's identifier, and those of {@code rest} (the request's
   * later unresolved items) when the same store holds them. Must not block.
   */
  default void expectMedia(WorkerId worker, long parent, int offset, long namespace, String routerId,
      List<MediaIdentities.FollowUp> rest) {}

  /**
   * An incremental matcher for the request path's early stop: fed block hashes in chain order, it says whether
   * some worker (from events or predictions) still holds every block so far. Once it says no, no worker can hold
   * any later block of this prompt, so tokenizing further cannot change the routing decision. One per request,
   * used on one thread; finish with it before the next matcher on that thread.
   */
  default Matcher matcher() {
    return hash -> false;
  }

  /** See {@link #matcher()}. */
  @FunctionalInterface
  interface Matcher {
    boolean advance(long blockHash);
  }

  /** The answer for one request. */
  @FunctionalInterface
  interface Lookup {
    Overlap overlap(WorkerId worker);
  }
}
