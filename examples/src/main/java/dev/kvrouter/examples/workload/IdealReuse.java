package dev.kvrouter.examples.workload;

import dev.kvrouter.examples.sim.engine.MediaSpan;
import dev.kvrouter.index.block.BlockHasher;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * The reuse a workload offers at a KV block size: replay every prompt in arrival order into one worker with an
 * infinite prefix cache and count what it would have found. No router can serve more from cache than this.
 *
 * <ul>
 *   <li>{@link #blockShare()}: the share of full prompt blocks whose whole prefix (block and everything before
 *       it, the same chained identity the router uses) was already seen earlier in the workload;
 *   <li>{@link #tokenShare()}: the share of all prompt tokens an engine would serve from that cache, under
 *       vLLM's rule that the last prompt token is always computed (a prompt of n tokens can hit at most
 *       {@code floor((n-1)/B)} blocks). This is the figure to hold against
 *       {@code sum(cached_tokens) / sum(prompt_tokens)} measured on the workers.
 * </ul>
 *
 * <p>A request whose answer the workload scripts ({@link WorkloadRequest#answer}, a conversation that resends the
 * model's own output) also leaves the blocks its output fills in the cache, as vLLM caches decode-filled blocks:
 * the full blocks of prompt + output minus the last token, whose KV is never computed. A later turn that resends
 * the answer then finds them. Those blocks count in {@code uniqueBlocks} (and take room in a finite cache) but
 * not in {@code fullBlocks}, which counts prompt blocks only.
 *
 * <p>Media: a prompt given as {@link PromptIds} with media items is hashed with the engine's own keys, vLLM's
 * multimodal extra keys: every block overlapping an item carries {@code [identifier, offset - block_start]}
 * ({@link BlockHasher#multimodalExtra}), so a block of an image equals another only for the same identity at the
 * same offset, and, the chain being what it is, everything after a differing image differs too. The identity is
 * the engine's: the client's {@code uuid}, or without one the engine's own content hash of the image. The ideal
 * therefore credits repeats of an image sent without a uuid (they do repeat for the engine, which hashes the same
 * pixels the same way), although the router cannot name those blocks from events: the gap between what kv_aware
 * serves with and without uuids is the router's, not the workload's.
 *
 * <p>Requests arriving at the same instant count in workload order, so of N siblings the first misses and the rest
 * hit: an upper bound, since an engine computing the first may not have cached it when the others arrive.
 *
 * @param blockSize KV block size in tokens
 * @param requests requests replayed
 * @param promptTokens sum of prompt lengths
 * @param fullBlocks sum over requests of {@code floor(n/B)}
 * @param reusedBlocks full blocks already seen earlier
 * @param cacheableHitTokens tokens an infinite cache would serve, after the last-token rule
 * @param uniqueBlocks distinct blocks in the workload (the cache an ideal single worker would need); with a finite
 *     cache, blocks inserted (evicted blocks seen again count again)
 */
public record IdealReuse(int blockSize, long requests, long promptTokens, long fullBlocks, long reusedBlocks,
    long cacheableHitTokens, long uniqueBlocks) {

  public double blockShare() {
    return fullBlocks == 0 ? 0 : reusedBlocks / (double) fullBlocks;
  }

  public double tokenShare() {
    return promptTokens == 0 ? 0 : cacheableHitTokens / (double) promptTokens;
  }

  /**
   * Computes the ideal reuse of prompts (token ids with their media items), in the list's order, in a cache of
   * {@code capacityBlocks} blocks, least recently used evicted first. Blocks that overlap a media item are keyed
   * as the engine keys them (see the class comment). With an infinite cache this is the workload's ideal; with the
   * whole fleet's KV capacity, the reuse a fleet that shared one cache could reach. When a workload's distinct
   * content is larger than the fleet's cache, that, not the infinite figure, bounds what any router can serve.
   *
   * @param outputs each request's output token ids when later prompts may contain them (the scripted answer), or
   *     null (or a function answering null) when they never recur: the blocks prompt + output fill are cached
   * @param capacityBlocks the cache's size in blocks, {@code Long.MAX_VALUE} for an infinite cache
   */
  public static IdealReuse compute(List<WorkloadRequest> requests, Function<WorkloadRequest, PromptIds> prompts,
      Function<WorkloadRequest, int[]> outputs, int blockSize, long capacityBlocks) {
    if (blockSize <= 0) {
      throw new IllegalArgumentException("blockSize must be positive, was " + blockSize);
    }
    Replay replay = new Replay(BlockHasher.CHAIN_SEED, blockSize, capacityBlocks);
    long prompt = 0;
    long full = 0;
    long reused = 0;
    long hitTokens = 0;
    for (WorkloadRequest r : requests) {
      PromptIds ids = prompts.apply(r);
      int[] t = ids.tokens();
      int lead = replay.offer(ids, outputs == null ? null : outputs.apply(r));
      prompt += t.length;
      full += t.length / blockSize;
      reused += lead;
      int cacheable = t.length == 0 ? 0 : (t.length - 1) / blockSize;
      hitTokens += (long) Math.min(lead, cacheable) * blockSize;
    }
    return new IdealReuse(blockSize, requests.size(), prompt, full, reused, hitTokens, replay.added());
  }

  /**
   * The ideal cache, one request at a time, in the order the caller offers them: what {@link #compute} replays,
   * also usable alongside a live run (the A/B's miss breakdown keeps one beside the fleet). Single-threaded.
   */
  public static final class Replay {
    private final long root;
    private final int blockSize;
    private final SeenBlocks seen;
    private long[] hashes = new long[0];

    /**
     * @param root the chain root the block identities are hashed from (the engine's namespace root to compare
     *     them with an engine's cache; any fixed root for the ideal alone)
     * @param capacityBlocks the cache's size in blocks, {@code Long.MAX_VALUE} for an infinite cache
     */
    public Replay(long root, int blockSize, long capacityBlocks) {
      this.root = root;
      this.blockSize = blockSize;
      this.seen = capacityBlocks == Long.MAX_VALUE ? new Unbounded() : new Lru(capacityBlocks);
    }

    /**
     * Offers one request: returns the leading full prompt blocks the cache held before it (a hit run, counted as
     * uses), then caches the prompt's other blocks and, with {@code output}, the blocks prompt + output fill.
     * {@link #hashes()} then holds the prompt's block identities.
     */
    public int offer(PromptIds ids, int[] output) {
      int[] t = ids.tokens();
      int blocks = t.length / blockSize;
      if (ids.media().isEmpty()) {
        if (hashes.length < blocks) {
          hashes = new long[Math.max(blocks, hashes.length * 2)];
        }
        BlockHasher.hashFullBlocks(root, t, t.length, blockSize, hashes);
      } else {
        hashes = BlockHasher.hashBlocksWithExtras(root, t, blockSize, mediaExtras(ids.media(), blocks, blockSize));
      }
      // chained identity: a seen block implies its whole prefix was seen, so hits are a leading run
      int lead = 0;
      while (lead < blocks && seen.touch(hashes[lead])) {
        lead++;
      }
      for (int b = lead; b < blocks; b++) {
        seen.add(hashes[b]);
      }
      if (output != null && output.length > 1) {
        // the engine computes KV for prompt + output minus the last sampled token and caches its full blocks
        int n = t.length + output.length - 1;
        int all = n / blockSize;
        if (all > blocks) {
          int[] both = java.util.Arrays.copyOf(t, n);
          System.arraycopy(output, 0, both, t.length, output.length - 1);
          long[] h = BlockHasher.hashBlocksWithExtras(root, both, blockSize, mediaExtras(ids.media(), all, blockSize));
          for (int b = blocks; b < all; b++) {
            seen.add(h[b]);
          }
        }
      }
      return lead;
    }

    /** The block identities of the last prompt offered (its full blocks first; the array may be longer). */
    public long[] hashes() {
      return hashes;
    }

    /** Blocks inserted so far. */
    public long added() {
      return seen.added();
    }
  }

  /**
   * Per block, vLLM's multimodal extra keys folded as the engine and the router fold them: {@code [identifier,
   * offset - block_start]} of every item overlapping the block, in position order; 0 for a block no item overlaps.
   */
  static long[] mediaExtras(List<MediaSpan> media, int blocks, int blockSize) {
    long[] extras = new long[blocks];
    if (!media.isEmpty()) {
      for (int b = 0; b < blocks; b++) {
        extras[b] = MediaSpan.blockExtra(media, b * blockSize, blockSize);
      }
    }
    return extras;
  }

  /** The blocks the ideal cache holds. */
  private interface SeenBlocks {
    /** Whether the cache holds {@code hash}; a hit counts as a use. */
    boolean touch(long hash);

    void add(long hash);

    /** Blocks inserted so far. */
    long added();
  }

  /** An infinite cache: a primitive set, since a whole trace's distinct blocks run into the millions. */
  private static final class Unbounded implements SeenBlocks {
    private final LongHashSet set = new LongHashSet(1 << 16);

    @Override
    public boolean touch(long hash) {
      return set.contains(hash);
    }

    @Override
    public void add(long hash) {
      set.add(hash);
    }

    @Override
    public long added() {
      return set.size();
    }
  }

  /** A finite cache: block hashes in access order; beyond its capacity the least recently used is dropped. */
  private static final class Lru extends LinkedHashMap<Long, Boolean> implements SeenBlocks {
    private final long capacity;
    private long added;

    Lru(long capacity) {
      super(1 << 16, 0.75f, true);
      this.capacity = capacity;
    }

    @Override
    public boolean touch(long hash) {
      return get(hash) != null;
    }

    @Override
    public void add(long hash) {
      if (put(hash, Boolean.TRUE) == null) {
        added++;
      }
    }

    @Override
    public long added() {
      return added;
    }

    @Override
    protected boolean removeEldestEntry(Map.Entry<Long, Boolean> eldest) {
      return size() > capacity;
    }
  }
}
