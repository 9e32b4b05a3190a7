package dev.kvrouter.index.media;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.RemovalCause;
import dev.kvrouter.index.WorkerId;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;

/**
 * Engine identifiers of media items the client sent without a {@code uuid}, learned from the workers' KV events.
 *
 * <p>Without a uuid the router names an item {@code kvr1-mm:<modality>:<hash of URL or bytes>}; vLLM names it by a
 * hash of the decoded media, which the router cannot compute. The two meet at a block both can name: the parent of
 * the item's first block (the text before the item, or items already resolved, hash alike in both spaces). When the
 * router sends such an item to worker W, it {@link #expect expects} it at (W, that parent, offset within the block).
 * When W then stores a block under that parent whose extra keys hold an {@code [identifier, offset]} pair at that
 * offset, the store {@link #observe names} the engine's identifier E, and {@code (namespace, kvr1-mm:...) -> E} is
 * learned. Later requests hash the item as E ({@link #engineId}), so their blocks match the engine's events on
 * every worker (same bytes, same vLLM hash). The request's later unresolved items are read from the same store
 * ({@link FollowUp}, {@link Chain}): their parents depend on the first item's identifier, so only that store, whose
 * chain is the engine's, places them.
 *
 * <p>Several items may wait after the same text on one worker (one system prompt, many images): the oldest waiting
 * at the observed offset is taken, as an engine schedules requests first come first served. An engine identifier
 * already learned for another item of the namespace is not attributed again (that store is most likely a learned
 * item's, routed to a worker that lacked it); the same content under two URLs is therefore learned once. A store
 * that names another identifier for an item already learned replaces it (the URL's content changed, or an earlier
 * attribution was wrong) and counts a conflict. None of this touches a request: the learned identifier only enters
 * the router's own hashes, never the body sent to the engine, so a wrong mapping costs routing quality (a worker
 * credited with blocks it lacks, or missed), never correctness.
 *
 * <p>Scope: every key carries the cache namespace's root ({@code CacheNamespace.rootSeed()}: model, adapter,
 * effective salt), so tenants with distinct salts never share a learned identifier; parents are namespace-specific
 * hashes, so a tenant's store can only answer that tenant's pending items.
 *
 * <p>Bounded (Caffeine): learned entries by {@link MediaIdentityConfig#maxLearned} and its TTL, pending slots by
 * {@link MediaIdentityConfig#maxPending} with {@link MediaIdentityConfig#PER_SLOT} entries each and their TTL.
 *
 * <p>Thread-safe: request threads call {@link #engineId} and {@link #expect}, each worker's event thread calls
 * {@link #observe}; each slot and each learned entry is updated atomically ({@code compute}). Time comes from the
 * clock given, so tests and virtual runs control it.
 */
public final class MediaIdentities {

  private final MediaIdentityConfig config;
  private final Clock clock;
  private final long pendingTtlMillis;
  private final Cache<Named, String> learned;
  /** Which router identifier each learned engine identifier was learned for, per namespace. */
  private final Cache<Named, String> learnedFor;
  private final Cache<Slot, List<Pending>> pending;
  private final LongAdder learnedCount = new LongAdder();
  private final LongAdder used = new LongAdder();
  private final LongAdder conflicts = new LongAdder();
  private final LongAdder claimed = new LongAdder();
  private final LongAdder evicted = new LongAdder();
  private final LongAdder expected = new LongAdder();

  /** A cache entry's own objects: Caffeine's node (with its expiry links) and the map's node and table slot. */
  private static final long ENTRY_BYTES = 96;
  private static final long NAMED_BYTES = 24;
  private static final long SLOT_BYTES = 24;
  private static final long LIST_BYTES = 40;
  private static final long PENDING_BYTES = 40;
  private static final long FOLLOW_UP_BYTES = 24;

  /** An identifier in a namespace (root seed of the cache namespace). */
  private record Named(long namespace, String id) {}

  /** Where an item is awaited: a worker and our hash of the block before the item's first block. */
  private record Slot(WorkerId worker, long parent) {}

  /** One routed item awaiting its worker's store, with the request's later unresolved items. */
  private record Pending(long namespace, String routerId, int offset, long atMillis, List<FollowUp> rest) {}

  /** The learning from one observed store, decided under the slot's lock and applied after it. */
  private record Match(Pending item, String engineId) {}

  /**
   * A later item without a known engine identifier in the same request: its first block is {@code blocks} blocks
   * after the awaited item's first block, and it starts {@code offset} tokens into it. Its parent in our hash space
   * depends on the awaited item's engine identifier, so it cannot be awaited by parent; it is read from the same
   * store, once the awaited item was found in it.
   */
  public record FollowUp(int blocks, int offset, String routerId) {
    public FollowUp {
      Objects.requireNonNull(routerId, "routerId");
      if (blocks < 0 || offset < 0) {
        throw new IllegalArgumentException("follow-up needs blocks >= 0 and offset >= 0");
      }
    }
  }

