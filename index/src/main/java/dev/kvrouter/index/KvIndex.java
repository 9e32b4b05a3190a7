package dev.kvrouter.index;

import dev.kvrouter.index.media.MediaIdentities;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import org.slf4j.LoggerFactory;

/**
 * Which worker holds which block, from the workers' KV events and the router's own predictions.
 *
 * <p>Blocks are keyed by the router's own chained hash ({@link dev.kvrouter.index.block.BlockHasher}), never by
 * an engine's hash. A lookup takes a request's block hashes and answers, per worker holding the first block,
 * the number of leading blocks it holds, split by tier, the predicted overlap and whether the worker's view
 * is stale ({@link PrefixMatches}); its cost grows with the request's blocks, not with the index.
 *
 * <h2>Concurrency contract</h2>
 * <ul>
 *   <li>Lookups ({@link #newCursor()}, {@link #lookup}) run on any thread, take no lock and never block
 *       writers (validated lock-free reads of the table's segments, see {@link BlockTable}).
 *   <li>Each worker's {@link WorkerView} has a single writer: the thread applying that worker's events.
 *   <li>Predictions ({@link #predict}) are queued by request threads and applied by one owner at a time.
 *   <li>{@link #register} and {@link #remove} are rare and synchronized; {@link #remove} must not run while
 *       the worker's writer is active (the subscriber removes from the writer's own thread).
 * </ul>
 *
 * <p>Bounded: event residencies are capped at {@link IndexConfig#maxEntries} (each worker evicts its own
 * beyond its fair share), predictions at {@link IndexConfig#maxPredicted}.
 */
public final class KvIndex {

  private final IndexConfig config;
  private final Clock clock;
  private final BlockTable table;
  private final PredictedBlocks predicted;
  private final MediaIdentities media;
  private final Map<WorkerId, WorkerView> views = new ConcurrentHashMap<>();
  private volatile WorkerView[] byOrdinal = new WorkerView[64];
  /** Ids by ordinal for lookups (null: free, or being removed); replaced, never mutated, on changes. */
  private volatile WorkerId[] idByOrdinal = new WorkerId[64];
  /** Stale flags by ordinal, one bit each, so a lookup reads them without touching the views. */
  private final AtomicLongArray staleBits = new AtomicLongArray((BlockTable.MAX_ORDINAL >>> 6) + 1);
  /**
   * Per ordinal: the worker's view may not be prefix-closed, or holds CPU/disk blocks, so the jump search must not
   * skip its blocks ({@link WorkerView#open()}).
   */
  private final AtomicLongArray openBits = new AtomicLongArray((BlockTable.MAX_ORDINAL >>> 6) + 1);
  private volatile int ordinalWords = 1;
  /**
   * Registrations so far, counted before each is published: a lookup notes it when it starts and drops candidates
   * whose view was registered after that (an ordinal is reused as soon as its worker is removed, so a lookup that
   * read the removed worker's blocks must not credit them to the worker now named by that ordinal).
   */
  private volatile long registrations;
  private volatile int perWorkerCap;
  private volatile long evictionsOfRemoved;
  private final AtomicLong predictionsRejected = new AtomicLong();
  private final AtomicLong cacheResets = new AtomicLong();
  private final boolean[] ordinalUsed = new boolean[BlockTable.MAX_ORDINAL + 1];
  /**
   * The workers the fleet lists, as its owner last said ({@link #setFleet}), or null if it never did: a worker
   * {@link #predict} would register must be one of them, so a prediction made for a worker that left (an in-flight
   * request's, a late background one) cannot bring it back with an ordinal, a share of
   * {@link IndexConfig#maxEntries} and long-lived predicted entries. Written and read under {@code this}.
   */
  private Set<WorkerId> fleet;

  public KvIndex(IndexConfig config, Clock clock) {
    this.config = Objects.requireNonNull(config, "config");
    this.clock = Objects.requireNonNull(clock, "clock");
    this.table = new BlockTable(config.segments(), 64);
    this.predicted = new PredictedBlocks(table, config.maxPredicted(), config.predictionQueue(),
        config.predictedTtl().toMillis(), config.approximateTtl().toMillis());
    this.media = new MediaIdentities(config.media(), clock);
    updateCap();
  }

  public IndexConfig config() {
    return config;
  }

  /** Engine identifiers learned for media sent without a uuid (the event path fills it, requests read it). */
  public MediaIdentities media() {
    return media;
  }

  // ------------------------------------------------------------------------------------------------------
  // Workers

