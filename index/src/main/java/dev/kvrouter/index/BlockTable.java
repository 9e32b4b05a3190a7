package dev.kvrouter.index;

import java.util.Arrays;
import java.util.concurrent.locks.StampedLock;

/**
 * The shared residency table: block hash (ours) to the set of worker ordinals holding it, with a tier mask
 * per holder ({@link #GPU}, {@link #CPU}, {@link #DISK}, and {@link #PREDICTED} for the router's own
 * predictions).
 *
 * <p>Segmented open addressing. Each segment is an interleaved {@code long[]} of {@code [key, holders]} pairs
 * (16 bytes per slot, linear probing, backward-shift deletion) guarded by a {@link StampedLock}. A
 * {@code holders} word stores up to three holders inline, 20 bits each ({@code (ordinal + 1) << 4 | tiers});
 * a block held by more workers points (sign bit set) into the segment's overflow pool, where it owns one
 * {@code long[]} of four bitsets over ordinals ({@code [tier][word]}, sized to the highest ordinal).
 *
 * <h2>Concurrency</h2>
 * Writers (one event thread per worker, the prediction drainer) take the segment's write lock; several
 * writers may target one segment, so the lock serialises them. Readers never block: they read a segment
 * under {@link StampedLock#tryOptimisticRead()} and retry when {@link StampedLock#validate} fails, falling
 * back to the read lock after a few tries so a hot segment cannot starve a lookup. Reads done before
 * validation may see torn state, so the read path bounds every loop and checks every index, and never
 * acts on what it read until validation succeeds.
 */
final class BlockTable {

  static final int GPU = 1;
  static final int CPU = 2;
  static final int DISK = 4;
  static final int PREDICTED = 8;
  static final int REAL = GPU | CPU | DISK;

  /** Highest ordinal an inline holder field can encode (16 bits for {@code ordinal + 1}). */
  static final int MAX_ORDINAL = 0xFFFE;

  private static final long OVERFLOW_FLAG = Long.MIN_VALUE;
  private static final int FIELD_BITS = 20;
  private static final long FIELD_MASK = (1L << FIELD_BITS) - 1;
  private static final int INLINE = 3;
  private static final int OPTIMISTIC_TRIES = 4;
  /** Stands in for a block hash of 0, since key 0 marks empty slots (aliasing it is a 2^-64 event). */
  private static final long ZERO_KEY = 0x7A3F1C9E2B5D4086L;

  private final Segment[] segments;
  private final int segmentShift;
  private final int initialCapacity;

  BlockTable(int segmentCount, int initialCapacityPerSegment) {
    if (Integer.bitCount(segmentCount) != 1 || segmentCount > (1 << 16)) {
      throw new IllegalArgumentException("segments must be a power of two <= 65536, was " + segmentCount);
    }
    this.initialCapacity = Math.max(8, Integer.highestOneBit(Math.max(1, initialCapacityPerSegment - 1)) << 1);
    this.segments = new Segment[segmentCount];
    for (int i = 0; i < segmentCount; i++) {
      segments[i] = new Segment(initialCapacity);
    }
    this.segmentShift = 64 - Integer.numberOfTrailingZeros(segmentCount);
  }

  private static final class Segment {
    final StampedLock lock = new StampedLock();
    /** Interleaved {@code [key, holders]}; key 0 = empty. Replaced (not mutated) on resize. */
    long[] slots;
    int size;
    /** Overflow holder bitsets; {@code null} entries are free. */
    long[][] overflow = new long[0][];
    int overflowUsed;

    Segment(int capacity) {
      slots = new long[capacity * 2];
    }
  }

  private Segment segment(long mixed) {
    return segments[segmentShift == 64 ? 0 : (int) (mixed >>> segmentShift)];
  }

  private static long key(long hash) {
    return hash == 0 ? ZERO_KEY : hash;
  }

  // ------------------------------------------------------------------------------------------------------
  // Writes (segment write lock)

