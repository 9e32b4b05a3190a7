package dev.kvrouter.extproc.load;

import dev.kvrouter.index.LongIntMap;
import dev.kvrouter.index.WorkerId;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The router's own load accounting: per worker, the prefill tokens and KV blocks of the requests it has sent
 * there and not yet seen finish. Reserved at the routing decision, so the very next decision sees it; the
 * prefill part is released at the first response byte, the blocks when the response ends, is cancelled or is
 * reset; a reservation nobody released expires after the TTL. Every counter returns to zero.
 *
 * <p>Shared prefix blocks are counted once per worker: each worker keeps a reference count per active block
 * hash, and only the 0&rarr;1 and 1&rarr;0 transitions move its block counter. Because a request always holds a
 * whole chain of prefix blocks (block i's hash names blocks 0..i), the active set is prefix-closed along any
 * request's chain, which is what lets {@link #activePrefixBlocks} binary-search it.
 *
 * <p>Beside that memory view each worker keeps its context blocks: every in-flight request's blocks (prompt and
 * expected output) summed without deduplication, because a decode step reads each running sequence's KV
 * separately (paged attention), so twenty requests on one cached document read it twenty times per step. Charged
 * at the decision, released with the blocks when the response ends.
 *
 * <p>Concurrency: striped bookkeeping. Request threads reserve and release; one owner thread (the runtime's
 * scheduler) calls {@link #sweep} and {@link #retain}. Per-worker counters are atomics, block reference counts live
 * in a primitive map under the worker's lock (a boxed concurrent map allocated three objects per block of every
 * request, 27 KB for a 512-block prompt, a tenth of the router's allocation on long prompts), and each
 * reservation's two releases are guarded by a compare-and-set on its state, so a release, a cancel and an expiry
 * racing on the same reservation subtract exactly once. Readers get a {@link LocalLoad} snapshot: each counter is exact, the set
 * of them is read without a lock (a reader may see a reservation's tokens before its blocks), which routing
 * tolerates.
 */
public final class LoadLedger {

  private static final Logger log = LoggerFactory.getLogger(LoadLedger.class);

  private final FleetMap<WorkerId, WorkerLedger> workers = new FleetMap<>();
  private final ConcurrentHashMap<Long, Reservation> live = new ConcurrentHashMap<>();
  private final AtomicLong ids = new AtomicLong();
  /**
   * A Lamport clock over the decisions of every router replica that shares its reservations: each own
   * reservation takes the next turn, each copied one moves the clock up to its sender's turn. Replicas that have
   * heard the same decisions agree on which worker was given a request least recently, so a tie broken by it
   * goes the same way on all of them (best-of-N siblings dealt to two replicas at once stay together).
   */
  private final AtomicLong turns = new AtomicLong();
  /**
   * Above any turn a fleet reaches (a decision a nanosecond for a century is below 2^62): a peer's turn beyond it is
   * taken as none, since moving the clock there would wrap this replica's next turns negative.
   */
  static final long MAX_TURN = 1L << 62;
  private final LongSupplier nanoClock;
  private final long ttlNanos;
  private final int maxReservations;
  private final LongAdder expired = new LongAdder();
  private final LongAdder refused = new LongAdder();
  private final LongAdder reservedPrefill = new LongAdder();
  private final LongAdder reservedCount = new LongAdder();
  private final LongAdder reservedContext = new LongAdder();
  private volatile Listener listener = Listener.NONE;

  /**
   * Told of this replica's own reservations as they move, their expiry included (not of other replicas'
   * copies): {@code ReplicaSync} forwards them to the other router replicas. Called on the thread that moves the
   * reservation, the decision's included: must not block.
   */
  public interface Listener {
    Listener NONE = new Listener() {};

    default void reserved(Reservation r) {}

    default void prefillDone(Reservation r) {}

    default void released(Reservation r) {}
  }

  /**
   * @param nanoClock monotonic clock ({@code System::nanoTime} in production; tests pass their own)
   * @param ttlNanos a reservation older than this is expired by {@link #sweep}
   * @param maxReservations bound on live reservations; beyond it new requests are routed but not accounted
   *     (counted in {@link #refused()}), so a leak upstream cannot exhaust memory
   */
  public LoadLedger(LongSupplier nanoClock, long ttlNanos, int maxReservations) {
    if (ttlNanos <= 0 || maxReservations <= 0) {
      throw new IllegalArgumentException("ttl and maxReservations must be positive");
    }
    this.nanoClock = nanoClock;
    this.ttlNanos = ttlNanos;
    this.maxReservations = maxReservations;
  }

  /**
   * Charges a request to a worker.
   *
   * @param worker the chosen worker (rank)
   * @param prefillTokens prompt tokens the worker will compute (after the cached overlap it is credited with)
   * @param blockHashes the prompt's full-block hashes, in chain order (shared with other requests, counted
   *     once); not copied, must not be modified afterwards
   * @param uniqueBlocks blocks only this request occupies: the partial last prompt block and expected output
   *     (its context blocks are {@code blockHashes.length + uniqueBlocks})
   * @return the handle to release, never null ({@link Reservation#NONE} when the ledger is full)
   */
  public Reservation reserve(WorkerId worker, long prefillTokens, long[] blockHashes, int uniqueBlocks) {
    return reserve(worker, prefillTokens, blockHashes, uniqueBlocks, 0, 0);
  }

  /**
   * {@link #reserve(WorkerId, long, long[], int)} with the prompt's size, which the other router replicas need to
   * tell how much of its prefill a request already in flight there covers ({@code ReplicaSync}).
   *
   * @param promptTokens the whole prompt's tokens (0: unknown)
   * @param blockSize tokens per block of {@code blockHashes} (0: unknown)
   */
  public Reservation reserve(WorkerId worker, long prefillTokens, long[] blockHashes, int uniqueBlocks,
      long promptTokens, int blockSize) {
    Reservation r = add(worker, uncoveredPrefill(worker, prefillTokens, blockHashes, promptTokens, blockSize),
        blockHashes, uniqueBlocks, false, turns.incrementAndGet(), promptTokens, blockSize);
    if (r != Reservation.NONE) {
      listener.reserved(r);
    }
    return r;
  }

  /**
   * Charges a request another router replica sent to {@code worker} (its {@code ReplicaSync} message), as
   * {@link #reserve} does; moving it tells no {@link Listener}.
   *
   * @param sentTurn the sender's {@link Reservation#turn()}; 0 when it sent none, or one beyond {@link #MAX_TURN} (it
   *     takes this ledger's next turn)
   * @param promptTokens the whole prompt's tokens as the sender knew them (0: unknown, charged as sent)
   * @param blockSize tokens per block of {@code blockHashes} (0: unknown, charged as sent)
   */
  public Reservation reserveRemote(WorkerId worker, long prefillTokens, long[] blockHashes, int uniqueBlocks,
      long sentTurn, long promptTokens, int blockSize) {
    long turn = sentTurn > MAX_TURN ? 0 : sentTurn;
    if (turn > 0) {
      turns.accumulateAndGet(turn, Math::max);
    }
    if (!workers.contains(worker)) {
      return Reservation.NONE; // not accounted, like a copy past the bound; the fleets agree again within a poll
    }
    long prefill = uncoveredPrefill(worker, prefillTokens, blockHashes, promptTokens, blockSize);
    if (turn > 0) {
      return add(worker, prefill, blockHashes, uniqueBlocks, true, turn, 0, 0);
    }
    return add(worker, prefill, blockHashes, uniqueBlocks, true, turns.incrementAndGet(), 0, 0);
  }

  /**
   * Another replica gave {@code worker} a request at {@code turn}, known without the reservation (a replica that
   * joins learns the turns from before it): ties read it as if charged here. Moves the clock up to it.
   */
  public void noteTurn(WorkerId worker, long turn) {
    if (turn > 0 && turn <= MAX_TURN) {
      turns.accumulateAndGet(turn, Math::max);
      WorkerLedger wl = workers.inFleet(worker, WorkerLedger::new);
      if (wl != null) {
        wl.lastTurn.accumulateAndGet(turn, Math::max);
      }
    }
  }

  /** Every worker's last turn (those given a request since start), for a replica that joins. */
  public Map<WorkerId, Long> lastTurns() {
    Map<WorkerId, Long> out = new HashMap<>();
    workers.forEach((id, wl) -> {
      long t = wl.lastTurn.get();
      if (t > 0) {
        out.put(id, t);
      }
    });
    return out;
  }

  /**
   * The turn of the last request charged to {@code worker} by any replica (0: none yet, or the worker left):
   * the policy's "given a request least recently" tie-break.
   */
  public long lastTurn(WorkerId worker) {
    WorkerLedger wl = workers.get(worker);
    return wl == null ? 0 : wl.lastTurn.get();
  }

  /**
   * This replica's own reservations still held (not other replicas' copies), for a replica that joins later and
   * must learn what is already in flight. Weakly consistent: one released meanwhile may or may not be seen.
   */
  public void forEachOwnLive(java.util.function.Consumer<Reservation> action) {
    for (Reservation r : live.values()) {
      if (!r.remote && !r.released()) {
        action.accept(r);
      }
    }
  }

  /** Tells {@code l} of this replica's own reservations from now on. */
  public void setListener(Listener l) {
    listener = l == null ? Listener.NONE : l;
  }

  private Reservation add(WorkerId worker, long prefillTokens, long[] blockHashes, int uniqueBlocks,
      boolean remote, long turn, long promptTokens, int blockSize) {
    if (prefillTokens < 0 || uniqueBlocks < 0) {
      throw new IllegalArgumentException("negative reservation");
    }
    // a reservation's blocks are an int: another replica's copy, unlike the router's own, may not be bounded so
    uniqueBlocks = (int) Math.min(uniqueBlocks, Integer.MAX_VALUE - (long) blockHashes.length);
    // no prompt the router takes has more tokens than its body has bytes (an int); a copy's count is bounded here so
    // that summed over every reservation it cannot wrap the worker's counter negative
    prefillTokens = Math.min(prefillTokens, Integer.MAX_VALUE);
    WorkerLedger wl = workers.any(worker, WorkerLedger::new);
    // the request goes there whether or not it can be accounted: its turn counts either way
    wl.lastTurn.accumulateAndGet(turn, Math::max);
    if (live.size() >= maxReservations) {
      refused.increment();
      return Reservation.NONE;
    }
    Reservation r = new Reservation(ids.incrementAndGet(), worker, wl, prefillTokens, blockHashes, uniqueBlocks,
        nanoClock.getAsLong(), remote, turn, promptTokens, blockSize);
    wl.add(r);
    live.put(r.id, r);
    reservedPrefill.add(prefillTokens);
    reservedContext.add(r.blocks());
    reservedCount.increment();
    return r;
  }

  /** The first response byte arrived: the worker has finished this request's prefill. Idempotent. */
  public void prefillDone(Reservation r) {
    if (r != null && r.ledger != null && r.state.compareAndSet(Reservation.RESERVED, Reservation.PREFILL_DONE)) {
      r.ledger.releasePrefill(r);
      if (!r.remote) {
        listener.prefillDone(r);
      }
    }
  }

  /** The response ended, was cancelled or reset: releases whatever is still held. Idempotent. */
  public void release(Reservation r) {
    if (r == null || r.ledger == null) {
      return;
    }
    int prev = r.state.getAndSet(Reservation.RELEASED);
    if (prev == Reservation.RELEASED) {
      return;
    }
    if (prev == Reservation.RESERVED) {
      r.ledger.releasePrefill(r);
    }
    r.ledger.releaseBlocks(r);
    live.remove(r.id);
    if (!r.remote) {
      listener.released(r);
    }
  }

  /**
   * Expires reservations older than the TTL (a response whose end the router never heard of). Called by the
   * owner thread on a fixed schedule.
   *
   * @return how many expired
   */
  public int sweep() {
    long now = nanoClock.getAsLong();
    int n = 0;
    for (Reservation r : live.values()) {
      if (now - r.createdNanos > ttlNanos && !r.released()) {
        release(r);
        n++;
      }
    }
    if (n > 0) {
      expired.add(n);
      log.warn("expired {} load reservations older than {} s; their responses never reported an end", n,
          ttlNanos / 1_000_000_000L);
    }
    return n;
  }

  /**
   * Forgets workers that left the fleet. Their in-flight reservations still release into the detached state,
   * so nothing leaks and a worker that returns starts from zero. From then on other replicas' turns and copies
   * for workers outside {@code current} are not kept (the clock still moves to their turns).
   */
  public void retain(Collection<WorkerId> current) {
    workers.retain(current);
  }

  /** The router's load on {@code worker} now. */
  public LocalLoad local(WorkerId worker) {
    WorkerLedger wl = workers.get(worker);
    return wl == null ? LocalLoad.ZERO : wl.snapshot();
  }

  /**
   * The prefill a request adds on {@code worker} where requests already in flight there hold its leading blocks:
   * at most the prompt's tokens beyond them, since the engine computes a prefix once and a request behind it waits
   * for those blocks. Every reservation is charged this way, this replica's own ({@link #reserve}) and the copies
   * of other replicas' ({@link #reserveRemote}): two replicas that send siblings of a new prompt to one worker at the
   * same moment charge its cold prefill once in each ledger, whichever of the two reaches it first. Trimming only
   * the copy, a copy that arrived between this replica's scoring and its own reservation was charged in full and
   * the own one on top: the worker looked two prefills deep to the next sibling, which went elsewhere (seen in
   * the decision records of two synced replicas splitting best-of-4 groups through Envoy).
   *
   * @param promptTokens the whole prompt's tokens (0: unknown, nothing trimmed)
   * @param blockSize tokens per block of {@code blockHashes} (0: unknown, nothing trimmed)
   */
  private long uncoveredPrefill(WorkerId worker, long prefillTokens, long[] blockHashes, long promptTokens,
      int blockSize) {
    if (promptTokens <= 0 || blockSize <= 0 || prefillTokens == 0) {
      return prefillTokens;
    }
    int held = activePrefixBlocks(worker, blockHashes);
    return held == 0 ? prefillTokens
        : Math.min(prefillTokens, Math.max(0, promptTokens - (long) held * blockSize));
  }

  /**
   * How many leading blocks of {@code blockHashes} are held by in-flight requests on {@code worker}: the part
   * of the request that would add no new blocks there. O(log n) lookups (the active set is prefix-closed).
   */
  public int activePrefixBlocks(WorkerId worker, long[] blockHashes) {
    WorkerLedger wl = workers.get(worker);
    if (wl == null || blockHashes.length == 0) {
      return 0;
    }
    synchronized (wl.refs) {
      if (wl.refs.size() == 0) {
        return 0;
      }
      int lo = 0;
      int hi = blockHashes.length; // invariant: blocks [0, lo) active; block hi (if < length) is not
      if (wl.refs.get(blockHashes[hi - 1]) != 0) {
        return hi;
      }
      hi--;
      while (lo < hi) {
        int mid = (lo + hi) >>> 1;
        if (wl.refs.get(blockHashes[mid]) != 0) {
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
      return lo;
    }
  }

  /**
   * Marks the arrival of a fresh scrape of {@code worker}: from now on the "since" counters hold the net change
   * the router made after it (reservations made minus reservations released), so a scrape plus "since" stays
   * right between scrapes. Counting only new reservations would keep a request that finished just after the
   * scrape on the worker's books until the next one: a worker that has just served a long prompt would look
   * busy with exactly the blocks it now holds in cache, cancelling the cache credit of a repeat.
   */
  public void scraped(WorkerId worker) {
    WorkerLedger wl = workers.inFleet(worker, WorkerLedger::new); // a scrape that was under way when its worker left
    if (wl == null) {
      return;
    }
    wl.sincePrefill.set(0);
    wl.sinceBlocks.set(0);
    wl.sinceRequests.set(0);
  }

  /** Mean prefill tokens per reservation so far (estimates the prefill behind a scraped waiting queue). */
  public double meanPrefillTokens() {
    long n = reservedCount.sum();
    return n == 0 ? 0 : (double) reservedPrefill.sum() / n;
  }

  /** Mean context blocks per reservation so far (estimates the context of requests another replica sent). */
  public double meanContextBlocks() {
    long n = reservedCount.sum();
    return n == 0 ? 0 : (double) reservedContext.sum() / n;
  }

  public int liveReservations() {
    return live.size();
  }

  /** Reservations released by expiry rather than by their response. */
  public long expired() {
    return expired.sum();
  }

  /** Reservations not made because the ledger was full. */
  public long refused() {
    return refused.sum();
  }

  /** Workers the ledger currently tracks. */
  public List<WorkerId> workers() {
    return new ArrayList<>(workers.keys());
  }

  /**
   * Sums over every tracked worker (tests, metrics): prefill tokens, distinct blocks, requests, distinct active
   * block hashes, context blocks.
   */
  public long[] totals() {
    long p = 0;
    long b = 0;
    long r = 0;
    long h = 0;
    long c = 0;
    for (WorkerLedger wl : workers.values()) {
      p += wl.prefillTokens.get();
      b += wl.blocks.get();
      r += wl.requests.get();
      synchronized (wl.refs) {
        h += wl.refs.size();
      }
      c += wl.context.get();
    }
    return new long[] {p, b, r, h, c};
  }

  /** One worker's counters. Package-private: only the ledger and reservations touch it. */
  static final class WorkerLedger {
    final WorkerId id;
    final AtomicLong prefillTokens = new AtomicLong();
    final AtomicLong blocks = new AtomicLong();
    final AtomicLong context = new AtomicLong();
    final AtomicLong requests = new AtomicLong();
    /**
     * Block hash to the number of this worker's reservations holding it; guarded by its own monitor. Its floor (48 KB
     * per worker) holds 3,072 blocks without resizing, so a worker serving one long prompt at a time does not grow and
     * shrink the table with each.
     */
    final LongIntMap refs = new LongIntMap(4096);
    final AtomicLong sincePrefill = new AtomicLong();
    final AtomicLong sinceBlocks = new AtomicLong();
    final AtomicLong sinceRequests = new AtomicLong();
    final AtomicLong lastTurn = new AtomicLong();

    WorkerLedger(WorkerId id) {
      this.id = id;
    }

    void add(Reservation r) {
      long added = r.uniqueBlocks;
      synchronized (refs) {
        for (long h : r.blockHashes) {
          if (refs.add(h, 1) == 1) {
            added++;
          }
        }
      }
      r.addedBlocks = added;
      blocks.addAndGet(added);
      context.addAndGet(r.blocks());
      prefillTokens.addAndGet(r.prefillTokens);
      requests.incrementAndGet();
      sincePrefill.addAndGet(r.prefillTokens);
      sinceBlocks.addAndGet(added);
      sinceRequests.incrementAndGet();
    }

    void releasePrefill(Reservation r) {
      prefillTokens.addAndGet(-r.prefillTokens);
      // Whatever its age: a request reserved before the last scrape was (most likely) in it, and is gone now.
      sincePrefill.addAndGet(-r.prefillTokens);
    }

    void releaseBlocks(Reservation r) {
      long freed = r.uniqueBlocks;
      synchronized (refs) {
        for (long h : r.blockHashes) {
          // a hash no reservation holds counts as freed and stays absent, as it did in the boxed map
          if (refs.get(h) == 0 || refs.add(h, -1) == 0) {
            freed++;
          }
        }
      }
      blocks.addAndGet(-freed);
      context.addAndGet(-r.blocks());
      requests.decrementAndGet();
      sinceBlocks.addAndGet(-freed);
      sinceRequests.decrementAndGet();
    }

    LocalLoad snapshot() {
      return new LocalLoad(prefillTokens.get(), blocks.get(), context.get(), requests.get(),
          sincePrefill.get(), sinceBlocks.get(), sinceRequests.get());
    }
  }
}
