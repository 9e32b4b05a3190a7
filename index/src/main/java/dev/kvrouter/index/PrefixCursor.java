package dev.kvrouter.index;

import java.util.Arrays;

/**
 * An incremental prefix lookup: feed the request's block hashes one by one with {@link #advance}; it answers,
 * per block, whether any worker still holds every block so far, so the request path can stop tokenizing and
 * hashing as soon as nobody can match more. {@link #finish} then fills a {@link PrefixMatches}.
 * {@link KvIndex#lookup} runs a whole request through the same state, switching to a fast path
 * ({@link BlockTable#walkWord}) as soon as every worker still matching lies in one 64-ordinal word (always, for
 * fleets of at most 64 (worker, rank) ordinals).
 *
 * <p>Cost: one table probe per block plus {@code O(words)} bit operations, where a word covers 64 worker
 * ordinals still matching; nothing depends on how many blocks the index holds. Requests are capped at
 * {@link #MAX_BLOCKS} blocks (far beyond any context window).
 *
 * <p>With {@link IndexConfig#prefixJump} set, the one-word path becomes a jump search (Dynamo's "Flash Indexer"
 * idea): probe every J-th block, bisect only where candidates drop out, O(D/J + drops * log J) probes instead of
 * D. Once it has spent more probes than half the blocks it covered (candidates dropping out at many different
 * blocks) it reads the rest block by block, so its worst case costs about one stride more than the walk.
 *
 * <p>It trusts each candidate's blocks to be prefix-closed (holding block i means holding blocks 0 to i - 1).
 * vLLM keeps them so: a request frees its blocks tail first onto the LRU free queue, and every request using a
 * block also used its parent and frees the parent after it, so a parent is never evicted before its child;
 * SGLang's radix cache evicts leaves only. The index keeps them so too: a store whose parent is unknown is dropped
 * with its descendants, and predictions expire and are evicted tail first ({@link PredictedBlocks}). What can
 * break closure is marked per worker ({@link WorkerView#open()}) and makes the lookup walk every block instead: a
 * stale view or lost events since the last clear, our own share eviction (any block), handle conflicts, CPU/disk
 * blocks (the offload tier evicts in its own order, and tier counts need every block), and evidence that the
 * engine evicts parents first ({@link WorkerView#notPrefixClosed()}: hybrid-model signatures in its events, a
 * sampled parent check, configuration). Until the sampled check has caught such an engine, its answers can be too
 * long (docs/index.md, "Jump search and prefix closure").
 *
 * <p>Reusable and not thread-safe: one per request thread ({@link KvIndex#newCursor()}). Never blocks and does
 * not allocate once its arrays have grown to the fleet size.
 */
public final class PrefixCursor {

  /** Bit planes per counter: counts up to {@code 2^17 - 1}. */
  private static final int PLANES = 17;

  /** Longest request a cursor counts (blocks); longer requests are looked up on this prefix. */
  public static final int MAX_BLOCKS = (1 << PLANES) - 1;

  /*
   * State. The workers still matching are two bitsets over ordinals: `real` (blocks from events, any tier) and
   * `pred` (predicted blocks). When a worker leaves a set at block i its prefix length (i) is recorded in
   * `realLen`/`predLen` (ordinal-indexed). CPU-only and disk-only blocks of workers still in `real` are counted
   * in bit-sliced counters: plane k of word w (`cpu[w * PLANES + k]`) holds bit k of the count of each of the
   * word's 64 ordinals, so one block costs one carry-save add per word, not one increment per worker.
   */
  private final KvIndex index;
  private final BlockTable table;
  private int words;
  private long[] real = new long[1];
  private long[] pred = new long[1];
  private long[] g = new long[1];
  private long[] c = new long[1];
  private long[] d = new long[1];
  private long[] p = new long[1];
  private long[] cpu = new long[PLANES];
  private long[] disk = new long[PLANES];
  private long[] cpuSeen = new long[1];
  private long[] diskSeen = new long[1];
  private int cpuTop;
  private int diskTop;
  private int[] realLen = new int[64];
  private int[] predLen = new int[64];
  private int[] cpuCount = new int[64];
  private int[] diskCount = new int[64];
  private int[] candidates = new int[64];
  private int candidateCount;
  /** Range of words holding candidates (from block 0), and of words still matching. */
  private int firstLo;
  private int firstHi;
  private int lo;
  private int hi;
  private int position;
  private boolean done;
  /**
   * The index's registration count when this lookup started ({@link KvIndex#registrations()}): a candidate whose
   * ordinal was given to a new worker since then is dropped, because what the lookup read under that ordinal may
   * be the removed worker's. A primitive, so starting a lookup stores no reference (no GC write barrier).
   */
  private long registrationsAtStart;

