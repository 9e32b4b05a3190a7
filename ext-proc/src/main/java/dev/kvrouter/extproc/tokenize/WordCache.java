package dev.kvrouter.extproc.tokenize;

/**
 * A bounded, lossy, direct-mapped cache of word to BPE ids, the pure-Java analogue of tokenizers' per-word
 * cache. Each slot holds one immutable entry; a collision simply replaces it.
 *
 * <p>Thread-safe without locks: entries are immutable objects with final fields, published by a plain
 * array store (a racing reader sees either the old entry, the new one, or misses). Lossy by design.
 */
final class WordCache {
  /** Words longer than this are not cached (they are rare and would churn the table). */
  static final int MAX_WORD_CHARS = 48;

  private record Entry(int hash, char[] word, int[] ids) {}

  private final Entry[] slots;
  private final int mask;

  WordCache(int capacity) {
    int cap = Integer.highestOneBit(Math.max(64, capacity - 1)) << 1;
    slots = new Entry[cap];
    mask = cap - 1;
  }

  static int hash(CharSequence s, int start, int end) {
    int h = end - start;
    for (int i = start; i < end; i++) {
      h = 31 * h + s.charAt(i);
    }
    return h ^ (h >>> 16) * 0x45D9F3B;
  }

  /** Appends the cached ids of {@code s[start, end)} to {@code out} and returns true, or returns false. */
  boolean appendIfPresent(CharSequence s, int start, int end, int hash, IntList out) {
    Entry e = slots[hash & mask];
    if (e == null || e.hash != hash || e.word.length != end - start) {
      return false;
    }
    char[] w = e.word;
    for (int i = 0; i < w.length; i++) {
      if (w[i] != s.charAt(start + i)) {
        return false;
      }
    }
    int[] ids = e.ids;
    if (ids.length == 1) {
      out.add(ids[0]);
    } else {
      out.addAll(ids);
    }
    return true;
  }

  void put(CharSequence s, int start, int end, int hash, int[] ids, int off, int len) {
    char[] w = new char[end - start];
    for (int i = 0; i < w.length; i++) {
      w[i] = s.charAt(start + i);
    }
    int[] copy = new int[len];
    System.arraycopy(ids, off, copy, 0, len);
    slots[hash & mask] = new Entry(hash, w, copy);
  }
}