  /**
   * The later items of a request whose awaited item a store just named; the event path feeds it the same store's
   * following media blocks ({@link #observe(int, String[], int[], int)}). Confined to the event thread.
   */
  public final class Chain {
    private final long namespace;
    private final List<FollowUp> rest;

    private Chain(long namespace, List<FollowUp> rest) {
      this.namespace = namespace;
      this.rest = rest;
    }

    /** A media block {@code blocks} blocks after the awaited item's first block, in the same store. */
    public void observe(int blocks, String[] ids, int[] offsets, int count) {
      for (FollowUp f : rest) {
        if (f.blocks == blocks) {
          String e = idAt(ids, offsets, count, f.offset);
          if (e != null) {
            String owner = learnedFor.getIfPresent(new Named(namespace, e));
            if (owner == null || owner.equals(f.routerId)) {
              learn(namespace, f.routerId, e);
            } else {
              claimed.increment();
            }
          }
        }
      }
    }
  }

  public MediaIdentities(MediaIdentityConfig config, Clock clock) {
    this.config = Objects.requireNonNull(config, "config");
    this.clock = Objects.requireNonNull(clock, "clock");
    this.pendingTtlMillis = config.pendingTtl().toMillis();
    learned = bounded(config.maxLearned(), config.learnedTtl())
        .removalListener((Named k, String v, RemovalCause cause) -> {
          if (cause.wasEvicted()) {
            evicted.increment();
          }
        })
        .build();
    learnedFor = bounded(config.maxLearned(), config.learnedTtl()).build();
    pending = bounded(config.maxPending(), config.pendingTtl()).build();
  }

  /** A table of at most {@code max} entries, each kept {@code ttl} after its last write, on the index's clock. */
  private Caffeine<Object, Object> bounded(long max, Duration ttl) {
    return Caffeine.newBuilder().maximumSize(max).expireAfterWrite(ttl).ticker(this::nanos).executor(Runnable::run);
  }

  private long nanos() {
    return TimeUnit.MILLISECONDS.toNanos(clock.millis());
  }

  public boolean enabled() {
    return config.enabled();
  }

  /**
   * The engine identifier learned for {@code routerId} in {@code namespace}, or null. Request path, once per item
   * without a client uuid.
   */
  public String engineId(long namespace, String routerId) {
    if (!config.enabled()) {
      return null;
    }
    String e = learned.getIfPresent(new Named(namespace, routerId));
    if (e != null) {
      used.increment();
    }
    return e;
  }

  /**
   * The router sent an item without a known engine identifier to {@code worker}: its first block follows the block
   * we hash as {@code parent} (the namespace root for block 0), and the item starts {@code offset} tokens into that
   * block. {@code rest} are the request's later items that have no known engine identifier either, to be read from
   * the same store ({@link FollowUp}). Never blocks for long; a full slot drops its oldest entry.
   */
  public void expect(WorkerId worker, long parent, int offset, long namespace, String routerId,
      List<FollowUp> rest) {
    if (!config.enabled()) {
      return;
    }
    long now = clock.millis();
    Pending p = new Pending(namespace, routerId, offset, now, List.copyOf(rest));
    pending.asMap().compute(new Slot(worker, parent), (k, list) -> {
      List<Pending> next = new ArrayList<>(list == null ? 1 : list.size() + 1);
      if (list != null) {
        for (Pending q : list) {
          if (now - q.atMillis <= pendingTtlMillis && !(q.routerId.equals(routerId) && q.offset == offset
              && q.namespace == namespace)) {
            next.add(q); // a repeat of a waiting item keeps one entry, the newest
          }
        }
      }
      if (next.size() == MediaIdentityConfig.PER_SLOT) {
        next.remove(0);
      }
      next.add(p);
      return next;
    });
    expected.increment();
  }

