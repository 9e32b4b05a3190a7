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
 * a block held by more workers points (sign bit set) to a record in the segment's flat overflow pool: four
 * bitsets over ordinals ({@code [tier][word]}), the segment's record width growing with the highest ordinal.
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

  private static final long GOLDEN = 0x9E3779B97F4A7C15L;
  /** Bits of the spread value below the slot index (the top bits pick the segment). */
  private static final int SLOT_SHIFT = 20;

  private final Segment[] segments;
  private final int segmentShift;
  private final int initialCapacity;
  /** Per-table salt, so crafted prompts cannot aim many blocks at one probe run. */
  private final long salt;

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
    this.salt = new java.util.SplittableRandom().nextLong() | 1;
  }

  /**
   * One lock stripe. Extends the lock so a reader's lock state and table reference share an object (one
   * cache line fewer per probe).
   */
  @SuppressWarnings("serial")
  private static final class Segment extends StampedLock {
    /** Interleaved {@code [key, holders]}; key 0 = empty. Replaced (not mutated) on resize. */
    long[] slots;
    int size;
    /** Overflow records of {@code 4 * words} longs each ({@code [tier][word]} bitsets). */
    long[] overflow = new long[0];
    int words = 1;
    /** Records handed out so far (high-water mark) and the free ones among them. */
    int records;
    int[] free = new int[4];
    int freeCount;

    Segment(int capacity) {
      slots = new long[capacity * 2];
    }

    int overflowUsed() {
      return records - freeCount;
    }
  }

  private long spread(long key) {
    return (key ^ salt) * GOLDEN;
  }

  private Segment segment(long spread) {
    return segments[segmentShift == 64 ? 0 : (int) (spread >>> segmentShift)];
  }

  private static int home(long spread, int mask) {
    return (int) (spread >>> SLOT_SHIFT) & mask;
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
    long mixed = spread(key);
    Segment s = segment(mixed);
    long stamp = s.writeLock();
    try {
      int i = findOrInsert(s, key, mixed);
      long[] t = s.slots;
      long holders = t[2 * i + 1];
      if (holders < 0) {
        ensureWords(s, ordinal);
        int base = (int) holders * 4 * s.words;
        int before = overflowTiers(s.overflow, base, s.words, ordinal);
        setOverflow(s.overflow, base, s.words, ordinal, tiers);
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
      s.unlockWrite(stamp);
    }
  }

  /**
   * Clears {@code tiers} from {@code ordinal}'s mask on {@code hash}; deletes the block when nobody holds it.
   *
   * @return the mask the ordinal still holds afterwards (0 if none, or if the block was absent)
   */
  int remove(long hash, int ordinal, int tiers) {
    long key = key(hash);
    long mixed = spread(key);
    Segment s = segment(mixed);
    long stamp = s.writeLock();
    try {
      int i = find(s, key, mixed);
      if (i < 0) {
        return 0;
      }
      long[] t = s.slots;
      long holders = t[2 * i + 1];
      if (holders < 0) {
        int idx = (int) holders;
        int base = idx * 4 * s.words;
        clearOverflow(s.overflow, base, s.words, ordinal, tiers);
        int after = overflowTiers(s.overflow, base, s.words, ordinal);
        long inline = tryInline(s.overflow, base, s.words);
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
      s.unlockWrite(stamp);
    }
  }

  /** The mask {@code ordinal} holds on {@code hash} (a consistent read; used by writers and tests). */
  int tiers(long hash, int ordinal) {
    long key = key(hash);
    long mixed = spread(key);
    Segment s = segment(mixed);
    long stamp = s.readLock();
    try {
      int i = find(s, key, mixed);
      if (i < 0) {
        return 0;
      }
      long holders = s.slots[2 * i + 1];
      if (holders < 0) {
        return overflowTiers(s.overflow, (int) holders * 4 * s.words, s.words, ordinal);
      }
      for (int k = 0; k < INLINE; k++) {
        long f = (holders >>> (FIELD_BITS * k)) & FIELD_MASK;
        if (f != 0 && (int) (f >>> 4) - 1 == ordinal) {
          return (int) (f & 15);
        }
      }
      return 0;
    } finally {
      s.unlockRead(stamp);
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
    long mixed = spread(key);
    Segment s = segment(mixed);
    StampedLock lock = s;
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
    int i = home(mixed, mask);
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
      long[] ov = s.overflow;
      int words = s.words;
      long base = (long) (int) holders * 4 * words;
      if (base < 0 || base + 4L * words > ov.length) {
        return false; // torn read; validation will fail
      }
      int b = (int) base;
      int end = Math.min(hi, words - 1);
      for (int w = lo; w <= end; w++) {
        g[w] = ov[b + w];
        c[w] = ov[b + words + w];
        d[w] = ov[b + 2 * words + w];
        p[w] = ov[b + 3 * words + w];
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

  /**
   * The whole prefix walk for fleets whose ordinals all fit one 64-bit word: the same semantics as
   * {@link PrefixCursor#advance} over {@code hashes[0, count)}, with the worker sets in locals instead of
   * arrays (a lookup's hot loop). Writes the cursor's state so {@link PrefixCursor#finish} works unchanged.
   * Ordinals of workers registered meanwhile (64 and above) are ignored, as a cursor started earlier would.
   *
   * @return blocks consumed (the cursor's position)
   */
  int prefix64(long[] hashes, int count, PrefixCursor cur) {
    long real = 0;
    long pred = 0;
    for (int i = 0; i < count; i++) {
      long key = key(hashes[i]);
      long mixed = spread(key);
      Segment s = segment(mixed);
      long g = 0;
      long c = 0;
      long d = 0;
      long p = 0;
      long stamp = 0;
      for (int attempt = 0; ; attempt++) {
        if (attempt < OPTIMISTIC_TRIES) {
          stamp = s.tryOptimisticRead();
          if (stamp == 0) {
            Thread.onSpinWait();
            continue;
          }
        } else {
          stamp = s.readLock();
        }
        g = 0;
        c = 0;
        d = 0;
        p = 0;
        long[] t = s.slots;
        int cap = t.length >>> 1;
        int mask = cap - 1;
        int j = home(mixed, mask);
        long holders = 0;
        for (int n = 0; n < cap; n++) {
          long k = t[2 * j];
          if (k == key) {
            holders = t[2 * j + 1];
            break;
          }
          if (k == 0) {
            break;
          }
          j = (j + 1) & mask;
        }
        if (holders < 0) {
          long[] ov = s.overflow;
          int words = s.words;
          long base = (long) (int) holders * 4 * words;
          if (base >= 0 && base + 4L * words <= ov.length) {
            int b = (int) base;
            g = ov[b];
            c = ov[b + words];
            d = ov[b + 2 * words];
            p = ov[b + 3 * words];
          }
        } else if (holders != 0) {
          for (int f3 = 0; f3 < INLINE; f3++) {
            long f = (holders >>> (FIELD_BITS * f3)) & FIELD_MASK;
            int ord = (int) (f >>> 4) - 1;
            if (f != 0 && ord < 64) {
              long bit = 1L << ord;
              g |= (f & GPU) != 0 ? bit : 0;
              c |= (f & CPU) != 0 ? bit : 0;
              d |= (f & DISK) != 0 ? bit : 0;
              p |= (f & PREDICTED) != 0 ? bit : 0;
            }
          }
        }
        if (attempt >= OPTIMISTIC_TRIES) {
          s.unlockRead(stamp);
          break;
        }
        if (s.validate(stamp)) {
          break;
        }
      }
      long r = g | c | d;
      if (i == 0) {
        if ((r | p) == 0) {
          cur.start64(0, 0);
          return 0;
        }
        real = r;
        pred = p;
        cur.start64(r, p);
      } else {
        long nr = real & r;
        long np = pred & p;
        if (nr != real) {
          cur.dropped64(real & ~nr, i, true);
        }
        if (np != pred) {
          cur.dropped64(pred & ~np, i, false);
        }
        real = nr;
        pred = np;
        if ((real | pred) == 0) {
          cur.end64(real, pred, i);
          return i;
        }
      }
      cur.tiers64(real & c & ~g, real & d & ~g & ~c);
    }
    cur.end64(real, pred, count);
    return count;
  }

  // ------------------------------------------------------------------------------------------------------
  // Segment internals (write lock held)

  private int find(Segment s, long key, long mixed) {
    long[] t = s.slots;
    int mask = (t.length >>> 1) - 1;
    int i = home(mixed, mask);
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
    int i = home(mixed, mask);
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
      int home = home(spread(k), mask);
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

  private void resize(Segment s, int cap) {
    long[] old = s.slots;
    long[] t = new long[cap * 2];
    int mask = cap - 1;
    for (int i = 0; i < old.length; i += 2) {
      long k = old[i];
      if (k != 0) {
        int j = home(spread(k), mask);
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
    ensureWords(s, maxOrd);
    int idx = allocOverflow(s);
    int base = idx * 4 * s.words;
    for (int k = 0; k < INLINE; k++) {
      long f = (holders >>> (FIELD_BITS * k)) & FIELD_MASK;
      setOverflow(s.overflow, base, s.words, (int) (f >>> 4) - 1, (int) (f & 15));
    }
    setOverflow(s.overflow, base, s.words, ordinal, tiers);
    return OVERFLOW_FLAG | idx;
  }

  /** Back to inline form when at most three holders remain: the inline word, 0 if none, -1 if still too many. */
  private static long tryInline(long[] ov, int base, int words) {
    long inline = 0;
    int n = 0;
    for (int w = 0; w < words; w++) {
      long any = ov[base + w] | ov[base + words + w] | ov[base + 2 * words + w] | ov[base + 3 * words + w];
      while (any != 0) {
        int b = Long.numberOfTrailingZeros(any);
        any &= any - 1;
        if (n == INLINE) {
          return -1;
        }
        int ord = (w << 6) + b;
        inline |= ((((long) ord + 1) << 4) | overflowTiers(ov, base, words, ord)) << (FIELD_BITS * n);
        n++;
      }
    }
    return inline;
  }

  /** A zeroed record; the pool array may be replaced. */
  private static int allocOverflow(Segment s) {
    int idx;
    if (s.freeCount > 0) {
      idx = s.free[--s.freeCount];
    } else {
      idx = s.records++;
      int need = s.records * 4 * s.words;
      if (need > s.overflow.length) {
        s.overflow = Arrays.copyOf(s.overflow, Math.max(need, s.overflow.length * 2));
      }
    }
    Arrays.fill(s.overflow, idx * 4 * s.words, (idx + 1) * 4 * s.words, 0L);
    return idx;
  }

  private static void freeOverflow(Segment s, int idx) {
    if (s.freeCount == s.free.length) {
      s.free = Arrays.copyOf(s.free, s.free.length * 2);
    }
    s.free[s.freeCount++] = idx;
  }

  /** Widens every record of the segment if {@code ordinal} lies beyond its words (rare: the fleet grew). */
  private static void ensureWords(Segment s, int ordinal) {
    int need = (ordinal >>> 6) + 1;
    int words = s.words;
    if (need <= words) {
      return;
    }
    long[] old = s.overflow;
    long[] n = new long[Math.max(4 * need, s.records * 4 * need)];
    for (int r = 0; r < s.records; r++) {
      for (int t = 0; t < 4; t++) {
        System.arraycopy(old, r * 4 * words + t * words, n, r * 4 * need + t * need, words);
      }
    }
    s.overflow = n;
    s.words = need;
  }

  private static int overflowTiers(long[] ov, int base, int words, int ordinal) {
    int w = ordinal >>> 6;
    if (w >= words) {
      return 0;
    }
    long bit = 1L << ordinal;
    int m = 0;
    for (int t = 0; t < 4; t++) {
      if ((ov[base + t * words + w] & bit) != 0) {
        m |= 1 << t;
      }
    }
    return m;
  }

  private static void setOverflow(long[] ov, int base, int words, int ordinal, int tiers) {
    int w = ordinal >>> 6;
    long bit = 1L << ordinal;
    for (int t = 0; t < 4; t++) {
      if ((tiers & (1 << t)) != 0) {
        ov[base + t * words + w] |= bit;
      }
    }
  }

  private static void clearOverflow(long[] ov, int base, int words, int ordinal, int tiers) {
    int w = ordinal >>> 6;
    if (w >= words) {
      return;
    }
    long bit = 1L << ordinal;
    for (int t = 0; t < 4; t++) {
      if ((tiers & (1 << t)) != 0) {
        ov[base + t * words + w] &= ~bit;
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
      n += s.overflowUsed();
    }
    return n;
  }

  /** Bytes held by the slot arrays and overflow bitsets (approximate while writers run). */
  long footprintBytes() {
    long n = 0;
    for (Segment s : segments) {
      n += 64L + 16L + 8L * s.slots.length + 16L + 8L * s.overflow.length + 16L + 4L * s.free.length;
    }
    return n;
  }
}
