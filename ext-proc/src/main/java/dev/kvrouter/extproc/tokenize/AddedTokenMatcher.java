package dev.kvrouter.extproc.tokenize;

import java.util.Arrays;
import java.util.Map;

/**
 * Finds added tokens in text the way tokenizers' {@code AddedVocabulary} does (Aho-Corasick, leftmost-longest):
 * the match with the leftmost start wins, and among those the longest. Implemented as a char trie probed at
 * each position whose char can start a token, which gives the same answer. Immutable and thread-safe.
 */
final class AddedTokenMatcher {

  /** No token can start here. */
  static final long NONE = -1L;

  private final long[] keys;
  private final int[] children;
  private final int mask;
  private final int[] tokenId;
  private final int[] depth;
  private final long[] firstChars = new long[1024];
  private final boolean empty;

  /** @param tokens content to id; contents must be non-empty and distinct */
  AddedTokenMatcher(Map<String, Integer> tokens) {
    int nodes = 1;
    for (String t : tokens.keySet()) {
      nodes += t.length();
    }
    int cap = Integer.highestOneBit(Math.max(16, nodes * 2)) << 1;
    keys = new long[cap];
    Arrays.fill(keys, -1L);
    children = new int[cap];
    mask = cap - 1;
    int[] ids = new int[nodes];
    int[] depths = new int[nodes];
    Arrays.fill(ids, -1);
    int next = 1;
    for (Map.Entry<String, Integer> e : tokens.entrySet()) {
      String t = e.getKey();
      if (t.isEmpty()) {
        throw new IllegalArgumentException("empty added token");
      }
      char c0 = t.charAt(0);
      firstChars[c0 >>> 6] |= 1L << c0;
      int node = 0;
      for (int i = 0; i < t.length(); i++) {
        int child = child(node, t.charAt(i));
        if (child < 0) {
          child = next++;
          depths[child] = i + 1;
          put(node, t.charAt(i), child);
        }
        node = child;
      }
      ids[node] = e.getValue();
    }
    tokenId = Arrays.copyOf(ids, next);
    depth = Arrays.copyOf(depths, next);
    empty = tokens.isEmpty();
  }

  boolean isEmpty() {
    return empty;
  }

  private static long key(int node, char c) {
    return ((long) node << 16) | c;
  }

  private static int slot(long key, int mask) {
    long h = key * 0x9E3779B97F4A7C15L;
    return (int) (h ^ (h >>> 29)) & mask;
  }

  private void put(int node, char c, int child) {
    long k = key(node, c);
    int i = slot(k, mask);
    while (keys[i] != -1L) {
      i = (i + 1) & mask;
    }
    keys[i] = k;
    children[i] = child;
  }

  private int child(int node, char c) {
    long k = key(node, c);
    int i = slot(k, mask);
    while (true) {
      long at = keys[i];
      if (at == k) {
        return children[i];
      }
      if (at == -1L) {
        return -1;
      }
      i = (i + 1) & mask;
    }
  }

  /**
   * The leftmost-longest match in {@code s[from, end)}, packed as {@code start << 32 | node}, or {@link
   * #NONE}. Decode with {@link #start}, {@link #end} and {@link #id}.
   */
  long find(CharSequence s, int from, int end) {
    if (empty) {
      return NONE;
    }
    for (int i = from; i < end; i++) {
      char c = s.charAt(i);
      if ((firstChars[c >>> 6] & (1L << c)) == 0) {
        continue;
      }
      int node = 0;
      int best = -1;
      for (int j = i; j < end; j++) {
        node = child(node, s.charAt(j));
        if (node < 0) {
          break;
        }
        if (tokenId[node] >= 0) {
          best = node;
        }
      }
      if (best >= 0) {
        return ((long) i << 32) | best;
      }
    }
    return NONE;
  }

  static int start(long match) {
    return (int) (match >>> 32);
  }

  int end(long match) {
    return start(match) + depth[(int) match];
  }

  int id(long match) {
    return tokenId[(int) match];
  }
}
