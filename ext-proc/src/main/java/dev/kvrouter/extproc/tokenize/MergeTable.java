package dev.kvrouter.extproc.tokenize;

import java.util.Arrays;

/**
 * BPE merges: (left id, right id) to (rank, merged id), in one open-addressing table of longs so a lookup
 * touches one or two cache lines. Immutable after construction, thread-safe for reads.
 */
final class MergeTable {
  static final long NONE = -1L;

  private final long[] slots; // key, value, key, value...
  private final int mask;
  private int size;

  MergeTable(int expected) {
    int cap = Integer.highestOneBit(Math.max(16, expected * 2 - 1)) << 1;
    slots = new long[cap * 2];
    Arrays.fill(slots, NONE);
    mask = cap - 1;
  }

  private static long key(int left, int right) {
    return ((long) left << 32) | (right & 0xFFFFFFFFL);
  }

  private int slot(long key) {
    long h = key * 0x9E3779B97F4A7C15L;
    return (int) (h ^ (h >>> 32)) & mask;
  }

  /** Adds or replaces a merge (a later duplicate overwrites, as tokenizers' map collection does). */
  void put(int left, int right, int rank, int merged) {
    long k = key(left, right);
    int i = slot(k);
    while (true) {
      long at = slots[2 * i];
      if (at == NONE || at == k) {
        if (at == NONE) {
          size++;
        }
        slots[2 * i] = k;
        slots[2 * i + 1] = ((long) rank << 32) | merged;
        return;
      }
      i = (i + 1) & mask;
    }
  }

  /** {@code rank << 32 | merged}, or {@link #NONE}. */
  long get(int left, int right) {
    long k = key(left, right);
    int i = slot(k);
    while (true) {
      long at = slots[2 * i];
      if (at == k) {
        return slots[2 * i + 1];
      }
      if (at == NONE) {
        return NONE;
      }
      i = (i + 1) & mask;
    }
  }

  int size() {
    return size;
  }

  static int rank(long merge) {
    return (int) (merge >>> 32);
  }

  static int merged(long merge) {
    return (int) merge;
  }
}