  /** The view of {@code id}, created (with a free ordinal) if needed. */
  public synchronized WorkerView register(WorkerId id) {
    WorkerView v = views.get(id);
    if (v != null) {
      return v;
    }
    int ord = 0;
    while (ord <= BlockTable.MAX_ORDINAL && ordinalUsed[ord]) {
      ord++;
    }
    if (ord > BlockTable.MAX_ORDINAL) {
      throw new IllegalStateException("more than " + (BlockTable.MAX_ORDINAL + 1) + " workers");
    }
    ordinalUsed[ord] = true;
    // counted before the view is published, so a lookup that can see it can also see that it is newer than itself
    long registration = registrations + 1;
    registrations = registration;
    // the ordinal's previous owner left its flags behind: reset them before anyone can name the new worker
    setStaleBit(ord, false);
    setOpenBit(ord, false);
    v = new WorkerView(this, table, id, ord, registration);
    WorkerView[] arr = byOrdinal;
    if (ord >= arr.length) {
      arr = Arrays.copyOf(arr, Math.max(arr.length * 2, ord + 1));
    } else {
      arr = arr.clone();
    }
    arr[ord] = v;
    byOrdinal = arr;
    WorkerId[] ids = Arrays.copyOf(idByOrdinal, arr.length);
    ids[ord] = id;
    idByOrdinal = ids;
    ordinalWords = Math.max(ordinalWords, (ord >>> 6) + 1);
    views.put(id, v);
    updateCap();
    return v;
  }

  /**
   * The workers in the fleet now (every worker and DP rank that may be routed to): {@link #predict} registers no
   * other. Call it on every fleet change before removing the workers that left; until it is first called,
   * predictions register any worker. Registering and removing are still the caller's ({@link #register},
   * {@link #remove}, the event subscriber).
   */
  public synchronized void setFleet(Collection<WorkerId> workers) {
    // under the lock predict() registers under: a prediction checked against the old fleet has registered its
    // worker before this returns, so the caller's removal of the workers that left sees it
    fleet = Set.copyOf(workers);
  }

  /** The view of {@code id}, or {@code null} if it is not registered. */
  public WorkerView view(WorkerId id) {
    return views.get(id);
  }

  /** Registered workers. */
  public List<WorkerId> workers() {
    return new ArrayList<>(views.keySet());
  }

  /**
   * Forgets a worker: all its blocks and predictions, then frees its ordinal. Must not run while the worker's
   * event writer is active.
   */
  public synchronized void remove(WorkerId id) {
    WorkerView v = views.remove(id);
    if (v == null) {
      return;
    }
    WorkerId[] ids = idByOrdinal.clone();
    ids[v.ordinal()] = null; // lookups stop reporting it before its blocks go
    idByOrdinal = ids;
    v.retire();
    evictionsOfRemoved += v.evictions();
    v.clear();
    predicted.purge(v.ordinal(), clock.millis());
    WorkerView[] arr = byOrdinal.clone();
    arr[v.ordinal()] = null;
    byOrdinal = arr;
    ordinalUsed[v.ordinal()] = false;
    updateCap();
  }

  /** {@code view}'s engine emptied its cache: counts the reset and drops the worker's predicted entries. */
  void cacheReset(WorkerView view) {
    cacheResets.incrementAndGet();
    if (!view.retired()) {
      predicted.purge(view.ordinal(), clock.millis());
    }
  }

  /**
   * How many times a worker's engine emptied its cache ({@code AllBlocksCleared}, a restarted event stream) since
   * start. Blocks lost that way were not evicted for want of memory; readers of eviction history use the count to
   * tell the two apart.
   */
  public long cacheResets() {
    return cacheResets.get();
  }

  WorkerView viewAt(int ordinal) {
    WorkerView[] arr = byOrdinal;
    return ordinal < arr.length ? arr[ordinal] : null;
  }

  WorkerId[] idsByOrdinal() {
    return idByOrdinal;
  }

  /** Registrations so far (see {@link #registrations}); {@link WorkerView#registration()} is a view's number. */
  long registrations() {
    return registrations;
  }

  /** Stale flags of ordinals {@code 64 * word} to {@code 64 * word + 63}, one bit each. */
  long staleWord(int word) {
    return staleBits.get(word);
  }

  boolean staleBit(int ordinal) {
    return (staleBits.get(ordinal >>> 6) & (1L << ordinal)) != 0;
  }

  void setStaleBit(int ordinal, boolean stale) {
    setBit(staleBits, ordinal, stale);
  }

  /** Open flags (see {@link #openBits}) of ordinals {@code 64 * word} to {@code 64 * word + 63}. */
  long openWord(int word) {
    return openBits.get(word);
  }

  void setOpenBit(int ordinal, boolean open) {
    setBit(openBits, ordinal, open);
  }

  /** Sets or clears one ordinal's bit; other writers may change other bits of the same word concurrently. */
  private static void setBit(AtomicLongArray bits, int ordinal, boolean on) {
    int w = ordinal >>> 6;
    long bit = 1L << ordinal;
    long cur;
    do {
      cur = bits.get(w);
      if (((cur & bit) != 0) == on) {
        return; // unchanged: no write, so lookups reading the word keep their cache line
      }
    } while (!bits.compareAndSet(w, cur, on ? cur | bit : cur & ~bit));
  }

  int ordinalWords() {
    return ordinalWords;
  }

  int perWorkerCap() {
    return perWorkerCap;
  }

  private void updateCap() {
    long share = config.maxEntries() / Math.max(1, views.size());
    perWorkerCap = (int) Math.min(Integer.MAX_VALUE - 8, Math.max(config.minEntriesPerWorker(), share));
  }