  PrefixCursor(KvIndex index, BlockTable table) {
    this.index = index;
    this.table = table;
    reset();
  }

  /** Starts a new lookup. */
  public void reset() {
    registrationsAtStart = index.registrations(); // before any block is read
    int w = index.ordinalWords();
    if (w > real.length) {
      real = new long[w];
      pred = new long[w];
      g = new long[w];
      c = new long[w];
      d = new long[w];
      p = new long[w];
      cpu = new long[w * PLANES];
      disk = new long[w * PLANES];
      cpuSeen = new long[w];
      diskSeen = new long[w];
      realLen = new int[w * 64];
      predLen = new int[w * 64];
      cpuCount = new int[w * 64];
      diskCount = new int[w * 64];
    }
    words = w;
    position = 0;
    candidateCount = 0;
    cpuTop = 0;
    diskTop = 0;
    done = false;
  }

  /** Blocks consumed so far: every block fed while {@link #advance} returned true. */
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
    if (done || position >= MAX_BLOCKS) {
      return false;
    }
    if (position == 0) {
      return first(hash);
    }
    table.read(hash, lo, hi, g, c, d, p, this);
    int i = position;
    int newLo = Integer.MAX_VALUE;
    int newHi = -1;
    for (int w = lo; w <= hi; w++) {
      long ra = real[w];
      if (ra != 0) {
        long gw = g[w];
        long cw = c[w];
        long now = ra & (gw | cw | d[w]);
        if (now != ra) {
          dropped(ra & ~now, w, realLen, i);
        }
        real[w] = now;
        addCpu(w, now & cw & ~gw);
        addDisk(w, now & d[w] & ~gw & ~cw);
      }
      long pa = pred[w];
      if (pa != 0) {
        long now = pa & p[w];
        if (now != pa) {
          dropped(pa & ~now, w, predLen, i);
        }
        pred[w] = now;
      }
      if ((real[w] | pred[w]) != 0) {
        newLo = Math.min(newLo, w);
        newHi = w;
      }
    }
    if (newHi < 0) {
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
    if (!table.read(hash, 0, last, g, c, d, p, this)) {
      done = true;
      return false;
    }
    int newLo = Integer.MAX_VALUE;
    int newHi = -1;
    for (int w = 0; w <= last; w++) {
      long r = g[w] | c[w] | d[w];
      if ((r | p[w]) != 0) {
        newLo = Math.min(newLo, w);
        newHi = w;
      }
    }
    if (newHi < 0) {
      done = true;
      return false;
    }
    for (int w = newLo; w <= newHi; w++) {
      startWord(w, g[w] | c[w] | d[w], p[w]);
      addCpu(w, real[w] & c[w] & ~g[w]);
      addDisk(w, real[w] & d[w] & ~g[w] & ~c[w]);
    }
    firstLo = newLo;
    firstHi = newHi;
    lo = newLo;
    hi = newHi;
    position = 1;
    return true;
  }

  /** Records the candidates of word {@code w} and clears its counters. */
  private void startWord(int w, long r, long q) {
    real[w] = r;
    pred[w] = q;
    long all = r | q;
    int n = candidateCount;
    while (all != 0) {
      int ord = (w << 6) + Long.numberOfTrailingZeros(all);
      all &= all - 1;
      if (n == candidates.length) {
        candidates = Arrays.copyOf(candidates, n * 2);
      }
      candidates[n++] = ord;
      realLen[ord] = 0;
      predLen[ord] = 0;
    }
    candidateCount = n;
    Arrays.fill(cpu, w * PLANES, (w + 1) * PLANES, 0L);
    Arrays.fill(disk, w * PLANES, (w + 1) * PLANES, 0L);
    cpuSeen[w] = 0;
    diskSeen[w] = 0;
  }

  private static void dropped(long bits, int w, int[] len, int at) {
    while (bits != 0) {
      len[(w << 6) + Long.numberOfTrailingZeros(bits)] = at;
      bits &= bits - 1;
    }
  }

