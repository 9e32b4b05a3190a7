package dev.kvrouter.examples.sim.engine;

import dev.kvrouter.index.wire.BlockStored;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * vLLM v1's {@code KVCacheManager} for one full-attention group: finds a request's cached prefix, allocates
 * blocks for the tokens scheduled in a step, caches blocks as they become full, and frees a request's blocks
 * tail first.
 *
 * <p>Caching happens at allocation time, as in vLLM: the blocks a step will fill are registered (and their
 * {@code BlockStored} recorded) when the step is scheduled; the events are published when the step ends.
 * Single-threaded: owned by the engine thread.
 */
final class KvCacheManager {

  /** vLLM's {@code MEDIUM_GPU}. */
  static final String MEDIUM_GPU = "GPU";
  /** The one KV-cache group of a full-attention model, as vLLM (since group_idx exists) reports it. */
  static final Integer GROUP = 0;
  static final String SPEC_KIND = "full_attention";

  private static final int[] NO_BLOCKS = new int[0];

  private final KvBlockPool pool;
  private final int blockSize;
  private final int maxModelLen;
  private final boolean prefixCaching;

  KvCacheManager(KvBlockPool pool, int blockSize, int maxModelLen, boolean prefixCaching) {
    this.pool = pool;
    this.blockSize = blockSize;
    this.maxModelLen = maxModelLen;
    this.prefixCaching = prefixCaching;
  }

  KvBlockPool pool() {
    return pool;
  }

  /**
   * The longest cached prefix of a request's full blocks (vLLM's {@code get_computed_blocks}). The last token
   * is never served from cache, because the step that computes it must produce the logits of the first output.
   *
   * @return the cached blocks, in chain order (not yet referenced)
   */
  int[] computedBlocks(EngineRequest r) {
    if (!prefixCaching) {
      return NO_BLOCKS;
    }
    int maxBlocks = (r.numTokens - 1) / blockSize;
    int[] hits = null;
    int n = 0;
    for (int i = 0; i < maxBlocks; i++) {
      int b = pool.lookup(r.blockHash(i));
      if (b < 0) {
        break;
      }
      if (hits == null) {
        hits = new int[maxBlocks];
      }
      hits[n++] = b;
    }
    return n == 0 ? NO_BLOCKS : Arrays.copyOf(hits, n);
  }

  /**
   * vLLM's {@code allocate_slots}: reserves blocks for {@code numNewTokens} more tokens of {@code r} (after
   * taking the cached {@code hits}, for a request being admitted) and caches the blocks they fill.
   *
   * @param hits cached blocks found by {@link #computedBlocks} for a request with no blocks yet, else empty
   * @return false, changing nothing, if there are not enough free blocks
   */
  boolean allocateSlots(EngineRequest r, int numNewTokens, int[] hits) {
    return allocateSlots(r, numNewTokens, hits, true);
  }

  /**
   * As {@link #allocateSlots(EngineRequest, int, int[])}; with {@code cacheNow} false the new blocks are reserved
   * but not cached (vLLM's {@code delay_cache_blocks}, for blocks an offload load will fill): call
   * {@link #cacheBlocks} once their content is there.
   */
  boolean allocateSlots(EngineRequest r, int numNewTokens, int[] hits, boolean cacheNow) {
    int numComputed = r.numComputedTokens + hits.length * blockSize;
    int needSlots = Math.min(numComputed + numNewTokens, maxModelLen);
    int required = (needSlots + blockSize - 1) / blockSize;
    int newBlocks = Math.max(0, required - r.numBlocks - hits.length);
    int evictableHits = 0;
    for (int b : hits) {
      if (pool.refCnt(b) == 0) {
        evictableHits++;
      }
    }
    if (newBlocks + evictableHits > pool.freeCount()) {
      return false;
    }
    for (int b : hits) {
      pool.touch(b);
      r.addBlock(b);
    }
    if (hits.length > 0) {
      r.numCachedBlocks = r.numBlocks;
    }
    for (int i = 0; i < newBlocks; i++) {
      r.addBlock(pool.allocate());
    }
    if (prefixCaching && cacheNow) {
      cacheFullBlocks(r, Math.min(numComputed + numNewTokens, r.numTokens));
    }
    return true;
  }

  /** vLLM's {@code cache_blocks}: caches the blocks of {@code r} that its first {@code numTokens} tokens fill. */
  void cacheBlocks(EngineRequest r, int numTokens) {
    if (prefixCaching) {
      cacheFullBlocks(r, Math.min(numTokens, r.numTokens));
    }
  }

  /** Registers the blocks of {@code r} that {@code numTokens} tokens fill and records one BlockStored. */
  private void cacheFullBlocks(EngineRequest r, int numTokens) {
    int full = numTokens / blockSize;
    int first = r.numCachedBlocks;
    if (full <= first) {
      return;
    }
    long[] engineHashes = new long[full - first];
    for (int i = first; i < full; i++) {
      engineHashes[i - first] = pool.cache(r.blocks[i], r.blockHash(i));
    }
    Long parent = first == 0 ? null : pool.engineHashOf(r.blocks[first - 1]);
    int[] tokenIds = Arrays.copyOfRange(r.tokens, first * blockSize, full * blockSize);
    // cacheSalt is SGLang's field; the vLLM layouts leave it out (vLLM carries the salt in extra_keys).
    pool.emit(new BlockStored(engineHashes, parent, tokenIds, blockSize, null, MEDIUM_GPU, r.loraName,
        extraKeys(r, first, full), GROUP, SPEC_KIND, null, null, null, null, r.cacheSalt));
    r.numCachedBlocks = full;
  }

  /**
   * vLLM's per-block extra hash keys, in its order: the LoRA name on every block, the multimodal
   * {@code [identifier, offset]} pairs of the items overlapping the block, the cache salt on block 0 only.
   */
  private static List<List<Object>> extraKeys(EngineRequest r, int first, int end) {
    if (r.loraName == null && r.cacheSalt == null && r.media.length == 0) {
      return null;
    }
    List<List<Object>> out = new ArrayList<>(end - first);
    for (int i = first; i < end; i++) {
      List<Object> keys = new ArrayList<>(2);
      if (r.loraName != null) {
        keys.add(r.loraName);
      }
      if (r.media.length > 0) {
        keys.addAll(r.mediaKeys(i));
      }
      if (r.cacheSalt != null && i == 0) {
        keys.add(r.cacheSalt);
      }
      out.add(keys.isEmpty() ? null : List.copyOf(keys));
    }
    return java.util.Collections.unmodifiableList(out);
  }

  /** Frees a request's blocks in reverse order, so that a prefix's tail is evicted before its head. */
  void free(EngineRequest r) {
    for (int i = r.numBlocks - 1; i >= 0; i--) {
      pool.release(r.blocks[i]);
    }
    r.numBlocks = 0;
    r.numCachedBlocks = 0;
  }
}
