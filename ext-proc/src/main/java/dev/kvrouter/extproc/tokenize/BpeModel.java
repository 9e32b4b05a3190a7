package dev.kvrouter.extproc.tokenize;

import java.util.Arrays;

/**
 * The BPE model of tokenizer.json applied to one pre-tokenized word: initial symbols (bytes for ByteLevel
 * vocabularies; code points with byte fallback otherwise), then merges by rank, exactly as tokenizers'
 * {@code Word::merge_all} (lowest rank first, leftmost on ties). {@code ignore_merges} looks the whole word
 * up first.
 *
 * <p>Immutable and thread-safe; callers pass a {@link Scratch} they own.
 */
final class BpeModel {
  /** Words with at most this many symbols merge by rescanning; longer ones use a heap. Same result. */
  static final int SMALL_WORD = 40;

  private final MergeTable merges;
  private final int[] byteToId; // ByteLevel: raw byte -> id of its byte-level char; else null
  private final int[] bmpToId; // non-ByteLevel: single BMP char token -> id, -1 if none
  private final IntIntMap supplementaryToId;
  private final int[] byteFallback; // <0xXX> ids, or null
  private final ByteSequenceMap wholeWords; // ignore_merges: word bytes -> id, or null
  private final CodePointPairSet mergeablePairs; // non-ByteLevel: adjacent pairs inside some token, or null
  private final WordCache wordCache;

  /**
   * @param mergeablePairs for non-ByteLevel models, every pair of adjacent code points occurring inside some
   *     vocabulary token: a word is cut wherever its neighbours form no such pair, because no merge can ever
   *     produce a symbol spanning that point, so the pieces merge independently with the same result. This
   *     turns Gemma's whole-paragraph "words" into word-sized, cacheable pieces. Null disables it.
   */
  BpeModel(MergeTable merges, int[] byteToId, int[] bmpToId, IntIntMap supplementaryToId, int[] byteFallback,
      ByteSequenceMap wholeWords, CodePointPairSet mergeablePairs, WordCache wordCache) {
    this.merges = merges;
    this.byteToId = byteToId;
    this.bmpToId = bmpToId;
    this.supplementaryToId = supplementaryToId;
    this.byteFallback = byteFallback;
    this.wholeWords = wholeWords;
    this.mergeablePairs = mergeablePairs;
    this.wordCache = wordCache;
  }

  /** Per-caller working memory, grown as needed. Not thread-safe. */
  static final class Scratch {
    byte[] bytes = new byte[256];
    int[] sym = new int[256];
    long[] pair = new long[256];
    int[] prev = new int[0];
    int[] next = new int[0];
    long[] heap = new long[0];

    void ensureSymbols(int n) {
      if (sym.length < n) {
        int cap = Math.max(n, sym.length * 2);
        sym = Arrays.copyOf(sym, cap);
        pair = new long[cap];
      }
    }

    void ensureBytes(int n) {
      if (bytes.length < n) {
        bytes = new byte[Math.max(n, bytes.length * 2)];
      }
    }
  }

  /** Appends the ids of the word {@code s[start, end)} to {@code out}. */
  void encodeWord(CharSequence s, int start, int end, Scratch scratch, IntList out) {
    if (mergeablePairs == null || end - start < 2) {
      encodePiece(s, start, end, scratch, out);
      return;
    }
    int pieceStart = start;
    int prev = SplitPattern.cpAt(s, start, end);
    int i = start + SplitPattern.len(prev);
    while (i < end) {
      int cp = SplitPattern.cpAt(s, i, end);
      if (!mergeablePairs.contains(prev, cp)) {
        encodePiece(s, pieceStart, i, scratch, out);
        pieceStart = i;
      }
      prev = cp;
      i += SplitPattern.len(cp);
    }
    encodePiece(s, pieceStart, end, scratch, out);
  }

  private void encodePiece(CharSequence s, int start, int end, Scratch scratch, IntList out) {
    int hash = 0;
    boolean cacheable = wordCache != null && end - start <= WordCache.MAX_WORD_CHARS;
    if (cacheable) {
      hash = WordCache.hash(s, start, end);
      if (wordCache.appendIfPresent(s, start, end, hash, out)) {
        return;
      }
    }
    int before = out.size();
    encodeUncached(s, start, end, scratch, out);
    if (cacheable) {
      wordCache.put(s, start, end, hash, out.array(), before, out.size() - before);
    }
  }