  /** Adds 1 to the CPU counter of every ordinal set in {@code bits} (word {@code w}). */
  void addCpu(int w, long bits) {
    if (bits == 0) {
      return;
    }
    cpuSeen[w] |= bits;
    long carry = bits;
    int base = w * PLANES;
    int k = 0;
    while (carry != 0) {
      long t = cpu[base + k] & carry;
      cpu[base + k] ^= carry;
      carry = t;
      k++;
    }
    if (k > cpuTop) {
      cpuTop = k;
    }
  }

  void addDisk(int w, long bits) {
    if (bits == 0) {
      return;
    }
    diskSeen[w] |= bits;
    long carry = bits;
    int base = w * PLANES;
    int k = 0;
    while (carry != 0) {
      long t = disk[base + k] & carry;
      disk[base + k] ^= carry;
      carry = t;
      k++;
    }
    if (k > diskTop) {
      diskTop = k;
    }
  }

  /**
   * Most ordinal words a lookup runs the one-word fast path on, one word after the other; with more words still
   * matching it reads block by block ({@link #advance}) until they narrow down.
   */
  static final int FAST_WORDS = 2;

  /**
   * A whole request: block 0 over every ordinal word, then the one-word fast path ({@link BlockTable#walkWord} or
   * the jump search) for each word still matching once at most {@value #FAST_WORDS} are (at once for fleets of
   * at most 128 ordinals), {@link #advance} until then.
   */
  int lookup(long[] hashes, int count) {
    reset();
    int n = Math.min(count, MAX_BLOCKS);
    if (n == 0 || !advance(hashes[0])) {
      return position;
    }
    for (int i = 1; i < n; i++) {
      if (hi - lo < FAST_WORDS) {
        return fastWords(hashes, i, n);
      }
      if (!advance(hashes[i])) {
        break;
      }
    }
    return position;
  }

  /**
   * Finishes the lookup of {@code hashes[from, n)} word by word: a worker's prefix length depends only on its own
   * blocks, so each word's candidates are settled on their own (the second word's probes find the request's slots
   * in cache), and the position is the longest prefix any word reached.
   */
  private int fastWords(long[] hashes, int from, int n) {
    int jump = index.config().prefixJump();
    boolean tiersCounted = cpuTop != 0 || diskTop != 0;
    int longest = from;
    for (int w = lo; w <= hi; w++) {
      if ((real[w] | pred[w]) == 0) {
        continue;
      }
      int reached;
      if (jump > 0 && n - from > jump && (real[w] & index.openWord(w)) == 0 && !tiersCounted) {
        reached = jumpWord(hashes, from, n, w, jump);
      } else {
        reached = table.walkWord(hashes, from, n, this, w);
      }
      longest = Math.max(longest, reached);
    }
    position = longest;
    done = true;
    return longest;
  }

  // Jump search (IndexConfig.prefixJump): one word, no open candidate.

  /** Optimistic reads that failed validation (a writer changed what they read) and were repeated. */
  long retries;
  /** Blocks read under their segment's lock after {@code OPTIMISTIC_TRIES} failed optimistic reads. */
  long lockedReads;

  /** Optimistic block reads this cursor repeated because a writer changed the block meanwhile (lifetime total). */
  public long optimisticRetries() {
    return retries;
  }

  /** Blocks this cursor read under a segment lock after repeated interference (lifetime total). */
  public long lockedReads() {
    return lockedReads;
  }

  /** The predicted holders read by the last {@link BlockTable#holders} call (its second result). */
  long probedPredicted;
  /** Probes of the current jump search. */
  private int probes;
  private long[] stackReal = new long[32];
  private long[] stackPred = new long[32];
  private int[] stackLo = new int[32];
  private int[] stackHi = new int[32];