  /**
   * {@code worker} stored a block whose parent we hash as {@code parent} and whose extra keys hold the multimodal
   * items {@code ids[0, count)} at {@code offsets} (relative to the block's first token). Event path, only for
   * blocks with media keys; a cheap miss when nothing is awaited there.
   *
   * @return the request's later items to read from the rest of this store, or null
   */
  public Chain observe(WorkerId worker, long parent, String[] ids, int[] offsets, int count) {
    if (!config.enabled() || count == 0 || pending.estimatedSize() == 0) {
      return null;
    }
    Slot slot = new Slot(worker, parent);
    if (pending.getIfPresent(slot) == null) {
      return null;
    }
    long now = clock.millis();
    Match[] found = new Match[1];
    pending.asMap().computeIfPresent(slot, (k, list) -> {
      List<Pending> live = new ArrayList<>(list.size());
      for (Pending q : list) {
        if (now - q.atMillis <= pendingTtlMillis) {
          live.add(q);
        }
      }
      for (int i = 0; i < live.size() && found[0] == null; i++) {
        Pending q = live.get(i);
        String e = idAt(ids, offsets, count, q.offset);
        if (e == null) {
          continue;
        }
        String owner = learnedFor.getIfPresent(new Named(q.namespace, e));
        if (owner != null && !owner.equals(q.routerId)) {
          claimed.increment(); // a learned item's store: not this one's
          return live.isEmpty() ? null : live;
        }
        found[0] = new Match(q, e);
        live.remove(i);
      }
      return live.isEmpty() ? null : live;
    });
    if (found[0] == null) {
      return null;
    }
    Pending item = found[0].item;
    learn(item.namespace, item.routerId, found[0].engineId);
    return item.rest.isEmpty() ? null : new Chain(item.namespace, item.rest);
  }

  /** The identifier of the item starting exactly {@code offset} tokens into the block, or null. */
  private static String idAt(String[] ids, int[] offsets, int count, int offset) {
    for (int j = 0; j < count; j++) {
      if (offsets[j] == offset) {
        return ids[j];
      }
    }
    return null;
  }

  private void learn(long namespace, String routerId, String engineId) {
    Named key = new Named(namespace, routerId);
    String[] replaced = new String[1];
    learned.asMap().compute(key, (k, old) -> {
      if (old != null && !old.equals(engineId)) {
        replaced[0] = old;
      }
      return engineId;
    });
    if (replaced[0] != null) {
      conflicts.increment();
      learnedFor.asMap().remove(new Named(namespace, replaced[0]), routerId);
    } else {
      learnedCount.increment();
    }
    learnedFor.put(new Named(namespace, engineId), routerId);
  }

  /** Runs pending expiry and eviction now (Caffeine otherwise does it on later reads and writes). */
  public void cleanUp() {
    learned.cleanUp();
    learnedFor.cleanUp();
    pending.cleanUp();
  }

  /** Identifiers learned (first time for a router identifier). */
  public long learnedTotal() {
    return learnedCount.sum();
  }

  /** Request-path items hashed with a learned identifier. */
  public long usedTotal() {
    return used.sum();
  }

  /** Stores that named another identifier for an item already learned (replaced). */
  public long conflictsTotal() {
    return conflicts.sum();
  }

  /** Stores at a pending slot whose identifier was already learned for another item (not attributed). */
  public long claimedTotal() {
    return claimed.sum();
  }

  /** Learned identifiers dropped by the size bound or the TTL. */
  public long evictedTotal() {
    return evicted.sum();
  }

  /** Items the router registered as awaiting their worker's store. */
  public long expectedTotal() {
    return expected.sum();
  }

  /** Learned identifiers held now (estimate). */
  public long learnedSize() {
    return learned.estimatedSize();
  }

  /** Pending slots held now (estimate). */
  public long pendingSlots() {
    return pending.estimatedSize();
  }

  /**
   * Approximate bytes held by the three caches (entries, their keys, identifiers and pending lists), for the
   * {@code kvrouter.index.media.memory} gauge. Walks every entry (at most {@link MediaIdentityConfig#maxLearned}
   * twice and {@link MediaIdentityConfig#maxPending} slots), so it is for a scrape, not for the request path.
   */
  public long footprintBytes() {
    long n = 0;
    for (Map.Entry<Named, String> e : learned.asMap().entrySet()) {
      n += ENTRY_BYTES + NAMED_BYTES + stringBytes(e.getKey().id()) + stringBytes(e.getValue());
    }
    for (Map.Entry<Named, String> e : learnedFor.asMap().entrySet()) {
      n += ENTRY_BYTES + NAMED_BYTES + stringBytes(e.getKey().id()); // the value is a learned entry's key
    }
    for (List<Pending> list : pending.asMap().values()) {
      n += ENTRY_BYTES + SLOT_BYTES + LIST_BYTES + 4L * list.size();
      for (Pending p : list) {
        n += PENDING_BYTES + stringBytes(p.routerId()) + LIST_BYTES + 4L * p.rest().size();
        for (FollowUp f : p.rest()) {
          n += FOLLOW_UP_BYTES + stringBytes(f.routerId());
        }
      }
    }
    return n;
  }

  /** A compact (Latin-1) string: the object and its byte array; identifiers are ASCII. */
  private static long stringBytes(String s) {
    return 40L + s.length();
  }
}
