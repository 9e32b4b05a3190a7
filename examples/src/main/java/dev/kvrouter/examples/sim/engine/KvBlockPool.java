package dev.kvrouter.examples.sim.engine;

import dev.kvrouter.index.wire.AllBlocksCleared;
import dev.kvrouter.index.wire.BlockRemoved;
import dev.kvrouter.index.wire.KvEvent;
import java.util.ArrayList;
import java.util.List;
import net.openhft.hashing.LongHashFunction;

/**
 * vLLM's {@code BlockPool}: a fixed set of KV blocks, their reference counts, the free-block queue and the
 * prefix-cache index from block identity to cached block.
 *
 * <p>The free queue is vLLM's eviction order. It holds every block with no reference, cached or not; allocation
 * takes from its head and evicts the block's cached content if it has any (emitting {@code BlockRemoved});
 * freeing appends at its tail. A cached block that gets a hit while free is "touched": taken out of the queue.
 * So the least recently freed unreferenced block is evicted first, and blocks that are referenced are never
 * evicted. Block 0 is vLLM's null block and never used.
 *
 * <p>Identity is the router's {@code BlockHasher} chain (model, adapter and salt folded in at the root), so
 * two requests share a block exactly when the router would say they do. The engine hash published in events is
 * a separate per-process handle: XXH3 of the identity under a seed drawn when the engine process starts, so
 * nothing outside the engine can compute it.
 *
 * <p>Single-threaded: owned by the engine thread.
 */
final class KvBlockPool {

  static final int NULL_BLOCK = 0;
  private static final int NONE = SlotList.NONE;

  private final int numBlocks;
  private final int[] refCnt;
  private final long[] identity;
  private final long[] engineHash;
  private final boolean[] cached;
  /** Next block with the same identity (vLLM keeps duplicates computed concurrently), or NONE. */
  private final int[] nextSame;
  /** vLLM's free-block queue: head is evicted next. */
  private final SlotList freeQueue;
  private final boolean[] inFreeQueue;
  private final LongIntHashMap index;
  private final LongHashFunction engineHasher;
  private final boolean emitEvents;
  /** Told the identity of a cached block about to be evicted (the offload connector's store fence), or null. */
  private java.util.function.LongConsumer beforeEvict;
  private List<KvEvent> events = new ArrayList<>();
  private int freeCount;
  private long evictions;

  KvBlockPool(int numBlocks, long engineHashSeed, boolean emitEvents) {
    if (numBlocks < 2) {
      throw new IllegalArgumentException("numBlocks must be >= 2");
    }
    this.numBlocks = numBlocks;
    this.refCnt = new int[numBlocks];
    this.identity = new long[numBlocks];
    this.engineHash = new long[numBlocks];
    this.cached = new boolean[numBlocks];
    this.nextSame = new int[numBlocks];
    this.freeQueue = new SlotList(numBlocks);
    this.inFreeQueue = new boolean[numBlocks];
    this.index = new LongIntHashMap(numBlocks);
    this.engineHasher = LongHashFunction.xx3(engineHashSeed);
    this.emitEvents = emitEvents;
    java.util.Arrays.fill(nextSame, NONE);
    // vLLM fills the free queue in block-id order and then takes the first block as the null block.
    for (int b = 1; b < numBlocks; b++) {
      append(b);
    }
  }

  int numBlocks() {
    return numBlocks;
  }

  /** Sets the hook told of every cached block's identity just before the block is evicted. */
  void beforeEvict(java.util.function.LongConsumer hook) {
    this.beforeEvict = hook;
  }

  int freeCount() {
    return freeCount;
  }

  /** Fraction of usable blocks that are referenced by requests, vLLM's {@code kv_cache_usage}. */
  double usage() {
    return 1.0 - (double) freeCount / (numBlocks - 1);
  }

  int refCnt(int block) {
    return refCnt[block];
  }

  boolean isCached(int block) {
    return cached[block];
  }

  long identityOf(int block) {
    return identity[block];
  }

  long engineHashOf(int block) {
    return engineHash[block];
  }

  int cachedBlockCount() {
    int n = 0;
    for (int b = 1; b < numBlocks; b++) {
      if (cached[b]) {
        n++;
      }
    }
    return n;
  }

  /** Identities of all cached blocks, duplicates included; for tests. */
  long[] cachedIdentities() {
    long[] out = new long[numBlocks];
    int[] n = {0};
    forEachCachedIdentity(id -> out[n[0]++] = id);
    return java.util.Arrays.copyOf(out, n[0]);
  }

  /** Feeds every cached block's identity, duplicates included. */
  void forEachCachedIdentity(java.util.function.LongConsumer sink) {
    for (int b = 1; b < numBlocks; b++) {
      if (cached[b]) {
        sink.accept(identity[b]);
      }
    }
  }

  long evictions() {
    return evictions;
  }

  /** The engine's handle for a block identity: stable within this engine process only. */
  long engineHash(long blockIdentity) {
    return engineHasher.hashLong(blockIdentity);
  }

  /** A cached block with this identity, or -1. */
  int lookup(long blockIdentity) {
    return index.get(blockIdentity);
  }

  /** Takes a reference on a block found by {@link #lookup}; a free block leaves the free queue. */
  void touch(int block) {
    if (refCnt[block] == 0) {
      unlink(block);
    }
    refCnt[block]++;
  }

