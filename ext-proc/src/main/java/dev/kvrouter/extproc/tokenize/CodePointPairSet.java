package dev.kvrouter.extproc.tokenize;

import java.util.Arrays;

/** A set of (code point, code point) pairs in one open-addressing long table. Immutable once built. */
final class CodePointPairSet {
  private static final long EMPTY = -1L;
  private long[] keys;
  private int mask;
  private int size;

  CodePointPairSet(int expected) {
    int cap = Integer.highestOneBit(Math.max(16, expected * 2 - 1)) << 1;
    keys = new long[cap];
    Arrays.fill(keys, EMPTY);
    mask = cap - 1;
  }

  private static long key(int a, int b) {
    return ((long) a << 32) | b;
  }

  private static int slot(long k, int mask) {
    long h = k * 0x9E3779B97F4A7C15L;
    return (int) (h ^ (h >>> 32)) & mask;
  }

  void add(int a, int b) {
    if ((size + 1) * 2 > keys.length) {
      long[] old = keys;
      keys = new long[old.length * 2];
      Arrays.fill(keys, EMPTY);
      mask = keys.length - 1;
      size = 0;
      for (long k : old) {
        if (k != EMPTY) {
          insert(k);
        }
      }
    }
    insert(key(a, b));
  }

  private void insert(long k) {
    int i = slot(k, mask);
    while (keys[i] != EMPTY) {
      if (keys[i] == k) {
        return;
      }
      i = (i + 1) & mask;
    }
    keys[i] = k;
    size++;
  }

  boolean contains(int a, int b) {
    long k = key(a, b);
    int i = slot(k, mask);
    while (true) {
      long at = keys[i];
      if (at == k) {
        return true;
      }
      if (at == EMPTY) {
        return false;
      }
      i = (i + 1) & mask;
    }
  }

  int size() {
    return size;
  }
}
