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
  private final char[] distinctFirstChars;
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
    StringBuilder distinct = new StringBuilder();
    for (String t : tokens.keySet()) {
      if (distinct.indexOf(t.substring(0, 1)) < 0) {
        distinct.append(t.charAt(0));
      }
    }
    distinctFirstChars = distinct.toString().toCharArray();
  }

  /** Above this many distinct first chars, scanning char by char beats one indexOf per first char. */
  private static final int MAX_INDEXED_FIRST_CHARS = 8;

  /**
   * A scan over one text with increasing positions, remembering where each first char occurs next so that
   * every char is examined by {@link String#indexOf(int, int)} (vectorized) at most once per first char.
   * Owned by one caller (a cursor); not thread-safe.
   */
  final class Scanner {
    private final CharSequence text;
    private final String string;
    private final int[] next;

    Scanner(CharSequence text) {
      this.text = text;
      this.string = text instanceof String s && distinctFirstChars.length <= MAX_INDEXED_FIRST_CHARS ? s : null;
      this.next = string == null ? null : new int[distinctFirstChars.length];
      if (next != null) {
        Arrays.fill(next, -2);
      }
    }

    /** Like {@link AddedTokenMatcher#find}, for non-decreasing {@code from} and the text's end. */
    long find(int from) {
      int end = text.length();
      if (string == null || empty) {
        return AddedTokenMatcher.this.find(text, from, end);
      }
      int pos = from;
      while (pos < end) {
        int candidate = Integer.MAX_VALUE;
        for (int k = 0; k < next.length; k++) {
          int at = next[k];
          if (at != Integer.MAX_VALUE && at < pos) {
            at = string.indexOf(distinctFirstChars[k], pos);
            next[k] = at = at < 0 ? Integer.MAX_VALUE : at;
          }
          candidate = Math.min(candidate, at);
        }
        if (candidate == Integer.MAX_VALUE) {
          return NONE;
        }
        int best = longestAt(string, candidate, end);
        if (best >= 0) {
          return ((long) candidate << 32) | best;
        }
        pos = candidate + 1;
      }
      return NONE;
    }
  }

  /** The trie node of the longest token starting exactly at {@code i}, or -1. */
  private int longestAt(CharSequence s, int i, int end) {
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
    return best;
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
      int best = longestAt(s, i, end);
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