  private void encodeUncached(CharSequence s, int start, int end, Scratch scratch, IntList out) {
    int n;
    if (byteToId != null) {
      int len = utf8(s, start, end, scratch);
      if (wholeWords != null) {
        int id = wholeWords.get(scratch.bytes, 0, len);
        if (id >= 0) {
          out.add(id);
          return;
        }
      }
      scratch.ensureSymbols(len);
      int[] sym = scratch.sym;
      byte[] b = scratch.bytes;
      for (int i = 0; i < len; i++) {
        sym[i] = byteToId[b[i] & 0xFF];
      }
      n = len;
    } else {
      if (wholeWords != null) {
        int len = utf8(s, start, end, scratch);
        int id = wholeWords.get(scratch.bytes, 0, len);
        if (id >= 0) {
          out.add(id);
          return;
        }
      }
      n = charSymbols(s, start, end, scratch);
    }
    n = n <= SMALL_WORD ? mergeSmall(scratch.sym, scratch.pair, n) : mergeLarge(scratch, n);
    out.addAll(scratch.sym, 0, n);
  }

  /** Initial symbols of a non-ByteLevel word: one per code point, or its UTF-8 bytes as fallback tokens. */
  private int charSymbols(CharSequence s, int start, int end, Scratch scratch) {
    scratch.ensureSymbols(4 * (end - start));
    int[] sym = scratch.sym;
    int n = 0;
    int i = start;
    while (i < end) {
      char c = s.charAt(i);
      int cp = c;
      int width = 1;
      if (Character.isSurrogate(c)) {
        if (Character.isHighSurrogate(c) && i + 1 < end && Character.isLowSurrogate(s.charAt(i + 1))) {
          cp = Character.toCodePoint(c, s.charAt(i + 1));
          width = 2;
        } else {
          throw new TokenizationException("text contains an unpaired surrogate");
        }
      }
      int id = cp < 0x10000 ? bmpToId[cp] : supplementaryToId.get(cp);
      if (id >= 0) {
        sym[n++] = id;
      } else {
        // tokenizers: every UTF-8 byte of the char becomes its <0xXX> token (checked complete at load).
        if (cp < 0x80) {
          sym[n++] = byteFallback[cp];
        } else if (cp < 0x800) {
          sym[n++] = byteFallback[0xC0 | (cp >> 6)];
          sym[n++] = byteFallback[0x80 | (cp & 0x3F)];
        } else if (cp < 0x10000) {
          sym[n++] = byteFallback[0xE0 | (cp >> 12)];
          sym[n++] = byteFallback[0x80 | ((cp >> 6) & 0x3F)];
          sym[n++] = byteFallback[0x80 | (cp & 0x3F)];
        } else {
          sym[n++] = byteFallback[0xF0 | (cp >> 18)];
          sym[n++] = byteFallback[0x80 | ((cp >> 12) & 0x3F)];
          sym[n++] = byteFallback[0x80 | ((cp >> 6) & 0x3F)];
          sym[n++] = byteFallback[0x80 | (cp & 0x3F)];
        }
      }
      i += width;
    }
    return n;
  }

  /** UTF-8 of {@code s[start, end)} into {@code scratch.bytes}; returns the byte count. */
  static int utf8(CharSequence s, int start, int end, Scratch scratch) {
    scratch.ensureBytes(3 * (end - start));
    byte[] b = scratch.bytes;
    int n = 0;
    for (int i = start; i < end; i++) {
      char c = s.charAt(i);
      if (c < 0x80) {
        b[n++] = (byte) c;
      } else if (c < 0x800) {
        b[n++] = (byte) (0xC0 | (c >> 6));
        b[n++] = (byte) (0x80 | (c & 0x3F));
      } else if (Character.isSurrogate(c)) {
        if (Character.isHighSurrogate(c) && i + 1 < end && Character.isLowSurrogate(s.charAt(i + 1))) {
          int cp = Character.toCodePoint(c, s.charAt(++i));
          b[n++] = (byte) (0xF0 | (cp >> 18));
          b[n++] = (byte) (0x80 | ((cp >> 12) & 0x3F));
          b[n++] = (byte) (0x80 | ((cp >> 6) & 0x3F));
          b[n++] = (byte) (0x80 | (cp & 0x3F));
        } else {
          throw new TokenizationException("text contains an unpaired surrogate");
        }
      } else {
        b[n++] = (byte) (0xE0 | (c >> 12));
        b[n++] = (byte) (0x80 | ((c >> 6) & 0x3F));
        b[n++] = (byte) (0x80 | (c & 0x3F));
      }
    }
    return n;
  }

