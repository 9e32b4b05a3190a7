package dev.kvrouter.index;

import java.util.Arrays;

/**
 * Open-addressing {@code long -> long} map with linear probing and backward-shift deletion: no boxing, no
 * tombstones, 16 bytes per slot. Keys are mixed before probing, so sequential or small engine hashes spread.
 *
 * <p>Not thread-safe: each instance is confined to one writer thread (a worker's event thread).
 */
final class LongLongMap {

  private static final int MIN_CAPACITY = 16;

  /** Interleaved {@code [key, value]} pairs; key {@code 0} marks an empty slot (key 0 itself lives aside). */
  private long[] table;
  private int mask;
  private int size;
  private boolean hasZeroKey;
  private long zeroValue;

  LongLongMap() {
    this(MIN_CAPACITY);
  }

  LongLongMap(int expected) {
    int cap = Math.max(MIN_CAPACITY, Integer.highestOneBit(Math.max(1, expected * 4 / 3)) << 1);
    table = new long[cap * 2];
    mask = cap - 1;
  }

  int size() {
    return size + (hasZeroKey ? 1 : 0);
  }

  boolean containsKey(long key) {
    return key == 0 ? hasZeroKey : find(key) >= 0;
  }

  /** The value of {@code key}, or {@code dflt} if absent (use {@link #containsKey} when any value is possible). */
  long get(long key, long dflt) {
    if (key == 0) {
      return hasZeroKey ? zeroValue : dflt;
    }
    int i = find(key);
    return i < 0 ? dflt : table[2 * i + 1];
  }

  /**
   * The slot of {@code key} (non-zero keys only), inserting it with value 0 if absent: returns the slot if the
   * key was present, {@code -(slot + 1)} if it was just inserted. One probe for both cases.
   */
  int findOrInsert(long key) {
    int i = slot(key);
    long[] t = table;
    while (true) {
      long k = t[2 * i];
      if (k == key) {
        return i;
      }
      if (k == 0) {
        if (size + 1 > (mask + 1) * 3L / 4) {
          resize((mask + 1) * 2);
          return findOrInsert(key);
        }
        t[2 * i] = key;
        t[2 * i + 1] = 0;
        size++;
        return -(i + 1);
      }
      i = (i + 1) & mask;
    }
  }

  /** Loads {@code key}'s home slot and returns what it holds (a prefetch: the value means nothing). */
  long touch(long key) {
    return table[2 * slot(key)];
  }

  /** The slot of {@code key} (non-zero keys only), or -1. */
  int indexOf(long key) {
    return find(key);
  }

  void setValueAt(int i, long value) {
    table[2 * i + 1] = value;
  }

  /** Puts and returns whether the key was new. */
  boolean put(long key, long value) {
    if (key == 0) {
      boolean added = !hasZeroKey;
      hasZeroKey = true;
      zeroValue = value;
      return added;
    }
    int i = slot(key);
    long[] t = table;
    while (true) {
      long k = t[2 * i];
      if (k == 0) {
        t[2 * i] = key;
        t[2 * i + 1] = value;
        if (++size > (mask + 1) * 3L / 4) {
          resize((mask + 1) * 2);
        }
        return true;
      }
      if (k == key) {
        t[2 * i + 1] = value;
        return false;
      }
      i = (i + 1) & mask;
    }
  }

  /** Removes {@code key}; returns whether it was present. */
  boolean remove(long key) {
    if (key == 0) {
      boolean had = hasZeroKey;
      hasZeroKey = false;
      return had;
    }
    int i = find(key);
    if (i < 0) {
      return false;
    }
    removeAt(i);
    return true;
  }

  void clear() {
    Arrays.fill(table, 0L);
    size = 0;
    hasZeroKey = false;
    if (mask + 1 > 1024) {
      table = new long[MIN_CAPACITY * 2];
      mask = MIN_CAPACITY - 1;
    }
  }

  /** Number of slots, for a sweeping hand ({@link #keyAt}, {@link #removeAt}). */
  int capacity() {
    return mask + 1;
  }

  /** Whether slot {@code i} holds an entry (the zero key is not addressable by slot). */
  boolean usedAt(int i) {
    return table[2 * i] != 0;
  }

  long keyAt(int i) {
    return table[2 * i];
  }

  long valueAt(int i) {
    return table[2 * i + 1];
  }

  boolean hasZeroKey() {
    return hasZeroKey;
  }

  long zeroValue() {
    return zeroValue;
  }

  /** Deletes slot {@code i} by shifting later members of its probe run back (no tombstones). */
  void removeAt(int i) {
    long[] t = table;
    int hole = i;
    int j = i;
    while (true) {
      j = (j + 1) & mask;
      long k = t[2 * j];
      if (k == 0) {
        break;
      }
      int home = slot(k);
      // move k into the hole if its home is not cyclically in (hole, j]
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        t[2 * hole] = k;
        t[2 * hole + 1] = t[2 * j + 1];
        hole = j;
      }
    }
    t[2 * hole] = 0;
    t[2 * hole + 1] = 0;
    size--;
    if (mask + 1 > MIN_CAPACITY && size < (mask + 1) / 8) {
      resize((mask + 1) / 2);
    }
  }

  private int find(long key) {
    long[] t = table;
    int i = slot(key);
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

  private int slot(long key) {
    return (int) (Mix.mix(key) & mask);
  }

  private void resize(int cap) {
    long[] old = table;
    table = new long[cap * 2];
    mask = cap - 1;
    size = 0;
    for (int i = 0; i < old.length; i += 2) {
      if (old[i] != 0) {
        put(old[i], old[i + 1]);
      }
    }
  }

  /** Bytes held by the table arrays (for the memory gauge). */
  long footprintBytes() {
    return 16L + 8L * table.length;
  }
}