  /**
   * Adds {@code tiers} to {@code ordinal}'s mask on {@code hash}, inserting the block if absent.
   *
   * @return the mask the ordinal held before (0 if it did not hold the block)
   */
  int add(long hash, int ordinal, int tiers) {
    checkOrdinal(ordinal);
    long key = key(hash);
    long mixed = Mix.mix(key);
    Segment s = segment(mixed);
    long stamp = s.lock.writeLock();
    try {
      int i = findOrInsert(s, key, mixed);
      long[] t = s.slots;
      long holders = t[2 * i + 1];
      if (holders < 0) {
        int idx = (int) holders;
        long[] ov = ensureWords(s, idx, ordinal);
        int before = overflowTiers(ov, ordinal);
        setOverflow(ov, ordinal, tiers);
        return before;
      }
      int empty = -1;
      for (int k = 0; k < INLINE; k++) {
        long f = (holders >>> (FIELD_BITS * k)) & FIELD_MASK;
        if (f == 0) {
          if (empty < 0) {
            empty = k;
          }
        } else if ((int) (f >>> 4) - 1 == ordinal) {
          t[2 * i + 1] = holders | ((long) tiers << (FIELD_BITS * k));
          return (int) (f & 15);
        }
      }
      if (empty >= 0) {
        t[2 * i + 1] = holders | ((((long) ordinal + 1) << 4 | tiers) << (FIELD_BITS * empty));
        return 0;
      }
      t[2 * i + 1] = toOverflow(s, holders, ordinal, tiers);
      return 0;
    } finally {
      s.lock.unlockWrite(stamp);
    }
  }

  /**
   * Clears {@code tiers} from {@code ordinal}'s mask on {@code hash}; deletes the block when nobody holds it.
   *
   * @return the mask the ordinal still holds afterwards (0 if none, or if the block was absent)
   */
  int remove(long hash, int ordinal, int tiers) {
    long key = key(hash);
    long mixed = Mix.mix(key);
    Segment s = segment(mixed);
    long stamp = s.lock.writeLock();
    try {
      int i = find(s, key, mixed);
      if (i < 0) {
        return 0;
      }
      long[] t = s.slots;
      long holders = t[2 * i + 1];
      if (holders < 0) {
        int idx = (int) holders;
        long[] ov = s.overflow[idx];
        clearOverflow(ov, ordinal, tiers);
        int after = overflowTiers(ov, ordinal);
        long inline = tryInline(ov);
        if (inline >= 0) {
          freeOverflow(s, idx);
          if (inline == 0) {
            delete(s, i);
          } else {
            t[2 * i + 1] = inline;
          }
        }
        return after;
      }
      for (int k = 0; k < INLINE; k++) {
        int shift = FIELD_BITS * k;
        long f = (holders >>> shift) & FIELD_MASK;
        if (f != 0 && (int) (f >>> 4) - 1 == ordinal) {
          long nf = f & ~(long) tiers;
          int after = (int) (nf & 15);
          holders = (holders & ~(FIELD_MASK << shift)) | (after == 0 ? 0 : nf << shift);
          if (holders == 0) {
            delete(s, i);
          } else {
            t[2 * i + 1] = holders;
          }
          return after;
        }
      }
      return 0;
    } finally {
      s.lock.unlockWrite(stamp);
    }
  }

  /** The mask {@code ordinal} holds on {@code hash} (a consistent read; used by writers and tests). */
  int tiers(long hash, int ordinal) {
    long key = key(hash);
    long mixed = Mix.mix(key);
    Segment s = segment(mixed);
    long stamp = s.lock.readLock();
    try {
      int i = find(s, key, mixed);
      if (i < 0) {
        return 0;
      }
      long holders = s.slots[2 * i + 1];
      if (holders < 0) {
        return overflowTiers(s.overflow[(int) holders], ordinal);
      }
      for (int k = 0; k < INLINE; k++) {
        long f = (holders >>> (FIELD_BITS * k)) & FIELD_MASK;
        if (f != 0 && (int) (f >>> 4) - 1 == ordinal) {
          return (int) (f & 15);
        }
      }
      return 0;
    } finally {
      s.lock.unlockRead(stamp);
    }
  }

  // ------------------------------------------------------------------------------------------------------
  // Lock-free read

  /**
   * Reads the holders of {@code hash} into per-tier bitsets over ordinal words {@code [lo, hi]} (the words
   * outside are untouched): {@code g}, {@code c}, {@code d}, {@code p} for GPU, CPU, disk and predicted.
   *
   * @return whether the block has any holder (in any word)
   */
  boolean read(long hash, int lo, int hi, long[] g, long[] c, long[] d, long[] p) {
    long key = key(hash);
    long mixed = Mix.mix(key);
    Segment s = segment(mixed);
    StampedLock lock = s.lock;
    for (int attempt = 0; attempt < OPTIMISTIC_TRIES; attempt++) {
      long stamp = lock.tryOptimisticRead();
      if (stamp != 0) {
        boolean found = readUnvalidated(s, key, mixed, lo, hi, g, c, d, p);
        if (lock.validate(stamp)) {
          return found;
        }
      }
      Thread.onSpinWait();
    }
    long stamp = lock.readLock();
    try {
      return readUnvalidated(s, key, mixed, lo, hi, g, c, d, p);
    } finally {
      lock.unlockRead(stamp);
    }
  }