  /** Allocates the block at the head of the free queue, evicting its cached content first. */
  int allocate() {
    int b = freeQueue.head();
    if (b == NONE) {
      throw new IllegalStateException("no free KV block");
    }
    unlink(b);
    if (cached[b]) {
      evict(b);
    }
    refCnt[b] = 1;
    return b;
  }

  /** Drops one reference; a block nobody references joins the tail of the free queue (still cached). */
  void release(int block) {
    if (refCnt[block] <= 0) {
      throw new IllegalStateException("block " + block + " released more often than referenced");
    }
    if (--refCnt[block] == 0) {
      append(block);
    }
  }

  /** Marks a full, referenced block as cached under {@code blockIdentity}; returns its engine hash. */
  long cache(int block, long blockIdentity) {
    if (cached[block]) {
      throw new IllegalStateException("block " + block + " is already cached");
    }
    long eh = engineHash(blockIdentity);
    cached[block] = true;
    identity[block] = blockIdentity;
    engineHash[block] = eh;
    nextSame[block] = NONE;
    int first = index.get(blockIdentity);
    if (first == LongIntHashMap.MISSING) {
      index.put(blockIdentity, block);
    } else {
      int b = first;
      while (nextSame[b] != NONE) {
        b = nextSame[b];
      }
      nextSame[b] = block;
    }
    return eh;
  }

  /** Records a store event (called by the cache manager, which knows the request's tokens). */
  void emit(KvEvent event) {
    if (emitEvents) {
      events.add(event);
    }
  }

  /** The events produced since the last call, in order. */
  List<KvEvent> takeEvents() {
    if (events.isEmpty()) {
      return List.of();
    }
    List<KvEvent> out = events;
    events = new ArrayList<>();
    return out;
  }

  /**
   * vLLM's {@code reset_prefix_cache}: forgets every cached block, but only when no request holds a block.
   *
   * @return false (and changes nothing) if some block is still referenced
   */
  boolean resetPrefixCache() {
    if (freeCount != numBlocks - 1) {
      return false;
    }
    for (int b = 1; b < numBlocks; b++) {
      cached[b] = false;
      nextSame[b] = NONE;
    }
    index.clear();
    emit(AllBlocksCleared.INSTANCE);
    return true;
  }

  private void evict(int b) {
    long id = identity[b];
    if (beforeEvict != null) {
      beforeEvict.accept(id);
    }
    int first = index.get(id);
    if (first == b) {
      if (nextSame[b] == NONE) {
        index.remove(id);
      } else {
        index.put(id, nextSame[b]);
      }
    } else {
      int p = first;
      while (p != NONE && nextSame[p] != b) {
        p = nextSame[p];
      }
      if (p == NONE) {
        throw new IllegalStateException("cached block " + b + " missing from the index");
      }
      nextSame[p] = nextSame[b];
    }
    nextSame[b] = NONE;
    cached[b] = false;
    evictions++;
    emit(new BlockRemoved(new long[] {engineHash[b]}, KvCacheManager.MEDIUM_GPU, KvCacheManager.GROUP, null, null));
  }

  private void append(int b) {
    freeQueue.append(b);
    inFreeQueue[b] = true;
    freeCount++;
  }

  private void unlink(int b) {
    if (!inFreeQueue[b]) {
      throw new IllegalStateException("block " + b + " is not in the free queue");
    }
    freeQueue.unlink(b);
    inFreeQueue[b] = false;
    freeCount--;
  }

  /** The free queue from head (next to evict) to tail; for tests and invariant checks. */
  int[] freeQueue() {
    int[] out = new int[freeCount];
    int i = 0;
    for (int b = freeQueue.head(); b != NONE; b = freeQueue.next(b)) {
      out[i++] = b;
    }
    return out;
  }

  /**
   * Checks every structural invariant; throws {@link IllegalStateException} on the first violation. O(blocks),
   * for tests.
   */
  void checkInvariants() {
    int n = 0;
    int last = NONE;
    for (int b = freeQueue.head(); b != NONE; b = freeQueue.next(b)) {
      if (n++ > numBlocks) {
        throw new IllegalStateException("free queue has a cycle");
      }
      if (!inFreeQueue[b] || refCnt[b] != 0 || freeQueue.prev(b) != last || b == NULL_BLOCK) {
        throw new IllegalStateException("free queue corrupt at block " + b);
      }
      last = b;
    }
    if (n != freeCount || last != freeQueue.tail()) {
      throw new IllegalStateException("free count " + freeCount + " but queue holds " + n);
    }
    int indexed = 0;
    for (int b = 1; b < numBlocks; b++) {
      if (refCnt[b] < 0) {
        throw new IllegalStateException("negative refcount on block " + b);
      }
      if ((refCnt[b] == 0) != inFreeQueue[b]) {
        throw new IllegalStateException("block " + b + " refcount " + refCnt[b] + " vs free queue membership");
      }
      if (cached[b]) {
        int p = index.get(identity[b]);
        boolean found = false;
        while (p != NONE && p != LongIntHashMap.MISSING) {
          if (p == b) {
            found = true;
            break;
          }
          p = nextSame[p];
        }
        if (!found) {
          throw new IllegalStateException("cached block " + b + " unreachable from the index");
        }
        if (index.get(identity[b]) == b) {
          indexed++;
        }
      }
    }
    if (indexed != index.size()) {
      throw new IllegalStateException("index holds " + index.size() + " identities, " + indexed + " heads found");
    }
  }
}