  /**
   * Finds each candidate's prefix lengths (real and predicted) in {@code hashes[from, count)} by probing every
   * {@code jump}-th block and bisecting the stretch where candidates drop out, instead of reading every block.
   * Equals the walk's answer when every candidate's blocks and predicted blocks are prefix-closed (holding block
   * i means holding blocks 0 to i - 1), which the caller has checked as far as the index can know
   * ({@link WorkerView#open()}); blocks 0 to {@code from - 1} are held by {@code real[w]} and {@code pred[w]}
   * (already read). No candidate holds CPU or disk blocks (it would be open), so there are no tier counts.
   */
  private int jumpWord(long[] hashes, int from, int count, int w, int jump) {
    long aliveReal = real[w];
    long alivePred = pred[w];
    int pos = from;
    int longest = from;
    probes = 0;
    while ((aliveReal | alivePred) != 0 && pos < count) {
      int anchor = Math.min(pos + jump - 1, count - 1);
      long hr = table.holders(hashes[anchor], w, this);
      long hp = probedPredicted;
      probes++;
      long goneReal = aliveReal & ~hr;
      long gonePred = alivePred & ~hp;
      if ((goneReal | gonePred) != 0) {
        longest = Math.max(longest, settle(hashes, goneReal, gonePred, pos, anchor, w));
      }
      aliveReal &= hr;
      alivePred &= hp;
      pos = anchor + 1;
      if (2 * probes > pos - from && (aliveReal | alivePred) != 0 && pos < count) {
        // candidates drop out everywhere (many distinct prefix lengths): bisecting costs more probes than the
        // blocks it skips, so read the rest block by block; everyone still alive holds [0, pos)
        real[w] = aliveReal;
        pred[w] = alivePred;
        return table.walkWord(hashes, pos, count, this, w);
      }
    }
    if ((aliveReal | alivePred) != 0) {
      longest = count;
    }
    endWord(w, aliveReal, alivePred, longest);
    return longest;
  }

  /**
   * The ordinals in {@code sr} (real) and {@code sp} (predicted) hold blocks {@code [0, lo)} and not block
   * {@code hi}: finds each one's first missing block by bisection, splitting the sets at every probe (one probe
   * serves every ordinal in the stretch). Returns the largest prefix found.
   */
  private int settle(long[] hashes, long sr, long sp, int lo, int hi, int w) {
    int top = 0;
    int longest = 0;
    stackReal[top] = sr;
    stackPred[top] = sp;
    stackLo[top] = lo;
    stackHi[top] = hi;
    top++;
    while (top > 0) {
      top--;
      long r = stackReal[top];
      long p = stackPred[top];
      int l = stackLo[top];
      int h = stackHi[top];
      while (l < h) { // r and p hold [0, l) and not block h
        int mid = (l + h) >>> 1;
        long inR = r & table.holders(hashes[mid], w, this);
        long inP = p & probedPredicted;
        probes++;
        long outR = r & ~inR;
        long outP = p & ~inP;
        if ((inR | inP) == 0) {
          h = mid;
        } else {
          if ((outR | outP) != 0) {
            // a stack entry per halving: at most log2(jump) + 1 deep
            stackReal[top] = outR;
            stackPred[top] = outP;
            stackLo[top] = l;
            stackHi[top] = mid;
            top++;
          }
          r = inR;
          p = inP;
          l = mid + 1;
        }
      }
      dropped(r, w, realLen, l);
      dropped(p, w, predLen, l);
      longest = Math.max(longest, l);
    }
    return longest;
  }

  // Callbacks of BlockTable.walkWord (one word, w == lo == hi).

  private long[] cpuMasks = new long[128];
  private long[] diskMasks = new long[128];

  /** Per-block CPU-only holder masks of a walk (index = block), at least {@code n} long. */
  long[] cpuMasks(int n) {
    if (cpuMasks.length < n) {
      cpuMasks = new long[Math.max(n, cpuMasks.length * 2)];
    }
    return cpuMasks;
  }

  long[] diskMasks(int n) {
    if (diskMasks.length < n) {
      diskMasks = new long[Math.max(n, diskMasks.length * 2)];
    }
    return diskMasks;
  }

  /**
   * Adds the walk's per-block tier masks of blocks {@code [from, to)} to word {@code w}'s counters: a positional
   * popcount, eight blocks at a time summed with a carry-save tree and added to the bit planes once, instead of
   * one carry chain per block.
   */
  void countTiers(int w, int from, int to) {
    cpuTop = Math.max(cpuTop, addCounts(cpuMasks, from, to, cpu, w * PLANES));
    diskTop = Math.max(diskTop, addCounts(diskMasks, from, to, disk, w * PLANES));
    long cs = 0;
    long ds = 0;
    for (int i = from; i < to; i++) {
      cs |= cpuMasks[i];
      ds |= diskMasks[i];
    }
    cpuSeen[w] |= cs;
    diskSeen[w] |= ds;
  }