  /** The read itself; safe on torn state: bounded probing, checked indices, no exceptions. */
  private static boolean readUnvalidated(Segment s, long key, long mixed, int lo, int hi, long[] g, long[] c,
      long[] d, long[] p) {
    for (int w = lo; w <= hi; w++) {
      g[w] = 0;
      c[w] = 0;
      d[w] = 0;
      p[w] = 0;
    }
    long[] t = s.slots;
    int cap = t.length >>> 1;
    int mask = cap - 1;
    int i = (int) mixed & mask;
    long holders = 0;
    for (int n = 0; n < cap; n++) {
      long k = t[2 * i];
      if (k == key) {
        holders = t[2 * i + 1];
        break;
      }
      if (k == 0) {
        return false;
      }
      i = (i + 1) & mask;
    }
    if (holders == 0) {
      return false;
    }
    if (holders < 0) {
      long[][] pool = s.overflow;
      int idx = (int) holders;
      if (idx < 0 || idx >= pool.length) {
        return false;
      }
      long[] ov = pool[idx];
      if (ov == null) {
        return false;
      }
      int words = ov.length >>> 2;
      int end = Math.min(hi, words - 1);
      for (int w = lo; w <= end; w++) {
        g[w] = ov[w];
        c[w] = ov[words + w];
        d[w] = ov[2 * words + w];
        p[w] = ov[3 * words + w];
      }
      return true;
    }
    for (int k = 0; k < INLINE; k++) {
      long f = (holders >>> (FIELD_BITS * k)) & FIELD_MASK;
      if (f == 0) {
        continue;
      }
      int ord = (int) (f >>> 4) - 1;
      int w = ord >>> 6;
      if (w < lo || w > hi) {
        continue;
      }
      long bit = 1L << ord;
      if ((f & GPU) != 0) {
        g[w] |= bit;
      }
      if ((f & CPU) != 0) {
        c[w] |= bit;
      }
      if ((f & DISK) != 0) {
        d[w] |= bit;
      }
      if ((f & PREDICTED) != 0) {
        p[w] |= bit;
      }
    }
    return true;
  }

  // ------------------------------------------------------------------------------------------------------
  // Segment internals (write lock held)

  private int find(Segment s, long key, long mixed) {
    long[] t = s.slots;
    int mask = (t.length >>> 1) - 1;
    int i = (int) mixed & mask;
    while (true) {
      long k = t[2 * i];
      if (k == key) {
        return i;
      }
      if (k == 0) {
        return -1;
      }
      i = (i + 1) & mask;
    }
  }

  private int findOrInsert(Segment s, long key, long mixed) {
    long[] t = s.slots;
    int cap = t.length >>> 1;
    if ((s.size + 1) > cap * 3L / 4) {
      resize(s, cap * 2);
      t = s.slots;
      cap = t.length >>> 1;
    }
    int mask = cap - 1;
    int i = (int) mixed & mask;
    while (true) {
      long k = t[2 * i];
      if (k == key) {
        return i;
      }
      if (k == 0) {
        t[2 * i] = key;
        t[2 * i + 1] = 0;
        s.size++;
        return i;
      }
      i = (i + 1) & mask;
    }
  }

