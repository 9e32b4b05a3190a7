package dev.kvrouter.examples.workload;

/**
 * Open-addressing set of longs (linear probing, power-of-two table, load at most 1/2). The ideal-reuse pass over
 * a full trace holds millions of block hashes; boxed {@code HashSet<Long>} would need several times the memory.
 * Zero is stored in a side flag so it can be the empty marker. Not thread-safe.
 */
public final class LongHashSet {

  private long[] table;
  private int size;
  private boolean hasZero;

  public LongHashSet(int expected) {
    int cap = Integer.highestOneBit(Math.max(16, expected) * 2 - 1) << 1;
    table = new long[cap];
  }

  public boolean contains(long v) {
    if (v == 0) {
      return hasZero;
    }
    int mask = table.length - 1;
    for (int i = slot(v, mask); ; i = (i + 1) & mask) {
      long t = table[i];
      if (t == v) {
        return true;
      }
      if (t == 0) {
        return false;
      }
    }
  }

  /** Adds {@code v}; returns true if it was absent. */
  public boolean add(long v) {
    if (v == 0) {
      boolean added = !hasZero;
      hasZero = true;
      if (added) {
        size++;
      }
      return added;
    }
    if ((size + 1) * 2 > table.length) {
      grow();
    }
    int mask = table.length - 1;
    for (int i = slot(v, mask); ; i = (i + 1) & mask) {
      long t = table[i];
      if (t == v) {
        return false;
      }
      if (t == 0) {
        table[i] = v;
        size++;
        return true;
      }
    }
  }

  public int size() {
    return size;
  }

  private void grow() {
    long[] old = table;
    table = new long[old.length * 2];
    int mask = table.length - 1;
    for (long v : old) {
      if (v != 0) {
        int i = slot(v, mask);
        while (table[i] != 0) {
          i = (i + 1) & mask;
        }
        table[i] = v;
      }
    }
  }

  private static int slot(long v, int mask) {
    return (int) Rng.mix(v) & mask;
  }
}
