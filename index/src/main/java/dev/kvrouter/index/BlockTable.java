package dev.kvrouter.index;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Arrays;

/**
 * The shared residency table: block hash (ours) to the set of worker ordinals holding it, with a tier mask
 * per holder ({@link #GPU}, {@link #CPU}, {@link #DISK}, and {@link #PREDICTED} for the router's own
 * predictions).
 *
 * <p>Segmented open addressing. Each segment is one {@code long[]}: a move counter and the slot count, then
 * {@code [key, holders]} slots (16 bytes each, linear probing, backward-shift deletion, any capacity: grown by
 * 1.5x past 80% load, so the load stays between 53% and 80%), then the segment's overflow records. One array
 * per segment means one reference and one bounds domain per probe. A {@code holders} word stores up to three
 * holders inline, 20 bits each ({@code (ordinal + 1) << 4 | tiers}); a block held by more workers points (sign bit
 * set) to a record in the segment's overflow pool: per 64-ordinal word, four bitsets (GPU, CPU, disk, predicted:
 * {@code [word][tier]}, so one word's four sets are adjacent), as many words as its highest holder needs.
 *
 * <h2>Concurrency</h2>
 * Writers (one event thread per worker, the prediction drainer) take the segment's spin lock; several writers
 * may target one segment. Readers take no lock and write nothing. Every change a reader can observe is one
 * ordered store, or a bracketed group of them:
 * <ul>
 *   <li>a holder change of an inline block is one store of its {@code holders} word;
 *   <li>a record is filled before the pointer to it is published, and freed only after it is unpublished; a
 *       published record is changed in place between two stores of its pointer: one with the busy bit set
 *       before, one with a fresh generation after (a seqlock per record, so a worker moving between tiers,
 *       whose bits lie in different words, is never read half-moved);
 *   <li>an insert writes the holders, then the key; a resize (which also packs the record area, moving records
 *       and rewriting their pointers in the new array) or a growth of the record area builds a new array and
 *       publishes it (the old one is never written again, so a reader still on it sees a consistent past state);
 *   <li>a deletion first clears the block's holders, then shifts later keys of its probe run back: each moved
 *       key is copied as {@code MOVING}, holders, key, and the store that then hides its old copy is preceded
 *       by an increment of the segment's move counter.
 * </ul>
 * A reader validates what it read: a hit by re-reading the key and holders after reading them (bits 60-62 of
 * the holders word are the slot's epoch, bumped whenever the slot's key changes, so a key that left and came
 * back is noticed; a record pointer must not be busy); a miss by the move counter being unchanged across the
 * probe (a key that was moved past the reader is noticed). It retries otherwise, and after
 * {@value #OPTIMISTIC_TRIES} failures on one block reads it under the lock: a reader waits for a writer only
 * then (a record whose writer was descheduled mid-write, or a block rewritten over and over). All loops on the
 * read path are bounded and every index is checked before use, since a read may see any mix of stores until it
 * is validated. Generations (18 bits) and epochs (3 bits) wrap: a reader stalled between its two reads of one
 * slot for 2^18 writes of that very record could accept a torn record, which we accept as we would a stamp
 * overflow.
 */
final class BlockTable {

  static final int GPU = 1;
  static final int CPU = 2;
  static final int DISK = 4;
  static final int PREDICTED = 8;
  static final int REAL = GPU | CPU | DISK;

  /** Highest ordinal an inline holder field can encode (16 bits for {@code ordinal + 1}). */
  static final int MAX_ORDINAL = 0xFFFE;

  // holders word: bit 63 overflow flag; bits 60..62 slot epoch; inline: bits 0..59 three fields; overflow:
  // bits 42..59 record generation, 32..41 record words - 1, bit 31 busy (the record is being written in place),
  // 0..30 record offset in the pool
  private static final long OVERFLOW = Long.MIN_VALUE;
  private static final long BUSY = 1L << 31;
  private static final int EPOCH_SHIFT = 60;
  private static final long EPOCH_MASK = 7L << EPOCH_SHIFT;
  private static final long BODY_MASK = (1L << EPOCH_SHIFT) - 1;
  private static final int GEN_SHIFT = 42;
  private static final long GEN_MASK = (1L << 18) - 1;
  private static final int WORDS_SHIFT = 32;
  private static final int FIELD_BITS = 20;
  private static final long FIELD_MASK = (1L << FIELD_BITS) - 1;
  private static final int INLINE = 3;

  private static final int OPTIMISTIC_TRIES = 16;
  /** Marks a slot whose key is being replaced by a moved key. */
  private static final long MOVING = 0x4D4F56494E472121L;
  /** Stand-ins for block hashes 0 and {@link #MOVING} (aliasing them is a 2^-64 event). */
  private static final long ZERO_KEY = 0x7A3F1C9E2B5D4086L;
  private static final long MOVING_KEY = 0x1E5A0C27F9B3D641L;

