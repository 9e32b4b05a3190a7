package dev.kvrouter.extproc.tokenize;

import java.util.Arrays;

/** A small open-addressing int to int map (missing = -1). Immutable once built; reads are thread-safe. */
final class IntIntMap {
  private int[] keys;
  private int[] values;
  private int mask;
  private int size;

  IntIntMap(int expected) {
    int cap = Integer.highestOneBit(Math.max(8, expected * 2 - 1)) << 1;
    keys = new int[cap];
    values = new int[cap];
    Arrays.fill(keys, -1);
    mask = cap - 1;
  }

  private static int slot(int key, int mask) {
    int h = key * 0x9E3779B9;
    return (h ^ (h >>> 16)) & mask;
  }

  void put(int key, int value) {
    if (key < 0) {
      throw new IllegalArgumentException("negative key");
    }
    if ((size + 1) * 2 > keys.length) {
      int[] k = keys;
      int[] v = values;
      keys = new int[k.length * 2];
      values = new int[k.length * 2];
      Arrays.fill(keys, -1);
      mask = keys.length - 1;
      size = 0;
      for (int i = 0; i < k.length; i++) {
        if (k[i] >= 0) {
          put(k[i], v[i]);
        }
      }
    }
    int i = slot(key, mask);
    while (keys[i] >= 0 && keys[i] != key) {
      i = (i + 1) & mask;
    }
    if (keys[i] < 0) {
      size++;
    }
    keys[i] = key;
    values[i] = value;
  }

  int get(int key) {
    int i = slot(key, mask);
    while (true) {
      int k = keys[i];
      if (k == key) {
        return values[i];
      }
      if (k < 0) {
        return -1;
      }
      i = (i + 1) & mask;
    }
  }
}