  // ------------------------------------------------------------------------------------------------------
  // Reads

  /** A reusable, single-threaded lookup cursor (keep one per request thread). */
  public PrefixCursor newCursor() {
    return new PrefixCursor(this, table);
  }

  /** Looks up {@code hashes[0, count)} with {@code cursor}, writing the answer into {@code out}. */
  public void lookup(PrefixCursor cursor, long[] hashes, int count, PrefixMatches out) {
    cursor.lookup(hashes, count);
    cursor.finish(out);
  }

  /** Convenience form that allocates a cursor and a result. */
  public PrefixMatches lookup(long[] hashes, int count) {
    PrefixMatches out = new PrefixMatches();
    lookup(newCursor(), hashes, count, out);
    return out;
  }

  /** The number of leading blocks of {@code hashes[0, count)} that at least one worker holds entirely. */
  public int longestHeldPrefix(PrefixCursor cursor, long[] hashes, int count) {
    return cursor.lookup(hashes, count);
  }

  // ------------------------------------------------------------------------------------------------------
  // Predictions

  /**
   * Records that the router sent {@code hashes[0, count)} to {@code worker}: the blocks count as predicted on
   * it for {@link IndexConfig#predictedTtl} (workers with an event stream) or {@link IndexConfig#approximateTtl}
   * (workers without). A worker not registered yet is registered (approximate mode needs no other step) if the
   * fleet lists it ({@link #setFleet}); a prediction for a worker the fleet no longer lists is dropped. Never blocks;
   * returns false if the prediction queue was full or the worker is not in the fleet or could not be registered
   * (counted).
   */
  public boolean predict(WorkerId worker, long[] hashes, int count) {
    WorkerView v = views.get(worker);
    if (v == null) {
      v = registerIfInFleet(worker);
      if (v == null) {
        predictionsRejected.incrementAndGet();
        return false;
      }
    }
    int ttlClass = v.hasEventStream() ? PredictedBlocks.SHORT : PredictedBlocks.LONG;
    return predicted.offer(v, hashes, count, ttlClass, clock.millis());
  }

  /** {@link #register}, unless the fleet does not list {@code id} or no ordinal is free. */
  private synchronized WorkerView registerIfInFleet(WorkerId id) {
    if (fleet != null && !fleet.contains(id)) {
      return null; // it left: the fleet's owner removed it or is about to
    }
    try {
      return register(id);
    } catch (IllegalStateException full) {
      return null; // no free ordinal: never fail the request path
    }
  }

  /** Applies queued predictions and expires old ones; schedule it (say every 100 ms to 1 s). */
  public void maintain() {
    predicted.maintain(clock.millis());
  }

  /** Runs {@link #maintain()} every {@code period} on {@code executor} (the wiring owns the executor). */
  public ScheduledFuture<?> scheduleMaintenance(ScheduledExecutorService executor, Duration period) {
    long ms = Math.max(1, period.toMillis());
    return executor.scheduleWithFixedDelay(() -> {
      try {
        maintain();
      } catch (RuntimeException e) {
        LoggerFactory.getLogger(KvIndex.class).error("index maintenance failed", e);
      }
    }, ms, ms, TimeUnit.MILLISECONDS);
  }

  // ------------------------------------------------------------------------------------------------------
  // Statistics (racy, for gauges)

  /** Event residencies: (worker, block) pairs from events, summed over workers. */
  public long entries() {
    long n = 0;
    for (WorkerView v : views.values()) {
      n += v.size();
    }
    return n;
  }

  /** Distinct blocks in the shared table (events and predictions). */
  public long distinctBlocks() {
    return table.size();
  }

  /** Blocks held by more than three workers (their holders live in bitsets). */
  public long sharedBlocks() {
    return table.overflowBlocks();
  }

  /** Live predicted entries. */
  public int predictedEntries() {
    return predicted.size();
  }

  /** Predictions not recorded: the queue was full, the worker is not in the fleet, or it could not be registered. */
  public long predictionsDropped() {
    return predicted.dropped() + predictionsRejected.get();
  }

  public long predictionsExpired() {
    return predicted.expired();
  }

  public long predictionsEvicted() {
    return predicted.evicted();
  }

  /** Entries evicted because workers exceeded their share (monotonic: removed workers' evictions stay counted). */
  public long evictions() {
    long n = evictionsOfRemoved;
    for (WorkerView v : views.values()) {
      n += v.evictions();
    }
    return n;
  }

  /**
   * Approximate bytes held by the table, the per-worker maps and the predictions (rings, multiplicities, queue
   * slots): what {@link IndexConfig#maxEntries} and {@link IndexConfig#maxPredicted} bound. The media identifiers
   * are measured apart ({@link MediaIdentities#footprintBytes}): an estimate that walks their caches.
   */
  public long footprintBytes() {
    long n = table.footprintBytes() + predicted.footprintBytes();
    for (WorkerView v : views.values()) {
      n += v.footprintBytes();
    }
    return n;
  }
}