  private static final long GOLDEN = 0x9E3779B97F4A7C15L;
  /** Header longs of a segment array: the move counter, the slot count. */
  private static final int HEAD = 2;
  private static final double MAX_LOAD = 0.8;
  private static final double GROWTH = 1.5;
  /** Unused longs of a record area below which it is never packed (64 one-word records). */
  private static final int MIN_COMPACT_LONGS = 256;

  private static final VarHandle LONGS = MethodHandles.arrayElementVarHandle(long[].class);
  private static final VarHandle ARRAYS = MethodHandles.arrayElementVarHandle(long[][].class);

  /** Per segment its array (replaced, never changed in size in place, on resize, compaction or record-area growth). */
  private final long[][] segs;
  /** Per segment writer state, allocated apart from what readers touch. */
  private final Writer[] writers;
  private final int segmentShift;
  private final int segmentMask;
  private final int initialCapacity;
  /** Per-table salt, so crafted prompts cannot aim many blocks at one probe run. */
  private final long salt;

  BlockTable(int segmentCount, int initialCapacityPerSegment) {
    if (Integer.bitCount(segmentCount) != 1 || segmentCount > (1 << 16)) {
      throw new IllegalArgumentException("segments must be a power of two <= 65536, was " + segmentCount);
    }
    this.initialCapacity = Math.max(8, initialCapacityPerSegment);
    this.segs = new long[segmentCount][];
    for (int i = 0; i < segmentCount; i++) {
      segs[i] = newSegment(initialCapacity, 0);
    }
    this.writers = new Writer[segmentCount];
    for (int i = 0; i < segmentCount; i++) {
      writers[i] = new Writer();
    }
    this.segmentShift = 64 - Integer.numberOfTrailingZeros(segmentCount);
    this.segmentMask = segmentCount - 1;
    this.salt = new java.util.SplittableRandom().nextLong() | 1;
  }

  /** Fields written by a segment's writers, padded so they share no cache line with other segments' state. */
  @SuppressWarnings("unused")
  private static final class Writer {
    long p0, p1, p2, p3, p4, p5, p6, p7;
    /** Spin lock: 0 free, 1 held. */
    volatile int lock;
    /** Keys in the slot array. */
    int size;
    /** Records in use, the longs they take, and the pool's high-water mark in longs. */
    int records;
    int recordLongs;
    int poolTop;
    /** Generation stamped into overflow pointers, so a reused record is never mistaken for the old one. */
    long gen;
    /** Free records by width (index = words), each a stack of offsets. */
    int[][] free = new int[2][];
    int[] freeCount = new int[2];
    long q0, q1, q2, q3, q4, q5, q6, q7;
  }

  private static final VarHandle LOCK;