  /** Adds per-position bit counts of {@code masks[from, to)} to the planes at {@code base}; returns planes used. */
  private static int addCounts(long[] masks, int from, int to, long[] planes, int base) {
    int top = 0;
    for (int i = from; i < to; i += 8) {
      int end = Math.min(to, i + 8);
      long a0 = 0;
      long a1 = 0;
      long a2 = 0;
      long a3 = 0;
      for (int j = i; j < end; j++) { // a 4-bit counter per position: at most 8 masks, so it cannot overflow
        long m = masks[j];
        long c0 = a0 & m;
        a0 ^= m;
        long c1 = a1 & c0;
        a1 ^= c0;
        long c2 = a2 & c1;
        a2 ^= c1;
        a3 |= c2;
      }
      if ((a0 | a1 | a2 | a3) == 0) {
        continue;
      }
      // ripple-carry add of the 4-bit group sums into the bit-sliced counters
      long carry = 0;
      int k = 0;
      for (; k < PLANES && (k < 4 || carry != 0); k++) {
        long a = k == 0 ? a0 : k == 1 ? a1 : k == 2 ? a2 : k == 3 ? a3 : 0;
        long p = planes[base + k];
        long s = p ^ a;
        planes[base + k] = s ^ carry;
        carry = (p & a) | (carry & s);
      }
      top = Math.max(top, k);
    }
    return top;
  }

  /** The per-tier read arrays, for a locked re-read of one block. */
  long[][] scratch() {
    return new long[][] {g, c, d, p};
  }

  long realWord(int w) {
    return real[w];
  }

  long predWord(int w) {
    return pred[w];
  }

  /** Records that the ordinals in {@code bits} (word {@code w}) stopped matching at block {@code at}. */
  void dropped(long bits, int w, boolean isReal, int at) {
    dropped(bits, w, isReal ? realLen : predLen, at);
  }

  void endWord(int w, long r, long q, int consumed) {
    real[w] = r;
    pred[w] = q;
    position = consumed;
    done = true;
  }

  /** Writes the answer for the blocks consumed so far into {@code out}. */
  public void finish(PrefixMatches out) {
    out.reset(position);
    if (candidateCount == 0) {
      return;
    }
    for (int w = lo; w <= Math.min(hi, words - 1); w++) {
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
    for (int w = firstLo; w <= firstHi; w++) {
      extract(cpu, cpuSeen[w], w, cpuTop, cpuCount);
      extract(disk, diskSeen[w], w, diskTop, diskCount);
    }
    WorkerId[] ids = index.idsByOrdinal();
    // read after the ids: a registration is counted before its id is published, so if the ids name a worker
    // registered after this lookup started, the count shows it (when it does not, no ordinal changed hands)
    boolean reassigned = index.registrations() != registrationsAtStart;
    out.names(ids);
    out.ensureCapacity(candidateCount);
    int staleAt = -1;
    long stale = 0;
    for (int k = 0; k < candidateCount; k++) {
      int ord = candidates[k];
      WorkerId id = ord < ids.length ? ids[ord] : null;
      if (id == null) {
        continue; // removed meanwhile
      }
      if (reassigned && registeredSinceStart(ord)) {
        continue; // removed and its ordinal reused meanwhile: what was read is not the new worker's
      }
      int w = ord >>> 6;
      if (w != staleAt) {
        stale = index.staleWord(w);
        staleAt = w;
      }
      long bit = 1L << ord;
      int m = realLen[ord];
      int cc = (cpuSeen[w] & bit) == 0 ? 0 : cpuCount[ord];
      int dc = (diskSeen[w] & bit) == 0 ? 0 : diskCount[ord];
      out.add(ord, m, m - cc - dc, cc, dc, predLen[ord], (stale & bit) != 0);
    }
  }

  /**
   * Whether the worker now at {@code ord} was registered after this lookup started (its id was read first, so the
   * view read here is that worker's or a later one's). A worker registered meanwhile with a fresh ordinal is dropped
   * too: everything it holds was stored after the lookup started, which a lookup need not see.
   */
  private boolean registeredSinceStart(int ord) {
    WorkerView v = index.viewAt(ord);
    return v == null || v.registration() > registrationsAtStart;
  }

  /** Turns word {@code w}'s bit planes into per-ordinal counts for the ordinals in {@code seen}. */
  private static void extract(long[] planes, long seen, int w, int top, int[] counts) {
    if (seen == 0) {
      return;
    }
    long s = seen;
    while (s != 0) {
      counts[(w << 6) + Long.numberOfTrailingZeros(s)] = 0;
      s &= s - 1;
    }
    int base = w * PLANES;
    for (int k = 0; k < top; k++) {
      long bits = planes[base + k];
      while (bits != 0) {
        counts[(w << 6) + Long.numberOfTrailingZeros(bits)] += 1 << k;
        bits &= bits - 1;
      }
    }
  }
}
