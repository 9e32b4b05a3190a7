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
   * {@code capacityBlocks} blocks, evicted in vLLM's order (least recently freed first, a request's blocks freed
   * last first, so a prefix's root outlives its tail). Blocks that overlap a media item are keyed
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
     * Offers one request: returns the leading full prompt blocks the cache held before it (a hit run), then
     * releases the prompt's blocks and, with {@code output}, the blocks prompt + output fill, as a finished request
     * releases them. {@link #hashes()} then holds the prompt's block identities.
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
      // chained identity: a seen block implies its whole prefix was seen, so hits are a leading run. Looking does
      // not refresh them: vLLM takes hit blocks out of its free queue and puts them back only when the request ends
      int lead = 0;
      while (lead < blocks && seen.contains(hashes[lead])) {
        lead++;
      }
      long[] held = hashes;
      int count = blocks;
      if (output != null && output.length > 1) {
        // the engine computes KV for prompt + output minus the last sampled token and caches its full blocks
        int n = t.length + output.length - 1;
        int all = n / blockSize;
        if (all > blocks) {
          int[] both = java.util.Arrays.copyOf(t, n);
          System.arraycopy(output, 0, both, t.length, output.length - 1);
          held = BlockHasher.hashBlocksWithExtras(root, both, blockSize, mediaExtras(ids.media(), all, blockSize));
          count = all;
        }
      }
      seen.release(held, count);
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
    /** Whether the cache holds {@code hash}, without counting as a use. */
    boolean contains(long hash);

    /** A request ended holding {@code chain[0..count)}, a prompt's (and its output's) blocks in chain order. */
    void release(long[] chain, int count);

    /** Blocks inserted so far. */
    long added();
  }

  /** An infinite cache: a primitive set, since a whole trace's distinct blocks run into the millions. */
  private static final class Unbounded implements SeenBlocks {
    private final LongHashSet set = new LongHashSet(1 << 16);

    @Override
    public boolean contains(long hash) {
      return set.contains(hash);
    }

    @Override
    public void release(long[] chain, int count) {
      for (int i = 0; i < count; i++) {
        set.add(chain[i]);
      }
    }

    @Override
    public long added() {
      return set.size();
    }
  }

  /**
   * A finite cache in vLLM's eviction order, so that it bounds what engines of the same total size can hold. vLLM
   * frees a finished request's blocks last first onto the tail of its free queue and evicts from the head: a chain
   * loses its tail first and its root last. Evicting the root first would strand every later block of the chain
   * (unreachable, yet taking room), and the "bound" would fall below what one such engine serves.
   */
  private static final class Lru extends LinkedHashMap<Long, Boolean> implements SeenBlocks {
    private final long capacity;
    private long added;

    Lru(long capacity) {
      super(1 << 16, 0.75f, false);
      this.capacity = capacity;
    }

    @Override
    public boolean contains(long hash) {
      return containsKey(hash);
    }

    @Override
    public void release(long[] chain, int count) {
      // the request's cached blocks are in use while it runs: out of the queue, so its new blocks cannot evict them
      for (int i = 0; i < count; i++) {
        if (remove(chain[i]) == null) {
          added++;
        }
      }
      for (int i = count - 1; i >= 0; i--) {
        put(chain[i], Boolean.TRUE);
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
