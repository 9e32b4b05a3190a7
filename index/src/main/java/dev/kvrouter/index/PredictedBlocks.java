package dev.kvrouter.index;

import java.util.Arrays;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The router's own routing decisions, kept as short-lived predicted blocks (the {@link BlockTable#PREDICTED}
 * bit), as in Dynamo's approximate mode and its predicted-TTL side index.
 *
 * <p>Concurrency: request threads only {@link #offer} (a bounded queue; a full queue drops the prediction and
 * counts it). Whoever holds {@code drainLock} is the single owner of the rings, the multiplicity map and the
 * predicted bits: {@link #offer} drains inline when the lock is free (so a prediction is visible to the next
 * request at once), and {@link #maintain} drains and expires on a schedule.
 *
 * <p>There are two TTL classes (workers with and without an event stream), each with its own FIFO ring, so
 * expiry only ever looks at ring heads. A (worker, block) predicted again while still live gets a second ring
 * entry; the multiplicity map counts live entries and the bit goes when the count reaches zero, so the latest
 * prediction decides the expiry.
 */
final class PredictedBlocks {

  /** TTL class of a prediction. */
  static final int SHORT = 0;
  static final int LONG = 1;

  private record Prediction(WorkerView view, long[] hashes, int ttlClass) {}

  private final BlockTable table;
  private final int max;
  private final long[] ttlMillis;
  private final ArrayBlockingQueue<Prediction> queue;
  private final ReentrantLock drainLock = new ReentrantLock();
  private final AtomicLong dropped = new AtomicLong();
  private final AtomicLong expired = new AtomicLong();
  private final AtomicLong evicted = new AtomicLong();

  // Guarded by drainLock.
  private final Ring[] rings = {new Ring(), new Ring()};
  private final LongIntMap live = new LongIntMap();
  private volatile int size;

  PredictedBlocks(BlockTable table, int maxEntries, int queueCapacity, long shortTtlMillis, long longTtlMillis) {
    this.table = table;
    this.max = maxEntries;
    this.queue = new ArrayBlockingQueue<>(queueCapacity);
    this.ttlMillis = new long[] {shortTtlMillis, longTtlMillis};
  }

  /** Queues a prediction; drains at once if nobody else is draining. Returns false if the queue was full. */
  boolean offer(WorkerView view, long[] hashes, int n, int ttlClass, long nowMillis) {
    boolean accepted = queue.offer(new Prediction(view, Arrays.copyOf(hashes, n), ttlClass));
    if (!accepted) {
      dropped.incrementAndGet();
    }
    if (drainLock.tryLock()) {
      try {
        drain(nowMillis);
      } finally {
        drainLock.unlock();
      }
    }
    return accepted;
  }

  /** Drains queued predictions and expires old ones (the scheduled maintenance). */
  void maintain(long nowMillis) {
    drainLock.lock();
    try {
      drain(nowMillis);
      for (Ring r : rings) {
        while (r.count > 0 && r.expiry[r.head] <= nowMillis) {
          pop(r);
          expired.incrementAndGet();
        }
        r.trim();
      }
      size = total();
    } finally {
      drainLock.unlock();
    }
  }

  /** Removes every predicted block of {@code ordinal} (worker removal). */
  void purge(int ordinal, long nowMillis) {
    drainLock.lock();
    try {
      drain(nowMillis);
      for (Ring r : rings) {
        int mask = r.hash.length - 1;
        int kept = 0;
        for (int k = 0; k < r.count; k++) {
          int i = (r.head + k) & mask;
          if (r.ord[i] == ordinal) {
            release(r.hash[i], ordinal);
          } else {
            // compact in place: kept <= k, so the write never overtakes the read
            int j = (r.head + kept++) & mask;
            r.hash[j] = r.hash[i];
            r.ord[j] = r.ord[i];
            r.expiry[j] = r.expiry[i];
          }
        }
        r.count = kept;
        r.trim();
      }
      size = total();
    } finally {
      drainLock.unlock();
    }
  }

  private void drain(long now) {
    Prediction p;
    while ((p = queue.poll()) != null) {
      if (p.view().retired()) {
        continue;
      }
      int ord = p.view().ordinal();
      Ring r = rings[p.ttlClass()];
      long expiry = now + ttlMillis[p.ttlClass()];
      // tail first: expiry and eviction pop ring heads, so a prediction loses its last blocks first and what is
      // left of it is always a prefix (a worker's predicted blocks stay prefix-closed, see PrefixCursor)
      long[] hashes = p.hashes();
      for (int i = hashes.length - 1; i >= 0; i--) {
        push(r, hashes[i], ord, expiry);
      }
    }
    size = total();
  }

  private void push(Ring r, long hash, int ord, long expiry) {
    if (total() >= max) {
      // evict the entry that would expire first
      Ring a = rings[SHORT];
      Ring b = rings[LONG];
      Ring victim = a.count == 0 ? b : b.count == 0 ? a : a.expiry[a.head] <= b.expiry[b.head] ? a : b;
      pop(victim);
      evicted.incrementAndGet();
    }
    if (r.count == r.hash.length) {
      r.grow();
    }
    int i = (r.head + r.count) & (r.hash.length - 1);
    r.hash[i] = hash;
    r.ord[i] = ord;
    r.expiry[i] = expiry;
    r.count++;
    if (live.add(liveKey(hash, ord), 1) == 1) {
      table.add(hash, ord, BlockTable.PREDICTED);
    }
  }

  private void pop(Ring r) {
    release(r.hash[r.head], r.ord[r.head]);
    r.head = (r.head + 1) & (r.hash.length - 1);
    r.count--;
  }

  private void release(long hash, int ord) {
    if (live.add(liveKey(hash, ord), -1) == 0) {
      table.remove(hash, ord, BlockTable.PREDICTED);
    }
  }

  private int total() {
    return rings[SHORT].count + rings[LONG].count;
  }

  private static long liveKey(long hash, int ord) {
    return hash ^ (0x9E3779B97F4A7C15L * (ord + 1L));
  }

  /** Live predicted entries (including refreshed duplicates). */
  int size() {
    return size;
  }

  long dropped() {
    return dropped.get();
  }

  long expired() {
    return expired.get();
  }

  long evicted() {
    return evicted.get();
  }

  /**
   * Bytes held by the rings, the multiplicity map and the queue's slots (queued predictions' own hashes aside: they
   * are drained at once, or at the next maintenance). Racy, for the memory gauge.
   */
  long footprintBytes() {
    long n = live.footprintBytes() + 16L + 4L * (queue.size() + queue.remainingCapacity());
    for (Ring r : rings) {
      n += 3 * 16L + 20L * r.hash.length;
    }
    return n;
  }

  /** A FIFO ring of (hash, ordinal, expiry) that grows as needed and shrinks once mostly empty. */
  private static final class Ring {
    private static final int MIN_CAPACITY = 64;

    long[] hash = new long[MIN_CAPACITY];
    int[] ord = new int[MIN_CAPACITY];
    long[] expiry = new long[MIN_CAPACITY];
    int head;
    int count;

    void grow() {
      resize(hash.length * 2);
    }

    /**
     * Gives back what a burst needed once under a quarter of it is used (after expiry or a purge, never on the
     * request path): halved while under a quarter used, so it ends at most half full and a few pushes do not make it
     * grow back.
     */
    void trim() {
      int cap = hash.length;
      while (cap > MIN_CAPACITY && count < cap / 4) {
        cap /= 2;
      }
      if (cap < hash.length) {
        resize(cap);
      }
    }

    private void resize(int cap) {
      long[] h = new long[cap];
      int[] o = new int[cap];
      long[] e = new long[cap];
      int mask = hash.length - 1;
      for (int k = 0; k < count; k++) {
        int i = (head + k) & mask;
        h[k] = hash[i];
        o[k] = ord[i];
        e[k] = expiry[i];
      }
      hash = h;
      ord = o;
      expiry = e;
      head = 0;
    }
  }
}
