package dev.kvrouter.extproc.tokenize;

import java.util.Arrays;

/**
 * Byte sequence to token id, without allocating on lookup: the whole-word vocabulary lookup of BPE models
 * with {@code ignore_merges}. Keys live in one byte pool. Immutable after construction.
 */
final class ByteSequenceMap {
  private final int[] table; // entry index + 1, 0 = empty
  private final int mask;
  private final int[] offsets;
  private final int[] lengths;
  private final int[] values;
  private final byte[] pool;

  ByteSequenceMap(byte[][] keys, int[] ids) {
    int n = keys.length;
    int cap = Integer.highestOneBit(Math.max(16, n * 2 - 1)) << 1;
    table = new int[cap];
    mask = cap - 1;
    offsets = new int[n];
    lengths = new int[n];
    values = new int[n];
    int total = 0;
    for (byte[] k : keys) {
      total += k.length;
    }
    pool = new byte[total];
    int p = 0;
    for (int e = 0; e < n; e++) {
      byte[] k = keys[e];
      System.arraycopy(k, 0, pool, p, k.length);
      offsets[e] = p;
      lengths[e] = k.length;
      values[e] = ids[e];
      p += k.length;
      int i = hash(k, 0, k.length) & mask;
      while (table[i] != 0) {
        int other = table[i] - 1;
        if (equals(other, k, 0, k.length)) {
          break; // duplicate key: keep the first
        }
        i = (i + 1) & mask;
      }
      if (table[i] == 0) {
        table[i] = e + 1;
      }
    }
  }

  static int hash(byte[] b, int off, int len) {
    long h = 0x9E3779B97F4A7C15L ^ len;
    for (int i = off, end = off + len; i < end; i++) {
      h = (h ^ (b[i] & 0xFF)) * 0x100000001B3L;
    }
    h ^= h >>> 29;
    h *= 0xBF58476D1CE4E5B9L;
    return (int) (h ^ (h >>> 32));
  }

  private boolean equals(int entry, byte[] b, int off, int len) {
    return lengths[entry] == len && Arrays.equals(pool, offsets[entry], offsets[entry] + len, b, off, off + len);
  }

  /** The id of {@code b[off, off + len)}, or -1. */
  int get(byte[] b, int off, int len) {
    int i = hash(b, off, len) & mask;
    while (true) {
      int at = table[i];
      if (at == 0) {
        return -1;
      }
      if (equals(at - 1, b, off, len)) {
        return values[at - 1];
      }
      i = (i + 1) & mask;
    }
  }
}
