package dev.kvrouter.examples.sim.engine;

/**
 * A fixed-capacity open-addressing map from {@code long} to non-negative {@code int}, with linear probing and
 * backward-shift deletion (no tombstones), so lookups of block hashes do not box.
 *
 * <p>Capacity is fixed at construction because the number of cached blocks is bounded by the pool size. Not
 * thread-safe (owned by the engine thread).
 */
final class LongIntHashMap {

  static final int MISSING = -1;

  private final long[] keys;
  private final int[] values;
  private final int mask;
  private final int maxSize;
  private int size;

  /** A map that holds up to {@code maxSize} entries at a load factor of at most 0.5. */
  LongIntHashMap(int maxSize) {
    int cap = Integer.highestOneBit(Math.max(4, maxSize) * 2 - 1) << 1;
    keys = new long[cap];
    values = new int[cap];
    java.util.Arrays.fill(values, MISSING);
    mask = cap - 1;
    this.maxSize = maxSize;
  }

  int size() {
    return size;
  }

  int get(long key) {
    for (int i = slot(key); ; i = (i + 1) & mask) {
      int v = values[i];
      if (v == MISSING) {
        return MISSING;
      }
      if (keys[i] == key) {
        return v;
      }
    }
  }

  /** Inserts or replaces; returns the previous value or {@link #MISSING}. */
  int put(long key, int value) {
    if (value < 0) {
      throw new IllegalArgumentException("values must be >= 0");
    }
    for (int i = slot(key); ; i = (i + 1) & mask) {
      int v = values[i];
      if (v == MISSING) {
        if (size >= maxSize) {
          throw new IllegalStateException("map is full (" + maxSize + " entries)");
        }
        keys[i] = key;
        values[i] = value;
        size++;
        return MISSING;
      }
      if (keys[i] == key) {
        values[i] = value;
        return v;
      }
    }
  }

  /** Removes {@code key}; returns its value or {@link #MISSING}. */
  int remove(long key) {
    int i = slot(key);
    while (true) {
      int v = values[i];
      if (v == MISSING) {
        return MISSING;
      }
      if (keys[i] == key) {
        break;
      }
      i = (i + 1) & mask;
    }
    int removed = values[i];
    // Backward-shift: pull later entries of the same probe run into the hole so lookups never stop early.
    int hole = i;
    int j = i;
    while (true) {
      j = (j + 1) & mask;
      if (values[j] == MISSING) {
        break;
      }
      int home = slot(keys[j]);
      boolean movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
      if (movable) {
        keys[hole] = keys[j];
        values[hole] = values[j];
        hole = j;
      }
    }
    values[hole] = MISSING;
    size--;
    return removed;
  }

  void clear() {
    java.util.Arrays.fill(values, MISSING);
    size = 0;
  }

  private int slot(long key) {
    long h = key * 0x9E3779B97F4A7C15L;
    return (int) (h ^ (h >>> 32)) & mask;
  }
}
