package dev.kvrouter.index;

/**
 * Open-addressing {@code long -> int} map (linear probing, backward-shift deletion, no boxing). In the index it
 * holds only the exceptions (duplicate-store counts, predicted-entry multiplicities); the load ledger keeps its
 * per-worker block reference counts in one. It halves once under 1/8 full, so the slots a burst needed (a worker's
 * duplicates, a wave of predictions) go back as the entries do, not only on {@link #clear}.
 *
 * <p>Not thread-safe: confined to its owner thread, or guarded by its owner's lock.
 */
public final class LongIntMap {

  private static final int MIN_CAPACITY = 8;

  private final int minCapacity;
  private long[] keys;
  private int[] values;
  private int mask;
  private int size;
  private boolean hasZeroKey;
  private int zeroValue;

  public LongIntMap() {
    this(MIN_CAPACITY);
  }

  /**
   * @param minCapacity slots it never shrinks below (a power of two, at least 8): a map whose entries come and go
   *     by the hundreds at once (a request's blocks) would otherwise grow and shrink through every size each time
   */
  public LongIntMap(int minCapacity) {
    if (minCapacity < MIN_CAPACITY || Integer.bitCount(minCapacity) != 1) {
      throw new IllegalArgumentException("minCapacity must be a power of two >= " + MIN_CAPACITY);
    }
    this.minCapacity = minCapacity;
    keys = new long[minCapacity];
    values = new int[minCapacity];
    mask = minCapacity - 1;
  }

  public int size() {
    return size + (hasZeroKey ? 1 : 0);
  }

  /** The value of {@code key}, 0 when absent. */
  public int get(long key) {
    if (key == 0) {
      return hasZeroKey ? zeroValue : 0;
    }
    int i = (int) (Mix.mix(key) & mask);
    while (true) {
      long k = keys[i];
      if (k == key) {
        return values[i];
      }
      if (k == 0) {
        return 0;
      }
      i = (i + 1) & mask;
    }
  }

  /** Adds {@code delta} to the value of {@code key} (absent = 0); a result of 0 removes the key. Returns it. */
  public int add(long key, int delta) {
    if (key == 0) {
      zeroValue = (hasZeroKey ? zeroValue : 0) + delta;
      hasZeroKey = zeroValue != 0;
      return zeroValue;
    }
    int i = (int) (Mix.mix(key) & mask);
    while (true) {
      long k = keys[i];
      if (k == key) {
        int v = values[i] + delta;
        if (v == 0) {
          removeAt(i);
        } else {
          values[i] = v;
        }
        return v;
      }
      if (k == 0) {
        if (delta == 0) {
          return 0;
        }
        keys[i] = key;
        values[i] = delta;
        if (++size > (mask + 1) * 3 / 4) {
          resize((mask + 1) * 2);
        }
        return delta;
      }
      i = (i + 1) & mask;
    }
  }

  void clear() {
    keys = new long[minCapacity];
    values = new int[minCapacity];
    mask = minCapacity - 1;
    size = 0;
    hasZeroKey = false;
  }

  private void removeAt(int i) {
    int hole = i;
    int j = i;
    while (true) {
      j = (j + 1) & mask;
      long k = keys[j];
      if (k == 0) {
        break;
      }
      int home = (int) (Mix.mix(k) & mask);
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        keys[hole] = k;
        values[hole] = values[j];
        hole = j;
      }
    }
    keys[hole] = 0;
    values[hole] = 0;
    size--;
    if (mask + 1 > minCapacity && size < (mask + 1) / 8) {
      resize((mask + 1) / 2); // under 1/4 full after it, far from the growth at 3/4: no resizing to and fro
    }
  }

  private void resize(int cap) {
    long[] ok = keys;
    int[] ov = values;
    keys = new long[cap];
    values = new int[cap];
    mask = cap - 1;
    size = 0;
    for (int i = 0; i < ok.length; i++) {
      if (ok[i] != 0) {
        add(ok[i], ov[i]);
      }
    }
  }

  long footprintBytes() {
    return 32L + 12L * keys.length;
  }
}