  static {
    try {
      LOCK = MethodHandles.lookup().findVarHandle(Writer.class, "lock", int.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private static void lock(Writer w) {
    if (LOCK.compareAndSet(w, 0, 1)) {
      return;
    }
    for (int spins = 0; ; spins++) {
      if (w.lock == 0 && LOCK.compareAndSet(w, 0, 1)) {
        return;
      }
      if (spins < 128) {
        Thread.onSpinWait();
      } else {
        Thread.yield(); // the holder may be descheduled: give it the core
      }
    }
  }

  private static void unlock(Writer w) {
    LOCK.setRelease(w, 0);
  }

  // ------------------------------------------------------------------------------------------------------
  // Hashing

  private static long key(long hash) {
    return hash == 0 ? ZERO_KEY : hash == MOVING ? MOVING_KEY : hash;
  }

  private long spread(long key) {
    return (key ^ salt) * GOLDEN;
  }

  private int segmentOf(long spread) {
    return (int) (spread >>> segmentShift) & segmentMask; // shift 64 is shift 0, masked to segment 0
  }

  /** Home slot in {@code [0, cap)}: bits 16..47 of the spread value scaled to the capacity (no power of two). */
  private static int home(long spread, int cap) {
    return (int) ((((spread >>> 16) & 0xFFFFFFFFL) * cap) >>> 32);
  }

  private static long[] newSegment(int cap, int recordArea) {
    long[] t = new long[HEAD + 2 * cap + recordArea];
    t[1] = cap;
    return t;
  }

  private static int capacity(long[] t) {
    return (int) t[1];
  }

  /** Index of the record area's first long. */
  private static int recordArea(long[] t) {
    return HEAD + 2 * (int) t[1];
  }

  private static long nextEpoch(long holders) {
    return (holders + (1L << EPOCH_SHIFT)) & EPOCH_MASK;
  }

  /** A segment's array for a reader: a plain load (no cast), then an acquire fence before reading its content. */
  private static long[] acquire(long[][] arr, int seg) {
    long[] t = arr[seg];
    VarHandle.acquireFence();
    return t;
  }

  // ------------------------------------------------------------------------------------------------------
  // Writes (segment lock)

  /**
   * Adds {@code tiers} to {@code ordinal}'s mask on {@code hash}, inserting the block if absent.
   *
   * @return the mask the ordinal held before (0 if it did not hold the block)
   */
  int add(long hash, int ordinal, int tiers) {
    checkOrdinal(ordinal);
    long key = key(hash);
    long mixed = spread(key);
    int seg = segmentOf(mixed);
    Writer w = writers[seg];
    lock(w);
    try {
      int i = findOrInsert(seg, w, key, mixed);
      long[] t = segs[seg];
      int hi = HEAD + 2 * i + 1;
      long holders = t[hi];
      if (holders < 0) {
        if ((ordinal >>> 6) >= recordWords(holders)) {
          // a wider copy, filled before it is published (the ordinal held nothing: it lay beyond the old words)
          long ptr = widen(seg, w, holders, ordinal);
          t = segs[seg]; // the record area may have grown
          setRecord(t, recordArea(t) + recordBase(ptr), ordinal, tiers);
          LONGS.setRelease(t, hi, ptr);
          return 0;
        }
        int base = recordArea(t) + recordBase(holders);
        int before = recordTiers(t, base, recordWords(holders), ordinal);
        if ((before | tiers) != before) {
          LONGS.setRelease(t, hi, holders | BUSY);
          setRecord(t, base, ordinal, tiers);
          LONGS.setRelease(t, hi, regenerate(w, holders));
        }
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
          if ((f | tiers) != f) { // a store of the same value would still take the line from readers' caches
            LONGS.setRelease(t, hi, holders | ((long) tiers << (FIELD_BITS * k)));
          }
          return (int) (f & 15);
        }
      }
      if (empty >= 0) {
        LONGS.setRelease(t, hi, holders | ((((long) ordinal + 1) << 4 | tiers) << (FIELD_BITS * empty)));
        return 0;
      }
      long ptr = toOverflow(seg, w, holders, ordinal, tiers);
      LONGS.setRelease(segs[seg], hi, ptr);
      return 0;
    } finally {
      unlock(w);
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
    int seg = segmentOf(mixed);
    Writer w = writers[seg];
    lock(w);
    try {
      long[] t = segs[seg];
      int i = find(t, key, mixed);
      if (i < 0) {
        return 0;
      }
      int hi = HEAD + 2 * i + 1;
      long holders = t[hi];
      if (holders < 0) {
        int rel = recordBase(holders);
        int base = recordArea(t) + rel;
        int words = recordWords(holders);
        int before = recordTiers(t, base, words, ordinal);
        if ((before & tiers) == 0) {
          return before;
        }
        LONGS.setRelease(t, hi, holders | BUSY);
        clearRecord(t, base, words, ordinal, tiers);
        int after = before & ~tiers;
        long inline = tryInline(t, base, words);
        if (inline >= 0) {
          // unpublish the record (which also ends the write) before it can be reused
          LONGS.setRelease(t, hi, (holders & EPOCH_MASK) | inline);
          freeRecord(w, rel, words);
          if (inline == 0) {
            delete(seg, w, i);
          }
          compactIfSparse(seg, w);
        } else {
          LONGS.setRelease(t, hi, regenerate(w, holders));
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
          LONGS.setRelease(t, hi, holders);
          if ((holders & BODY_MASK) == 0) {
            delete(seg, w, i);
          }
          return after;
        }
      }
      return 0;
    } finally {
      unlock(w);
    }
  }

  /**
   * Loads, without the lock, the cache lines a write of {@code hash} will use (its segment's header and the home
   * slot of its probe run), so that a batch of writes can have its cache misses in flight together before the
   * first write's lock (a locked instruction orders every load after it, so misses taken under the lock are
   * taken one at a time). Changes nothing; the loads are racy and their values meaningless except as a sink the
   * caller keeps so the JIT cannot drop them.
   */
  long touch(long hash) {
    long key = key(hash);
    long mixed = spread(key);
    long[] t = segs[segmentOf(mixed)];
    int ki = HEAD + 2 * home(mixed, capacity(t));
    return ki + 1 < t.length ? t[ki] + t[ki + 1] : 0;
  }

  /** The mask {@code ordinal} holds on {@code hash} (a consistent read under the lock; writers and tests). */
  int tiers(long hash, int ordinal) {
    long key = key(hash);
    long mixed = spread(key);
    int seg = segmentOf(mixed);
    Writer w = writers[seg];
    lock(w);
    try {
      long[] t = segs[seg];
      int i = find(t, key, mixed);
      if (i < 0) {
        return 0;
      }
      long holders = t[HEAD + 2 * i + 1];
      if (holders < 0) {
        return recordTiers(t, recordArea(t) + recordBase(holders), recordWords(holders), ordinal);
      }
      for (int k = 0; k < INLINE; k++) {
        long f = (holders >>> (FIELD_BITS * k)) & FIELD_MASK;
        if (f != 0 && (int) (f >>> 4) - 1 == ordinal) {
          return (int) (f & 15);
        }
      }
      return 0;
    } finally {
      unlock(w);
    }
  }

  // ------------------------------------------------------------------------------------------------------
  // Lock-free reads

  /**
   * Reads the holders of {@code hash} into per-tier bitsets over ordinal words {@code [lo, hi]} (the words
   * outside are untouched): {@code g}, {@code c}, {@code d}, {@code p} for GPU, CPU, disk and predicted.
   * Retries and locked reads are counted in {@code cursor} when one is given (lookups), not for null (tests).
   *
   * @return whether the block has any holder (in any word)
   */
  boolean read(long hash, int lo, int hi, long[] g, long[] c, long[] d, long[] p, PrefixCursor cursor) {
    long key = key(hash);
    long mixed = spread(key);
    int seg = segmentOf(mixed);
    for (int attempt = 0; attempt < OPTIMISTIC_TRIES; attempt++) {
      int r = readOnce(acquire(segs, seg), key, mixed, lo, hi, g, c, d, p);
      if (r >= 0) {
        return r > 0;
      }
      if (cursor != null) {
        cursor.retries++;
      }
      Thread.onSpinWait();
    }
    if (cursor != null) {
      cursor.lockedReads++;
    }
    Writer w = writers[seg];
    lock(w);
    try {
      return readOnce(segs[seg], key, mixed, lo, hi, g, c, d, p) > 0;
    } finally {
      unlock(w);
    }
  }

  /** One validated read attempt of segment array {@code t}: 1 found, 0 absent, -1 inconsistent (retry). */
  private static int readOnce(long[] t, long key, long mixed, int lo, int hi, long[] g, long[] c, long[] d,
      long[] p) {
    for (int w = lo; w <= hi; w++) {
      g[w] = 0;
      c[w] = 0;
      d[w] = 0;
      p[w] = 0;
    }
    long moves = (long) LONGS.getAcquire(t, 0);
    int cap = capacity(t);
    int end = HEAD + 2 * cap;
    if (cap <= 0 || end > t.length) {
      return -1;
    }
    int ki = HEAD + 2 * home(mixed, cap);
    for (int n = 0; n < cap; n++) {
      long k = (long) LONGS.getOpaque(t, ki);
      if (k == key) {
        long holders = (long) LONGS.getAcquire(t, ki + 1);
        boolean any = holders < 0 || (holders & BODY_MASK) != 0;
        if (holders < 0) {
          int base = end + recordBase(holders);
          int words = recordWords(holders);
          if ((holders & BUSY) != 0 || base < end || (long) base + 4L * words > t.length) {
            return -1; // being written, or torn
          }
          int last = Math.min(hi, words - 1);
          for (int w = lo; w <= last; w++) {
            int r = base + 4 * w;
            g[w] = t[r];
            c[w] = t[r + 1];
            d[w] = t[r + 2];
            p[w] = t[r + 3];
          }
        } else {
          for (int f3 = 0; f3 < INLINE; f3++) {
            long f = (holders >>> (FIELD_BITS * f3)) & FIELD_MASK;
            int ord = (int) (f >>> 4) - 1;
            int w = ord >>> 6;
            if (f != 0 && w >= lo && w <= hi) {
              long bit = 1L << ord;
              g[w] |= -(f & 1) & bit;
              c[w] |= -((f >>> 1) & 1) & bit;
              d[w] |= -((f >>> 2) & 1) & bit;
              p[w] |= -((f >>> 3) & 1) & bit;
            }
          }
        }
        VarHandle.acquireFence();
        if ((long) LONGS.getOpaque(t, ki) != key || (long) LONGS.getOpaque(t, ki + 1) != holders) {
          return -1;
        }
        return any ? 1 : 0;
      }
      if (k == 0) {
        VarHandle.acquireFence();
        return (long) LONGS.getOpaque(t, 0) == moves ? 0 : -1;
      }
      ki = ki + 2 == end ? HEAD : ki + 2;
    }
    return -1; // no empty slot seen: only possible on torn state
  }

  /**
   * The ordinals of word {@code w} holding {@code hash} in any real tier (GPU, CPU or disk), and those holding it
   * as predicted in {@code cursor}'s {@link PrefixCursor#probedPredicted}: one validated lock-free read, the probe
   * of {@link #walkWord} for a single block (the jump search's probe). After {@value #OPTIMISTIC_TRIES}
   * inconsistent reads it reads under the lock.
   */
  long holders(long hash, int w, PrefixCursor cursor) {
    long key = key(hash);
    long mixed = spread(key);
    int seg = segmentOf(mixed);
    for (int attempt = 0; attempt < OPTIMISTIC_TRIES; attempt++) {
      long[] t = acquire(segs, seg);
      long moves = (long) LONGS.getAcquire(t, 0);
      int cap = capacity(t);
      int end = HEAD + 2 * cap;
      int ki = HEAD + 2 * home(mixed, cap);
      long k;
      while ((k = (long) LONGS.getOpaque(t, ki)) != key && k != 0 && --cap > 0) {
        ki = ki + 2 == end ? HEAD : ki + 2;
      }
      if (k == key) {
        long holders = (long) LONGS.getAcquire(t, ki + 1);
        long real = 0;
        long pred = 0;
        if (holders < 0) {
          int r = end + recordBase(holders) + 4 * w;
          if (w < recordWords(holders) && r >= end && r + 3 < t.length) {
            real = t[r] | t[r + 1] | t[r + 2];
            pred = t[r + 3];
          }
        } else {
          for (int f3 = 0; f3 < INLINE; f3++) {
            long f = (holders >>> (FIELD_BITS * f3)) & FIELD_MASK;
            int ord = (int) (f >>> 4) - 1;
            if (f != 0 && (ord >>> 6) == w) {
              long bit = 1L << ord;
              real |= -((f & REAL) == 0 ? 0L : 1L) & bit;
              pred |= -((f >>> 3) & 1) & bit;
            }
          }
        }
        VarHandle.acquireFence();
        if ((holders & (OVERFLOW | BUSY)) != (OVERFLOW | BUSY) && (long) LONGS.getOpaque(t, ki) == key
            && (long) LONGS.getOpaque(t, ki + 1) == holders) {
          cursor.probedPredicted = pred;
          return real;
        }
      } else {
        VarHandle.acquireFence();
        if (k == 0 && (long) LONGS.getOpaque(t, 0) == moves) {
          cursor.probedPredicted = 0;
          return 0;
        }
      }
      cursor.retries++;
      Thread.onSpinWait();
    }
    long[][] a = cursor.scratch();
    read(hash, w, w, a[0], a[1], a[2], a[3], cursor);
    cursor.probedPredicted = a[3][w];
    return a[0][w] | a[1][w] | a[2][w];
  }

  /**
   * The prefix walk over {@code hashes[from, count)} for a lookup whose remaining candidates all lie in ordinal
   * word {@code w}: the same semantics as {@link PrefixCursor#advance} block by block, with the worker sets in
   * locals instead of arrays (a lookup's hot loop). Updates the cursor's state as {@code advance} would.
   *
   * @return blocks consumed (the cursor's position)
   */
  int walkWord(long[] hashes, int from, int count, PrefixCursor cur, int w) {
    long real = cur.realWord(w);
    long pred = cur.predWord(w);
    // CPU-only and disk-only holders per block, counted per worker once at the end (PrefixCursor.countTiers)
    long[] cpuMasks = cur.cpuMasks(count);
    long[] diskMasks = cur.diskMasks(count);
    long anyTier = 0;
    final long[][] arrays = segs;
    final long salt = this.salt;
    final int segShift = segmentShift;
    final int segMask = segmentMask;
    final int w4 = 4 * w;
    int tries = 0;
    for (int i = from; i < count; i++) {
      long key = key(hashes[i]);
      long mixed = (key ^ salt) * GOLDEN;
      long[] t = acquire(arrays, (int) (mixed >>> segShift) & segMask);
      long moves = (long) LONGS.getAcquire(t, 0);
      int cap = capacity(t);
      int end = HEAD + 2 * cap;
      int ki = HEAD + 2 * home(mixed, cap);
      long k;
      // not a counted loop on purpose: a probe is one or two slots, so no loop set-up cost
      while ((k = (long) LONGS.getOpaque(t, ki)) != key && k != 0 && --cap > 0) {
        ki = ki + 2 == end ? HEAD : ki + 2;
      }
      long g = 0;
      long c = 0;
      long d = 0;
      long p = 0;
      boolean consistent;
      if (k == key) {
        long holders = (long) LONGS.getAcquire(t, ki + 1);
        if (holders < 0) {
          int r = end + recordBase(holders) + w4;
          if (w < recordWords(holders) && r >= end && r + 3 < t.length) {
            g = t[r];
            c = t[r + 1];
            d = t[r + 2];
            p = t[r + 3];
          }
        } else if ((holders & BODY_MASK) != 0) {
          for (int f3 = 0; f3 < INLINE; f3++) {
            long f = (holders >>> (FIELD_BITS * f3)) & FIELD_MASK;
            int ord = (int) (f >>> 4) - 1;
            if (f != 0 && (ord >>> 6) == w) {
              long bit = 1L << ord;
              g |= -(f & 1) & bit;
              c |= -((f >>> 1) & 1) & bit;
              d |= -((f >>> 2) & 1) & bit;
              p |= -((f >>> 3) & 1) & bit;
            }
          }
        }
        VarHandle.acquireFence();
        consistent = (holders & (OVERFLOW | BUSY)) != (OVERFLOW | BUSY) && (long) LONGS.getOpaque(t, ki) == key
            && (long) LONGS.getOpaque(t, ki + 1) == holders;
      } else {
        VarHandle.acquireFence();
        consistent = k == 0 && (long) LONGS.getOpaque(t, 0) == moves;
      }
      if (!consistent) {
        cur.retries++;
        if (++tries < OPTIMISTIC_TRIES) {
          Thread.onSpinWait();
          i--; // read the block again
          continue;
        }
        long[][] scratch = cur.scratch();
        // locks only after repeated interference
        read(hashes[i], w, w, scratch[0], scratch[1], scratch[2], scratch[3], cur);
        g = scratch[0][w];
        c = scratch[1][w];
        d = scratch[2][w];
        p = scratch[3][w];
      }
      tries = 0;
      long nr = real & (g | c | d);
      long np = pred & p;
      if (nr != real) {
        cur.dropped(real & ~nr, w, true, i);
      }
      if (np != pred) {
        cur.dropped(pred & ~np, w, false, i);
      }
      real = nr;
      pred = np;
      if ((real | pred) == 0) {
        if (anyTier != 0) {
          cur.countTiers(w, from, i);
        }
        cur.endWord(w, real, pred, i);
        return i;
      }
      long cpuOnly = real & c & ~g;
      long diskOnly = real & d & ~(g | c);
      cpuMasks[i] = cpuOnly;
      diskMasks[i] = diskOnly;
      anyTier |= cpuOnly | diskOnly;
    }
    if (anyTier != 0) {
      cur.countTiers(w, from, count);
    }
    cur.endWord(w, real, pred, count);
    return count;
  }

  // ------------------------------------------------------------------------------------------------------
  // Segment internals (lock held)

  private int find(long[] t, long key, long mixed) {
    int cap = capacity(t);
    int i = home(mixed, cap);
    while (true) {
      long k = t[HEAD + 2 * i];
      if (k == key) {
        return i;
      }
      if (k == 0) {
        return -1;
      }
      i = i + 1 == cap ? 0 : i + 1;
    }
  }

  private int findOrInsert(int seg, Writer w, long key, long mixed) {
    long[] t = segs[seg];
    int cap = capacity(t);
    int i = home(mixed, cap);
    while (true) {
      long k = t[HEAD + 2 * i];
      if (k == key) {
        return i;
      }
      if (k == 0) {
        break;
      }
      i = i + 1 == cap ? 0 : i + 1;
    }
    if (w.size + 1 > cap * MAX_LOAD) {
      resize(seg, (int) Math.min(Integer.MAX_VALUE / 4, (long) Math.ceil(cap * GROWTH)));
      t = segs[seg];
      cap = capacity(t);
      i = home(mixed, cap);
      while (t[HEAD + 2 * i] != 0) {
        i = i + 1 == cap ? 0 : i + 1;
      }
    }
    int ki = HEAD + 2 * i;
    // an empty slot is invisible to readers: holders first (new epoch, nobody), then the key
    t[ki + 1] = nextEpoch(t[ki + 1]);
    LONGS.setRelease(t, ki, key);
    w.size++;
    return i;
  }

  /** Deletes slot {@code i}, whose holders word is already empty: backward shift, no tombstones. */
  private void delete(int seg, Writer w, int i) {
    long[] t = segs[seg];
    int cap = capacity(t);
    int hole = i;
    int j = i;
    boolean moved = false;
    while (true) {
      j = j + 1 == cap ? 0 : j + 1;
      long k = t[HEAD + 2 * j];
      if (k == 0) {
        break;
      }
      int home = home(spread(k), cap);
      // move k into the hole unless its home lies cyclically in (hole, j]
      int dj = j >= home ? j - home : j + cap - home;
      int dh = j >= hole ? j - hole : j + cap - hole;
      if (dj >= dh) {
        int hk = HEAD + 2 * hole;
        if (moved) {
          // the hole holds the previous moved key's old copy: readers passing it must learn it moved
          LONGS.setRelease(t, 0, t[0] + 1);
        }
        LONGS.setRelease(t, hk, MOVING);
        LONGS.setRelease(t, hk + 1, nextEpoch(t[hk + 1]) | (t[HEAD + 2 * j + 1] & ~EPOCH_MASK));
        LONGS.setRelease(t, hk, k);
        hole = j;
        moved = true;
      }
    }
    int hk = HEAD + 2 * hole;
    if (moved) {
      LONGS.setRelease(t, 0, t[0] + 1);
    }
    LONGS.setRelease(t, hk, 0L);
    LONGS.setRelease(t, hk + 1, nextEpoch(t[hk + 1]));
    w.size--;
    if (w.size == 0 && (cap > initialCapacity || w.poolTop > 0)) {
      resize(seg, initialCapacity); // emptied: as small as a new segment, record area and free lists gone
    } else if (cap > initialCapacity && w.size < cap / 5) {
      resize(seg, Math.max(initialCapacity, cap / 2));
    }
  }

  /**
   * Rebuilds the segment with {@code cap} slots and only the records in use, packed (their pointers rewritten in
   * the new array), and publishes it; readers on the old array see it as it was. The free lists go: nothing is
   * free in a packed area.
   */
  private void resize(int seg, int cap) {
    Writer w = writers[seg];
    long[] old = segs[seg];
    int oldArea = recordArea(old);
    long[] t = newSegment(cap, w.recordLongs);
    int area = recordArea(t);
    int top = 0;
    for (int i = HEAD; i < oldArea; i += 2) {
      long k = old[i];
      if (k != 0) {
        int j = home(spread(k), cap);
        while (t[HEAD + 2 * j] != 0) {
          j = j + 1 == cap ? 0 : j + 1;
        }
        long holders = old[i + 1] & ~EPOCH_MASK;
        if (holders < 0) { // never busy here: a record is written in place only within one locked call
          int longs = 4 * recordWords(holders);
          System.arraycopy(old, oldArea + recordBase(holders), t, area + top, longs);
          holders = (holders & ~0x7FFFFFFFL) | top;
          top += longs;
        }
        t[HEAD + 2 * j] = k;
        t[HEAD + 2 * j + 1] = holders;
      }
    }
    w.poolTop = top;
    w.free = new int[2][];
    w.freeCount = new int[2];
    ARRAYS.setRelease(segs, seg, t);
  }

  /**
   * Packs the segment's record area once most of it is unused (blocks held by more than three workers went back
   * to three or fewer, or left: workers left, engines cleared their caches), so it does not stay at its peak.
   * Amortized: the unused longs must outnumber the used ones three to one and a quarter of the slots, which the
   * rebuild copies; each was written when its record was made. So a segment keeps at most a long per four slots
   * (an eighth of the slots' bytes) unused, or a quarter of its record area.
   */
  private void compactIfSparse(int seg, Writer w) {
    long[] t = segs[seg];
    int unused = t.length - recordArea(t) - w.recordLongs;
    if (unused >= MIN_COMPACT_LONGS && unused > 3L * w.recordLongs && unused >= capacity(t) / 4) {
      resize(seg, capacity(t));
    }
  }

  // ------------------------------------------------------------------------------------------------------
  // Overflow records (lock held). A record is 4 * words longs in the segment's record area, at offset `base`
  // from the area's start: [word][tier] bitsets. Methods taking an absolute index get recordArea(t) + base.

  private static int recordBase(long holders) {
    return (int) holders & 0x7FFFFFFF;
  }

  private static int recordWords(long holders) {
    return (int) ((holders >>> WORDS_SHIFT) & 0x3FF) + 1;
  }

  private static long pointer(Writer w, long epoch, int base, int words) {
    long gen = w.gen++ & GEN_MASK;
    return OVERFLOW | epoch | gen << GEN_SHIFT | (long) (words - 1) << WORDS_SHIFT | (base & 0x7FFFFFFFL);
  }

  /**
   * The same record pointer with a fresh generation and no busy mark: ends an in-place write, so a reader that
   * read the pointer before the write began fails its re-read of the holders word.
   */
  private static long regenerate(Writer w, long holders) {
    long gen = w.gen++ & GEN_MASK;
    return (holders & ~(GEN_MASK << GEN_SHIFT) & ~BUSY) | gen << GEN_SHIFT;
  }

  private long toOverflow(int seg, Writer w, long holders, int ordinal, int tiers) {
    int maxOrd = ordinal;
    for (int k = 0; k < INLINE; k++) {
      long f = (holders >>> (FIELD_BITS * k)) & FIELD_MASK;
      maxOrd = Math.max(maxOrd, (int) (f >>> 4) - 1);
    }
    int words = (maxOrd >>> 6) + 1;
    int rel = allocRecord(seg, w, words);
    long[] t = segs[seg];
    int base = recordArea(t) + rel;
    for (int k = 0; k < INLINE; k++) {
      long f = (holders >>> (FIELD_BITS * k)) & FIELD_MASK;
      setRecord(t, base, (int) (f >>> 4) - 1, (int) (f & 15));
    }
    setRecord(t, base, ordinal, tiers);
    VarHandle.releaseFence(); // the record's content before the pointer that publishes it
    return pointer(w, holders & EPOCH_MASK, rel, words);
  }

  /** A copy of the record at a width that fits {@code ordinal}; the caller publishes it, the old one is freed. */
  private long widen(int seg, Writer w, long holders, int ordinal) {
    int oldWords = recordWords(holders);
    int oldRel = recordBase(holders);
    int words = (ordinal >>> 6) + 1;
    int rel = allocRecord(seg, w, words);
    long[] t = segs[seg];
    int area = recordArea(t);
    System.arraycopy(t, area + oldRel, t, area + rel, 4 * oldWords);
    VarHandle.releaseFence();
    long ptr = pointer(w, holders & EPOCH_MASK, rel, words);
    // the old record is freed once the caller has published ptr; it cannot be reused before this lock is released
    freeRecord(w, oldRel, oldWords);
    return ptr;
  }

  /** A zeroed record of {@code words} words (its offset in the record area); the array may be replaced. */
  private int allocRecord(int seg, Writer w, int words) {
    w.records++;
    w.recordLongs += 4 * words;
    long[] t = segs[seg];
    int area = recordArea(t);
    if (words < w.freeCount.length && w.freeCount[words] > 0) {
      int rel = w.free[words][--w.freeCount[words]];
      for (int i = area + rel, e = i + 4 * words; i < e; i++) {
        LONGS.setRelease(t, i, 0L);
      }
      return rel;
    }
    int rel = w.poolTop;
    int need = area + rel + 4 * words;
    if (need > t.length) {
      int grown = Math.max(need - area, Math.max(16, (t.length - area) + ((t.length - area) >> 1)));
      long[] n = Arrays.copyOf(t, area + grown);
      ARRAYS.setRelease(segs, seg, n);
    }
    w.poolTop = rel + 4 * words;
    return rel;
  }

  private static void freeRecord(Writer w, int rel, int words) {
    w.records--;
    w.recordLongs -= 4 * words;
    if (words >= w.freeCount.length) {
      int n = Math.max(words + 1, w.freeCount.length * 2);
      w.free = Arrays.copyOf(w.free, n);
      w.freeCount = Arrays.copyOf(w.freeCount, n);
    }
    int[] stack = w.free[words];
    if (stack == null) {
      stack = new int[8];
    } else if (w.freeCount[words] == stack.length) {
      stack = Arrays.copyOf(stack, stack.length * 2);
    }
    w.free[words] = stack;
    stack[w.freeCount[words]++] = rel;
  }

  /** Back to inline form when at most three holders remain: the inline fields, 0 if none, -1 if too many. */
  private static long tryInline(long[] t, int base, int words) {
    long inline = 0;
    int n = 0;
    for (int w = 0; w < words; w++) {
      int r = base + 4 * w;
      long any = t[r] | t[r + 1] | t[r + 2] | t[r + 3];
      while (any != 0) {
        int b = Long.numberOfTrailingZeros(any);
        any &= any - 1;
        if (n == INLINE) {
          return -1;
        }
        int ord = (w << 6) + b;
        inline |= ((((long) ord + 1) << 4) | recordTiers(t, base, words, ord)) << (FIELD_BITS * n);
        n++;
      }
    }
    return inline;
  }

  private static int recordTiers(long[] t, int base, int words, int ordinal) {
    int w = ordinal >>> 6;
    if (w >= words) {
      return 0;
    }
    long bit = 1L << ordinal;
    int r = base + 4 * w;
    int m = 0;
    for (int k = 0; k < 4; k++) {
      if ((t[r + k] & bit) != 0) {
        m |= 1 << k;
      }
    }
    return m;
  }

  private static void setRecord(long[] t, int base, int ordinal, int tiers) {
    long bit = 1L << ordinal;
    int r = base + 4 * (ordinal >>> 6);
    for (int k = 0; k < 4; k++) {
      if ((tiers & (1 << k)) != 0) {
        LONGS.setRelease(t, r + k, t[r + k] | bit);
      }
    }
  }

  private static void clearRecord(long[] t, int base, int words, int ordinal, int tiers) {
    int w = ordinal >>> 6;
    if (w >= words) {
      return;
    }
    long bit = 1L << ordinal;
    int r = base + 4 * w;
    for (int k = 0; k < 4; k++) {
      if ((tiers & (1 << k)) != 0) {
        LONGS.setRelease(t, r + k, t[r + k] & ~bit);
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
    for (Writer w : writers) {
      n += w.size;
    }
    return n;
  }

  /** Blocks whose holders live in the overflow pool (held by more than three workers). */
  long overflowBlocks() {
    long n = 0;
    for (Writer w : writers) {
      n += w.records;
    }
    return n;
  }

  /** Bytes held by the segment arrays and writer state, free lists included (approximate while writers run). */
  long footprintBytes() {
    long n = 16L + 4L * segs.length + 16L + 4L * writers.length;
    for (long[] t : segs) {
      n += 16L + 8L * t.length + 176L;
    }
    for (Writer w : writers) {
      int[][] free = w.free;
      n += 16L + 4L * free.length + 16L + 4L * free.length;
      for (int[] stack : free) {
        n += stack == null ? 0 : 16L + 4L * stack.length;
      }
    }
    return n;
  }
}