  private void delete(Segment s, int i) {
    long[] t = s.slots;
    int mask = (t.length >>> 1) - 1;
    int hole = i;
    int j = i;
    while (true) {
      j = (j + 1) & mask;
      long k = t[2 * j];
      if (k == 0) {
        break;
      }
      int home = (int) Mix.mix(k) & mask;
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        t[2 * hole] = k;
        t[2 * hole + 1] = t[2 * j + 1];
        hole = j;
      }
    }
    t[2 * hole] = 0;
    t[2 * hole + 1] = 0;
    s.size--;
    int cap = mask + 1;
    if (cap > initialCapacity && s.size < cap / 8) {
      resize(s, cap / 2);
    }
  }

  private static void resize(Segment s, int cap) {
    long[] old = s.slots;
    long[] t = new long[cap * 2];
    int mask = cap - 1;
    for (int i = 0; i < old.length; i += 2) {
      long k = old[i];
      if (k != 0) {
        int j = (int) Mix.mix(k) & mask;
        while (t[2 * j] != 0) {
          j = (j + 1) & mask;
        }
        t[2 * j] = k;
        t[2 * j + 1] = old[i + 1];
      }
    }
    s.slots = t;
  }

  private static long toOverflow(Segment s, long holders, int ordinal, int tiers) {
    int maxOrd = ordinal;
    for (int k = 0; k < INLINE; k++) {
      long f = (holders >>> (FIELD_BITS * k)) & FIELD_MASK;
      maxOrd = Math.max(maxOrd, (int) (f >>> 4) - 1);
    }
    int words = (maxOrd >>> 6) + 1;
    long[] ov = new long[4 * words];
    for (int k = 0; k < INLINE; k++) {
      long f = (holders >>> (FIELD_BITS * k)) & FIELD_MASK;
      setOverflow(ov, (int) (f >>> 4) - 1, (int) (f & 15));
    }
    setOverflow(ov, ordinal, tiers);
    int idx = allocOverflow(s, ov);
    return OVERFLOW_FLAG | idx;
  }

  /** Back to inline form when at most three holders remain: the inline word, 0 if none, -1 if still too many. */
  private static long tryInline(long[] ov) {
    int words = ov.length >>> 2;
    long inline = 0;
    int n = 0;
    for (int w = 0; w < words; w++) {
      long any = ov[w] | ov[words + w] | ov[2 * words + w] | ov[3 * words + w];
      while (any != 0) {
        int b = Long.numberOfTrailingZeros(any);
        any &= any - 1;
        if (n == INLINE) {
          return -1;
        }
        int ord = (w << 6) + b;
        inline |= ((((long) ord + 1) << 4) | overflowTiers(ov, ord)) << (FIELD_BITS * n);
        n++;
      }
    }
    return inline;
  }

  private static int allocOverflow(Segment s, long[] ov) {
    long[][] pool = s.overflow;
    for (int i = 0; i < pool.length; i++) {
      if (pool[i] == null) {
        pool[i] = ov;
        s.overflowUsed++;
        return i;
      }
    }
    int i = pool.length;
    s.overflow = Arrays.copyOf(pool, Math.max(4, pool.length * 2));
    s.overflow[i] = ov;
    s.overflowUsed++;
    return i;
  }

  private static void freeOverflow(Segment s, int idx) {
    s.overflow[idx] = null;
    s.overflowUsed--;
  }

  /** The overflow bitsets of {@code idx}, grown (and re-pointed) if {@code ordinal} lies beyond them. */
  private static long[] ensureWords(Segment s, int idx, int ordinal) {
    long[] ov = s.overflow[idx];
    int words = ov.length >>> 2;
    int need = (ordinal >>> 6) + 1;
    if (need <= words) {
      return ov;
    }
    long[] n = new long[4 * need];
    for (int t = 0; t < 4; t++) {
      System.arraycopy(ov, t * words, n, t * need, words);
    }
    s.overflow[idx] = n;
    return n;
  }

  private static int overflowTiers(long[] ov, int ordinal) {
    int words = ov.length >>> 2;
    int w = ordinal >>> 6;
    if (w >= words) {
      return 0;
    }
    long bit = 1L << ordinal;
    int m = 0;
    for (int t = 0; t < 4; t++) {
      if ((ov[t * words + w] & bit) != 0) {
        m |= 1 << t;
      }
    }
    return m;
  }

  private static void setOverflow(long[] ov, int ordinal, int tiers) {
    int words = ov.length >>> 2;
    int w = ordinal >>> 6;
    long bit = 1L << ordinal;
    for (int t = 0; t < 4; t++) {
      if ((tiers & (1 << t)) != 0) {
        ov[t * words + w] |= bit;
      }
    }
  }

  private static void clearOverflow(long[] ov, int ordinal, int tiers) {
    int words = ov.length >>> 2;
    int w = ordinal >>> 6;
    if (w >= words) {
      return;
    }
    long bit = 1L << ordinal;
    for (int t = 0; t < 4; t++) {
      if ((tiers & (1 << t)) != 0) {
        ov[t * words + w] &= ~bit;
      }
    }
  }

  private static void checkOrdinal(int ordinal) {
    if (ordinal < 0 || ordinal > MAX_ORDINAL) {
      throw new IllegalArgumentException("worker ordinal out of range: " + ordinal);
    }
  }

  // ------------------------------------------------------------------------------------------------------
  // Statistics (racy reads, for gauges)

  /** Distinct blocks held by anyone (approximate while writers run). */
  long size() {
    long n = 0;
    for (Segment s : segments) {
      n += s.size;
    }
    return n;
  }

  /** Blocks whose holders live in the overflow pool (held by more than three workers). */
  long overflowBlocks() {
    long n = 0;
    for (Segment s : segments) {
      n += s.overflowUsed;
    }
    return n;
  }

  /** Bytes held by the slot arrays and overflow bitsets (approximate while writers run). */
  long footprintBytes() {
    long n = 0;
    for (Segment s : segments) {
      n += 16L + 8L * s.slots.length + 16L + 8L * s.overflow.length;
      for (long[] ov : s.overflow) {
        if (ov != null) {
          n += 16L + 8L * ov.length;
        }
      }
    }
    return n;
  }
}
