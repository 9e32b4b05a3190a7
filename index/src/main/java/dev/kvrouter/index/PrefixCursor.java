package dev.kvrouter.index;

import java.util.Arrays;

/**
 * An incremental prefix lookup: feed the request's block hashes one by one with {@link #advance}; it answers,
 * per block, whether any worker still holds every block so far, so the request path can stop tokenizing and
 * hashing as soon as nobody can match more. {@link #finish} then fills a {@link PrefixMatches}.
 *
 * <p>Cost: one table probe per block plus {@code O(words)} bit operations, where a word covers 64 worker
 * ordinals still matching; nothing depends on how many blocks the index holds. The sets of workers still
 * matching are bitsets over ordinals (one for event-backed blocks, one for predictions); a worker leaving a
 * set records its prefix length, and per-tier counts are kept only for workers still in the set.
 *
 * <p>Reusable and not thread-safe: one per request thread ({@link KvIndex#newCursor()}). Never blocks and
 * never allocates after warm-up.
 */
public final class PrefixCursor {

  private final KvIndex index;
  private final BlockTable table;
  private int words;
  private long[] real = new long[1];
  private long[] pred = new long[1];
  private long[] g = new long[1];
  private long[] c = new long[1];
  private long[] d = new long[1];
  private long[] p = new long[1];
  private int[] realLen = new int[64];
  private int[] predLen = new int[64];
  private int[] cpuCount = new int[64];
  private int[] diskCount = new int[64];
  private int[] candidates = new int[64];
  private int candidateCount;
  private int lo;
  private int hi;
  private int position;
  private boolean done;

  PrefixCursor(KvIndex index, BlockTable table) {
    this.index = index;
    this.table = table;
    reset();
  }

  /** Starts a new lookup. */
  public void reset() {
    int w = index.ordinalWords();
    if (w > real.length) {
      real = new long[w];
      pred = new long[w];
      g = new long[w];
      c = new long[w];
      d = new long[w];
      p = new long[w];
      realLen = new int[w * 64];
      predLen = new int[w * 64];
      cpuCount = new int[w * 64];
      diskCount = new int[w * 64];
    }
    words = w;
    position = 0;
    candidateCount = 0;
    done = false;
  }

  /** Blocks consumed so far (the number of {@link #advance} calls that returned true, once it returns false). */
  public int position() {
    return position;
  }

  /**
   * Feeds the next block hash.
   *
   * @return whether some worker (from events or predictions) holds every block fed so far, this one included;
   *     after the first false, further calls return false and change nothing
   */
  public boolean advance(long hash) {
    if (done) {
      return false;
    }
    if (position == 0) {
      return first(hash);
    }
    table.read(hash, lo, hi, g, c, d, p);
    int i = position;
    boolean any = false;
    int newLo = Integer.MAX_VALUE;
    int newHi = -1;
    for (int w = lo; w <= hi; w++) {
      long ra = real[w];
      if (ra != 0) {
        long gw = g[w];
        long cw = c[w];
        long now = ra & (gw | cw | d[w]);
        dropped(ra & ~now, w, realLen, i);
        real[w] = now;
        if (now != 0) {
          count(now & cw & ~gw, w, cpuCount);
          count(now & d[w] & ~gw & ~cw, w, diskCount);
        }
      }
      long pa = pred[w];
      if (pa != 0) {
        long now = pa & p[w];
        dropped(pa & ~now, w, predLen, i);
        pred[w] = now;
      }
      if ((real[w] | pred[w]) != 0) {
        any = true;
        newLo = Math.min(newLo, w);
        newHi = w;
      }
    }
    if (!any) {
      done = true;
      return false;
    }
    lo = newLo;
    hi = newHi;
    position++;
    return true;
  }

  private boolean first(long hash) {
    int last = words - 1;
    if (!table.read(hash, 0, last, g, c, d, p)) {
      done = true;
      return false;
    }
    int newLo = Integer.MAX_VALUE;
    int newHi = -1;
    int n = 0;
    for (int w = 0; w <= last; w++) {
      long gw = g[w];
      long cw = c[w];
      long r = gw | cw | d[w];
      real[w] = r;
      pred[w] = p[w];
      long all = r | p[w];
      if (all == 0) {
        continue;
      }
      newLo = Math.min(newLo, w);
      newHi = w;
      while (all != 0) {
        int ord = (w << 6) + Long.numberOfTrailingZeros(all);
        all &= all - 1;
        if (n == candidates.length) {
          candidates = Arrays.copyOf(candidates, n * 2);
        }
        candidates[n++] = ord;
        realLen[ord] = 0;
        predLen[ord] = 0;
        cpuCount[ord] = 0;
        diskCount[ord] = 0;
      }
      count(r & cw & ~gw, w, cpuCount);
      count(r & d[w] & ~gw & ~cw, w, diskCount);
    }
    candidateCount = n;
    if (n == 0) {
      done = true;
      return false;
    }
    lo = newLo;
    hi = newHi;
    position = 1;
    return true;
  }

  private static void dropped(long bits, int w, int[] len, int at) {
    while (bits != 0) {
      len[(w << 6) + Long.numberOfTrailingZeros(bits)] = at;
      bits &= bits - 1;
    }
  }

  private static void count(long bits, int w, int[] counts) {
    while (bits != 0) {
      counts[(w << 6) + Long.numberOfTrailingZeros(bits)]++;
      bits &= bits - 1;
    }
  }

  /** Writes the answer for the blocks consumed so far into {@code out}. */
  public void finish(PrefixMatches out) {
    out.reset(position);
    if (candidateCount == 0) {
      return;
    }
    int last = Math.min(hi, words - 1);
    for (int w = lo; w <= last; w++) {
      long r = real[w];
      while (r != 0) {
        realLen[(w << 6) + Long.numberOfTrailingZeros(r)] = position;
        r &= r - 1;
      }
      long q = pred[w];
      while (q != 0) {
        predLen[(w << 6) + Long.numberOfTrailingZeros(q)] = position;
        q &= q - 1;
      }
    }
    for (int k = 0; k < candidateCount; k++) {
      int ord = candidates[k];
      WorkerView v = index.viewAt(ord);
      if (v == null || v.retired()) {
        continue;
      }
      int m = realLen[ord];
      int cc = cpuCount[ord];
      int dc = diskCount[ord];
      out.add(v.id(), ord, m, m - cc - dc, cc, dc, predLen[ord], v.stale());
    }
  }
}