  /** Merges by rescanning the pair ranks: O(n^2) but tiny constants for normal words. */
  int mergeSmall(int[] sym, long[] pair, int n) {
    if (n < 2) {
      return n;
    }
    for (int i = 0; i < n - 1; i++) {
      pair[i] = lookup(sym[i], sym[i + 1]);
    }
    while (n > 1) {
      long best = Long.MAX_VALUE;
      int at = -1;
      for (int i = 0; i < n - 1; i++) {
        if (pair[i] < best) {
          best = pair[i];
          at = i;
        }
      }
      if (at < 0) {
        break;
      }
      sym[at] = MergeTable.merged(best);
      int tail = n - at - 2;
      if (tail > 0) {
        System.arraycopy(sym, at + 2, sym, at + 1, tail);
        System.arraycopy(pair, at + 2, pair, at + 1, tail - 1);
      }
      n--;
      if (at > 0) {
        pair[at - 1] = lookup(sym[at - 1], sym[at]);
      }
      if (at < n - 1) {
        pair[at] = lookup(sym[at], sym[at + 1]);
      }
    }
    return n;
  }

  /** Merge of a pair ordered by rank, or Long.MAX_VALUE when the pair does not merge. */
  private long lookup(int left, int right) {
    long m = merges.get(left, right);
    return m == MergeTable.NONE ? Long.MAX_VALUE : m;
  }

  /** tokenizers' heap algorithm: (rank, position) order, stale entries skipped. */
  int mergeLarge(Scratch scratch, int n) {
    int[] sym = scratch.sym;
    if (scratch.prev.length < n) {
      int cap = Math.max(n, scratch.prev.length * 2);
      scratch.prev = new int[cap];
      scratch.next = new int[cap];
      scratch.heap = new long[cap];
    }
    int[] prev = scratch.prev;
    int[] next = scratch.next;
    LongHeap heap = new LongHeap(scratch.heap);
    for (int i = 0; i < n; i++) {
      prev[i] = i - 1;
      next[i] = i + 1;
    }
    for (int i = 0; i < n - 1; i++) {
      long m = merges.get(sym[i], sym[i + 1]);
      if (m != MergeTable.NONE) {
        heap.push(((long) MergeTable.rank(m) << 32) | i);
      }
    }
    while (!heap.isEmpty()) {
      long top = heap.pop();
      int pos = (int) top;
      int rank = (int) (top >>> 32);
      if (sym[pos] < 0) {
        continue;
      }
      int right = next[pos];
      if (right >= n) {
        continue;
      }
      long m = merges.get(sym[pos], sym[right]);
      if (m == MergeTable.NONE || MergeTable.rank(m) != rank) {
        continue; // stale: one side changed since this entry was pushed
      }
      sym[pos] = MergeTable.merged(m);
      sym[right] = -1;
      int after = next[right];
      next[pos] = after;
      if (after < n) {
        prev[after] = pos;
      }
      int before = prev[pos];
      if (before >= 0) {
        long mm = merges.get(sym[before], sym[pos]);
        if (mm != MergeTable.NONE) {
          heap.push(((long) MergeTable.rank(mm) << 32) | before);
        }
      }
      if (after < n) {
        long mm = merges.get(sym[pos], sym[after]);
        if (mm != MergeTable.NONE) {
          heap.push(((long) MergeTable.rank(mm) << 32) | pos);
        }
      }
    }
    scratch.heap = heap.array();
    int k = 0;
    for (int i = 0; i < n; i = next[i]) {
      sym[k++] = sym[i];
    }
    return k;
  }

  /** A binary min-heap of longs on a reusable array. */
  static final class LongHeap {
    private long[] a;
    private int size;

    LongHeap(long[] backing) {
      a = backing.length == 0 ? new long[16] : backing;
    }

    long[] array() {
      return a;
    }

    boolean isEmpty() {
      return size == 0;
    }

    void push(long v) {
      if (size == a.length) {
        a = Arrays.copyOf(a, a.length * 2);
      }
      int i = size++;
      while (i > 0) {
        int parent = (i - 1) >>> 1;
        long p = a[parent];
        if (p <= v) {
          break;
        }
        a[i] = p;
        i = parent;
      }
      a[i] = v;
    }

    long pop() {
      long top = a[0];
      long last = a[--size];
      int i = 0;
      int half = size >>> 1;
      while (i < half) {
        int child = 2 * i + 1;
        long c = a[child];
        int r = child + 1;
        if (r < size && a[r] < c) {
          child = r;
          c = a[r];
        }
        if (last <= c) {
          break;
        }
        a[i] = c;
        i = child;
      }
      if (size > 0) {
        a[i] = last;
      }
      return top;
    }
  }
}
