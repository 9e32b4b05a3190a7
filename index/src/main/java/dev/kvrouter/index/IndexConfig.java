package dev.kvrouter.index;

import dev.kvrouter.index.media.MediaIdentityConfig;
import java.time.Duration;
import java.util.Objects;

/**
 * Bounds and timings of a {@link KvIndex}.
 *
 * @param maxEntries the most (worker, block) residencies kept from events; each worker may hold its fair share
 *     ({@code maxEntries / workers}, at least {@code minEntriesPerWorker}) and evicts its own beyond that
 * @param minEntriesPerWorker floor of a worker's share, so a large fleet does not starve each worker
 * @param segments lock stripes of the shared table (power of two)
 * @param predictedTtl lifetime of a predicted block on a worker that publishes events (covers requests that
 *     arrive before the engine's first {@code BlockStored}; Dynamo's side index uses a few seconds)
 * @param approximateTtl lifetime of a predicted block on a worker without an event stream (Dynamo: 120 s)
 * @param maxPredicted the most predicted (worker, block) entries; the oldest go first beyond it
 * @param predictionQueue predictions buffered between request threads and the drainer; more are dropped
 * @param prefixJump 0 for the exact block-by-block lookup walk; else the stride of a jump search (probe every
 *     {@code prefixJump}-th block, binary-search where workers drop out) that trusts each worker's cached blocks
 *     to be prefix-closed, as vLLM's and SGLang's leaf-first eviction keeps them; workers whose view may have
 *     holes (stale, lost events since the last clear, evicted here, CPU/disk tiers, handle conflicts) or whose
 *     engine showed it is not prefix-closed ({@link WorkerView#markNotPrefixClosed}) are still walked block by
 *     block (see {@link PrefixCursor}); default {@value #DEFAULT_JUMP}
 * @param media learning of engine identifiers for media sent without a uuid ({@link
 *     dev.kvrouter.index.media.MediaIdentities})
 */
public record IndexConfig(
    long maxEntries,
    int minEntriesPerWorker,
    int segments,
    Duration predictedTtl,
    Duration approximateTtl,
    int maxPredicted,
    int predictionQueue,
    int prefixJump,
    MediaIdentityConfig media) {

  public IndexConfig {
    Objects.requireNonNull(predictedTtl, "predictedTtl");
    Objects.requireNonNull(media, "media");
    Objects.requireNonNull(approximateTtl, "approximateTtl");
    if (maxEntries < 1 || minEntriesPerWorker < 1 || maxPredicted < 1 || predictionQueue < 1) {
      throw new IllegalArgumentException("index bounds must be positive");
    }
    if (Integer.bitCount(segments) != 1) {
      throw new IllegalArgumentException("segments must be a power of two, was " + segments);
    }
    if (prefixJump < 0 || prefixJump == 1 || prefixJump > MAX_JUMP) {
      throw new IllegalArgumentException("prefixJump must be 0 or 2.." + MAX_JUMP + ", was " + prefixJump);
    }
  }

  /** Largest jump stride (keeps the binary search's stack small). */
  public static final int MAX_JUMP = 1024;

  /** The default jump stride: 16 probes cover a 256-block prompt; 128-block prompts take 8 plus bisections. */
  public static final int DEFAULT_JUMP = 16;

  /**
   * 8M residencies (about 0.5 GB), 256 stripes, 5 s / 120 s prediction TTLs, 1M predicted entries, jump search at
   * stride {@value #DEFAULT_JUMP}, media identifiers learned ({@link MediaIdentityConfig#defaults()}).
   */
  public static IndexConfig defaults() {
    return new IndexConfig(8_000_000L, 16_384, 256, Duration.ofSeconds(5), Duration.ofSeconds(120), 1 << 20, 4096,
        DEFAULT_JUMP, MediaIdentityConfig.defaults());
  }

  public IndexConfig withMaxEntries(long max, int minPerWorker) {
    return new IndexConfig(max, minPerWorker, segments, predictedTtl, approximateTtl, maxPredicted, predictionQueue,
        prefixJump, media);
  }

  public IndexConfig withPredictions(Duration ttl, Duration approxTtl, int max, int queue) {
    return new IndexConfig(maxEntries, minEntriesPerWorker, segments, ttl, approxTtl, max, queue, prefixJump, media);
  }

  public IndexConfig withSegments(int n) {
    return new IndexConfig(maxEntries, minEntriesPerWorker, n, predictedTtl, approximateTtl, maxPredicted,
        predictionQueue, prefixJump, media);
  }

  /** With the lookup's jump search at stride {@code jump} (0: the exact walk); see {@code prefixJump}. */
  public IndexConfig withPrefixJump(int jump) {
    return new IndexConfig(maxEntries, minEntriesPerWorker, segments, predictedTtl, approximateTtl, maxPredicted,
        predictionQueue, jump, media);
  }

  /** With media identifier learning bounded (or switched off) by {@code m}. */
  public IndexConfig withMedia(MediaIdentityConfig m) {
    return new IndexConfig(maxEntries, minEntriesPerWorker, segments, predictedTtl, approximateTtl, maxPredicted,
        predictionQueue, prefixJump, m);
  }
}
