package dev.kvrouter.examples.sim.engine;

import dev.kvrouter.index.wire.BlockRemoved;
import dev.kvrouter.index.wire.BlockStored;
import dev.kvrouter.index.wire.KvEvent;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * vLLM's native CPU offload tier on the scheduler side: its {@code LRUOffloadingManager} over a CPU backend of a
 * fixed number of blocks ({@code vllm/v1/kv_offload/lru_manager.py}, {@code cpu/policies/lru.py}).
 *
 * <ul>
 *   <li>A block is keyed by its prefix-cache identity. It is <em>allocated</em> when a store is prepared and only
 *       becomes <em>ready</em> (found by {@link #lookup}, evictable) when the copy completes
 *       ({@link #completeStore}); vLLM marks the not-ready state with {@code ref_cnt = -1}.
 *   <li>Order is least recently used first. New blocks join as most recent; {@link #touch} moves a request's
 *       blocks to most recent in reverse, so the head of a prefix ends up the most recent of all and is evicted
 *       last.
 *   <li>{@link #prepareStore} skips blocks already held, then evicts the least recently used ready blocks nobody
 *       is loading, as many as the new ones need; when too few can be evicted it stores nothing and returns
 *       {@code null} (vLLM logs "cannot store" and the connector retries at the next step).
 *   <li>Events, as the connector publishes them with vLLM's default (not self-describing) payloads: one
 *       {@code BlockRemoved} with every hash evicted by one store, and one {@code BlockStored} per completed store
 *       with the hashes it made ready, no parent, no tokens, block size 0, medium {@code "CPU"}. The hashes are
 *       the engine's own block hashes: the offloaded block size equals the GPU block size, so an offloaded block
 *       keeps its GPU name.
 * </ul>
 *
 * <p>Memory is bounded: {@code capacity} slots allocated up front. Single-threaded: owned by the engine thread.
 */
final class CpuOffloadManager {

  /** vLLM's {@code MEDIUM_CPU} ({@code CPULoadStoreSpec.medium()}). */
  static final String MEDIUM_CPU = "CPU";
  private static final int NONE = SlotList.NONE;
  private static final int STORING = -1;

  private final int capacity;
  private final long[] identity;
  private final long[] engineHash;
  /** -1 while the store copy is in flight, else the number of loads reading the block. */
  private final int[] refCnt;
  /** Least recently used first. */
  private final SlotList lru;
  private final int[] freeSlots;
  private int freeTop;
  private final LongIntHashMap index;
  private List<KvEvent> events = new ArrayList<>();
  private long evictions;

  CpuOffloadManager(int capacity) {
    if (capacity < 1) {
      throw new IllegalArgumentException("capacity must be >= 1");
    }
    this.capacity = capacity;
    this.identity = new long[capacity];
    this.engineHash = new long[capacity];
    this.refCnt = new int[capacity];
    this.lru = new SlotList(capacity);
    this.freeSlots = new int[capacity];
    this.index = new LongIntHashMap(capacity);
    for (int i = 0; i < capacity; i++) {
      freeSlots[i] = capacity - 1 - i;
    }
    freeTop = capacity;
  }

  int capacity() {
    return capacity;
  }

  /** Blocks held, ready or being stored. */
  int size() {
    return capacity - freeTop;
  }

  long evictions() {
    return evictions;
  }

  boolean contains(long id) {
    return index.get(id) != LongIntHashMap.MISSING;
  }

  /** Whether the block is held and its store copy has completed. */
  boolean isReady(long id) {
    int s = index.get(id);
    return s != LongIntHashMap.MISSING && refCnt[s] != STORING;
  }

  /** Whether the block's store copy is still in flight. */
  boolean isStoring(long id) {
    int s = index.get(id);
    return s != LongIntHashMap.MISSING && refCnt[s] == STORING;
  }

  /** Number of consecutive ready blocks from {@code ids[from]} ({@code LRUOffloadingManager.lookup}). */
  int lookup(long[] ids, int from, int to) {
    int hits = 0;
    for (int i = from; i < to; i++) {
      int s = index.get(ids[i]);
      if (s == LongIntHashMap.MISSING || refCnt[s] == STORING) {
        break;
      }
      hits++;
    }
    return hits;
  }

  /** Marks {@code ids[from, to)} most recently used, last one first, so {@code ids[from]} ends up the most recent. */
  void touch(long[] ids, int from, int to) {
    for (int i = to - 1; i >= from; i--) {
      int s = index.get(ids[i]);
      if (s != LongIntHashMap.MISSING && s != lru.tail()) {
        lru.unlink(s);
        lru.append(s);
      }
    }
  }

  /**
   * Allocates CPU blocks for the blocks of {@code ids} not yet held, evicting the least recently used ready blocks
   * that no load is reading if there is no room.
   *
   * @param hashes the engine hashes of {@code ids}, for the events
   * @return the indices (into {@code ids}) of the blocks to copy, possibly empty; {@code null} if too few blocks
   *     could be evicted, in which case nothing changed
   */
  int[] prepareStore(long[] ids, long[] hashes) {
    int[] toStore = new int[ids.length];
    int n = 0;
    for (int i = 0; i < ids.length; i++) {
      if (!contains(ids[i])) {
        toStore[n++] = i;
      }
    }
    int evict = n - freeTop;
    if (evict > 0) {
      int[] victims = new int[evict];
      int found = 0;
      for (int s = lru.head(); s != NONE && found < evict; s = lru.next(s)) {
        if (refCnt[s] == 0) {
          victims[found++] = s;
        }
      }
      if (found < evict) {
        return null;
      }
      long[] removed = new long[evict];
      for (int k = 0; k < evict; k++) {
        int s = victims[k];
        removed[k] = engineHash[s];
        index.remove(identity[s]);
        lru.unlink(s);
        freeSlots[freeTop++] = s;
      }
      evictions += evict;
      events.add(new BlockRemoved(removed, MEDIUM_CPU, KvCacheManager.GROUP, null, null));
    }
    for (int k = 0; k < n; k++) {
      int i = toStore[k];
      int s = freeSlots[--freeTop];
      identity[s] = ids[i];
      engineHash[s] = hashes[i];
      refCnt[s] = STORING;
      index.put(ids[i], s);
      lru.append(s);
    }
    return Arrays.copyOf(toStore, n);
  }

  /** The store copies of {@code ids} completed: they become ready, announced in one {@code BlockStored}. */
  void completeStore(long[] ids) {
    long[] stored = new long[ids.length];
    int n = 0;
    for (long id : ids) {
      int s = index.get(id);
      if (s != LongIntHashMap.MISSING && refCnt[s] == STORING) {
        refCnt[s] = 0;
        stored[n++] = engineHash[s];
      }
    }
    if (n > 0) {
      events.add(new BlockStored(Arrays.copyOf(stored, n), null, new int[0], 0, null, MEDIUM_CPU, null, null,
          KvCacheManager.GROUP, null, null, null, null, null, null));
    }
  }

  /** A load starts reading {@code ids[from, to)}: they cannot be evicted until {@link #completeLoad}. */
  void prepareLoad(long[] ids, int from, int to) {
    for (int i = from; i < to; i++) {
      int s = index.get(ids[i]);
      if (s == LongIntHashMap.MISSING || refCnt[s] == STORING) {
        throw new IllegalStateException("load of a CPU block that is not ready");
      }
      refCnt[s]++;
    }
  }

  void completeLoad(long[] ids, int from, int to) {
    for (int i = from; i < to; i++) {
      int s = index.get(ids[i]);
      if (s == LongIntHashMap.MISSING || refCnt[s] <= 0) {
        throw new IllegalStateException("load completion of a CPU block nobody was loading");
      }
      refCnt[s]--;
    }
  }

  /** Forgets every block (reset with the prefix cache); false, changing nothing, while a copy is in flight. */
  boolean clear() {
    for (int s = lru.head(); s != NONE; s = lru.next(s)) {
      if (refCnt[s] != 0) {
        return false;
      }
    }
    index.clear();
    lru.clear();
    freeTop = capacity;
    for (int i = 0; i < capacity; i++) {
      freeSlots[i] = capacity - 1 - i;
    }
    return true;
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

  /** Identities from least to most recently used; for tests. */
  long[] lruOrder() {
    long[] out = new long[size()];
    int i = 0;
    for (int s = lru.head(); s != NONE; s = lru.next(s)) {
      out[i++] = identity[s];
    }
    return out;
  }
}
