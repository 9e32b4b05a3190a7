package dev.kvrouter.index.wire;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * One event batch in flat, reusable arrays: what the event thread applies, filled either straight from the
 * payload by {@link FastEventReader} (no allocation per event once the arrays have grown) or from decoded
 * records by {@link #load(EventBatch)}. Events are indexed {@code 0 .. size() - 1}; their block hashes and
 * tokens are ranges of the shared {@link #hashes()} and {@link #tokens()} arrays. Fields a record keeps as
 * {@code null} are absent here: test {@link #has} before reading an int field.
 *
 * <p>Not thread-safe: one per event thread, overwritten by every fill.
 */
public final class EventBuffer {

  /** Event kinds. */
  public static final byte STORED = 0;
  public static final byte REMOVED = 1;
  public static final byte CLEARED = 2;

  /** Presence flags of an event's nullable fields (see {@link #has}). */
  public static final int PARENT = 1;
  public static final int LORA_ID = 2;
  public static final int GROUP = 4;
  public static final int WINDOW = 8;
  /** The engine sent tokens in a format the decoder does not support ({@link BlockStored#tokenIds()} null). */
  public static final int TOKENS_UNSUPPORTED = 16;

  // Presence of the reference fields: begin() resets these bits instead of nulling eight arrays per event (a
  // BlockRemoved is one block, so per-event stores are per-block costs); a getter answers null without its bit.
  private static final int S_MEDIUM = 1 << 8;
  private static final int S_LORA_NAME = 1 << 9;
  private static final int S_SPEC_KIND = 1 << 10;
  private static final int S_LOCALITY = 1 << 11;
  private static final int S_OWNERSHIP = 1 << 12;
  private static final int S_SESSION = 1 << 13;
  private static final int S_SALT = 1 << 14;
  private static final int S_EXTRA = 1 << 15;

  private static final List<List<Object>> NO_EXTRA = List.of();
  private static final int FIRST_EVENTS = 64;
  private static final int FIRST_HASHES = 256;
  private static final int FIRST_TOKENS = 4096;
  /** Fills watched before the arrays may shrink ({@link #trim}). */
  private static final int TRIM_WINDOW = 64;

  private double ts;
  private boolean hasDp;
  private int dp;
  private int skipped;
  private int size;

  private byte[] kind = new byte[FIRST_EVENTS];
  private int[] flags = new int[FIRST_EVENTS];
  private int[] hashStart = new int[FIRST_EVENTS];
  private int[] hashCount = new int[FIRST_EVENTS];
  private int[] tokenStart = new int[FIRST_EVENTS];
  private int[] tokenCount = new int[FIRST_EVENTS];
  private long[] parent = new long[FIRST_EVENTS];
  private int[] blockSize = new int[FIRST_EVENTS];
  private int[] loraId = new int[FIRST_EVENTS];
  private int[] group = new int[FIRST_EVENTS];
  private int[] window = new int[FIRST_EVENTS];
  private String[] medium = new String[FIRST_EVENTS];
  private String[] loraName = new String[FIRST_EVENTS];
  private String[] specKind = new String[FIRST_EVENTS];
  private String[] locality = new String[FIRST_EVENTS];
  private String[] ownership = new String[FIRST_EVENTS];
  private String[] session = new String[FIRST_EVENTS];
  private String[] cacheSalt = new String[FIRST_EVENTS];
  /** Per event: null (absent), {@link #NO_EXTRA} marker with {@link #extraNils} entries all nil, or the list. */
  private Object[] extra = new Object[FIRST_EVENTS];
  private int[] extraNils = new int[FIRST_EVENTS];

  private long[] hashes = new long[FIRST_HASHES];
  private int hashTop;
  private int[] tokens = new int[FIRST_TOKENS];
  private int tokenTop;
  /** Fills since the last {@link #trim}, and the most each array held in one of them. */
  private int fills;
  private int peakEvents;
  private int peakHashes;
  private int peakTokens;

  // ------------------------------------------------------------------------------------------------------
  // Reading

  public double ts() {
    return ts;
  }

  /** The batch's data-parallel rank, or {@code null}. */
  public Integer dataParallelRank() {
    return hasDp ? dp : null;
  }

  /** Events skipped because their tag is unknown. */
  public int skippedEvents() {
    return skipped;
  }

  public int size() {
    return size;
  }

  public byte kind(int e) {
    return kind[e];
  }

  /** Whether event {@code e} has the nullable field {@code flag} ({@link #PARENT}, {@link #GROUP}, ...). */
  public boolean has(int e, int flag) {
    return (flags[e] & flag) != 0;
  }

  /** All block hashes of the batch; event {@code e}'s are {@code [hashStart(e), hashStart(e) + hashCount(e))}. */
  public long[] hashes() {
    return hashes;
  }

  public int hashStart(int e) {
    return hashStart[e];
  }

  public int hashCount(int e) {
    return hashCount[e];
  }

  /** All token ids of the batch; event {@code e}'s are {@code [tokenStart(e), tokenStart(e) + tokenCount(e))}. */
  public int[] tokens() {
    return tokens;
  }

  public int tokenStart(int e) {
    return tokenStart[e];
  }

  public int tokenCount(int e) {
    return tokenCount[e];
  }

  public long parent(int e) {
    return parent[e];
  }

  public int blockSize(int e) {
    return blockSize[e];
  }

  public int loraId(int e) {
    return loraId[e];
  }

  public int group(int e) {
    return group[e];
  }

  public int window(int e) {
    return window[e];
  }

  public String medium(int e) {
    return (flags[e] & S_MEDIUM) != 0 ? medium[e] : null;
  }

  public String loraName(int e) {
    return (flags[e] & S_LORA_NAME) != 0 ? loraName[e] : null;
  }

  public String specKind(int e) {
    return (flags[e] & S_SPEC_KIND) != 0 ? specKind[e] : null;
  }

  public String locality(int e) {
    return (flags[e] & S_LOCALITY) != 0 ? locality[e] : null;
  }

  public String ownership(int e) {
    return (flags[e] & S_OWNERSHIP) != 0 ? ownership[e] : null;
  }

  public String sessionId(int e) {
    return (flags[e] & S_SESSION) != 0 ? session[e] : null;
  }

  public String cacheSalt(int e) {
    return (flags[e] & S_SALT) != 0 ? cacheSalt[e] : null;
  }

  /**
   * Event {@code e}'s per-block extra keys as {@link BlockStored#extraKeys()} has them, or {@code null} when
   * absent or when every entry is nil (no block has extra keys: nothing to fold into the hashes).
   */
  @SuppressWarnings("unchecked")
  public List<List<Object>> extraKeys(int e) {
    Object x = (flags[e] & S_EXTRA) != 0 ? extra[e] : null;
    return x == null || x == NO_EXTRA ? null : (List<List<Object>>) x;
  }

  /** Bytes held by the arrays (per event slot 85, per hash 8, per token 4), for the per-worker gauge. */
  public long footprintBytes() {
    return 21 * 16L + 85L * kind.length + 8L * hashes.length + 4L * tokens.length;
  }

  // ------------------------------------------------------------------------------------------------------
  // Filling (FastEventReader and load)

  void clear() {
    // the fill just ended counts towards the window that decides whether the arrays shrink (see trim)
    peakEvents = Math.max(peakEvents, size);
    peakHashes = Math.max(peakHashes, hashTop);
    peakTokens = Math.max(peakTokens, tokenTop);
    if (++fills == TRIM_WINDOW) {
      trim();
    }
    size = 0;
    hashTop = 0;
    tokenTop = 0;
    skipped = 0;
    hasDp = false;
    ts = Double.NaN;
  }

  void batch(double ts, boolean hasDp, int dp, int skipped) {
    this.ts = ts;
    this.hasDp = hasDp;
    this.dp = dp;
    this.skipped = skipped;
  }

  /** Starts event {@code size()} of {@code k}; its fields are reset. Returns its index. */
  int begin(byte k) {
    int e = size;
    if (e == kind.length) {
      grow(e * 2);
    }
    kind[e] = k;
    flags[e] = 0;
    hashStart[e] = hashTop;
    hashCount[e] = 0;
    tokenStart[e] = tokenTop;
    tokenCount[e] = 0;
    parent[e] = 0;
    blockSize[e] = 0;
    size = e + 1;
    return e;
  }

  /** Changes event {@code e}'s kind (a map event's type may come after its fields). */
  void retype(int e, byte k) {
    kind[e] = k;
  }

  /** Drops the last event (a map event whose type turned out unknown). */
  void dropLast() {
    size--;
    hashTop = hashStart[size];
    tokenTop = tokenStart[size];
  }

  void flag(int e, int flag) {
    flags[e] |= flag;
  }

  void unflag(int e, int flag) {
    flags[e] &= ~flag;
  }

  /** Reserves room for {@code n} more hashes; returns the array to write at {@link #hashTop()}. */
  long[] hashRoom(int n) {
    if (hashTop + n > hashes.length) {
      hashes = Arrays.copyOf(hashes, Math.max(hashTop + n, hashes.length * 2));
    }
    return hashes;
  }

  int hashTop() {
    return hashTop;
  }

  /** Sets event {@code e}'s hashes to the {@code n} just written at its start (replacing earlier ones). */
  void hashesDone(int e, int start, int n) {
    hashStart[e] = start;
    hashCount[e] = n;
    hashTop = start + n;
  }

  int[] tokenRoom(int n) {
    if (tokenTop + n > tokens.length) {
      tokens = Arrays.copyOf(tokens, Math.max(tokenTop + n, tokens.length * 2));
    }
    return tokens;
  }

  int tokenTop() {
    return tokenTop;
  }

  void tokensDone(int e, int start, int n) {
    tokenStart[e] = start;
    tokenCount[e] = n;
    tokenTop = start + n;
  }

  void parent(int e, long v) {
    parent[e] = v;
  }

  void blockSize(int e, int v) {
    blockSize[e] = v;
  }

  void loraId(int e, int v) {
    loraId[e] = v;
  }

  void group(int e, int v) {
    group[e] = v;
  }

  void window(int e, int v) {
    window[e] = v;
  }

  void medium(int e, String v) {
    medium[e] = v;
    flags[e] |= S_MEDIUM;
  }

  void loraName(int e, String v) {
    loraName[e] = v;
    flags[e] |= S_LORA_NAME;
  }

  void specKind(int e, String v) {
    specKind[e] = v;
    flags[e] |= S_SPEC_KIND;
  }

  void locality(int e, String v) {
    locality[e] = v;
    flags[e] |= S_LOCALITY;
  }

  void ownership(int e, String v) {
    ownership[e] = v;
    flags[e] |= S_OWNERSHIP;
  }

  void session(int e, String v) {
    session[e] = v;
    flags[e] |= S_SESSION;
  }

  void cacheSalt(int e, String v) {
    cacheSalt[e] = v;
    flags[e] |= S_SALT;
  }

  /** Extra keys whose entries are all nil ({@code n} of them): no list is built. */
  void extraNils(int e, int n) {
    extra[e] = NO_EXTRA;
    extraNils[e] = n;
    flags[e] |= S_EXTRA;
  }

  void extra(int e, List<List<Object>> v) {
    extra[e] = v;
    flags[e] |= S_EXTRA;
  }

  /**
   * Gives back what one large batch (a long prompt's tokens, a burst of stores) made the arrays grow to: an array
   * that a whole window of fills used under a quarter of goes back to twice that use (at least its first size).
   * Once per {@value #TRIM_WINDOW} fills, so a worker whose large batches come often keeps its arrays.
   */
  private void trim() {
    int events = Math.max(FIRST_EVENTS, 2 * peakEvents);
    if (kind.length > 2 * events) {
      grow(events);
    }
    int h = Math.max(FIRST_HASHES, 2 * peakHashes);
    if (hashes.length > 2 * h) {
      hashes = new long[h];
    }
    int t = Math.max(FIRST_TOKENS, 2 * peakTokens);
    if (tokens.length > 2 * t) {
      tokens = new int[t];
    }
    fills = 0;
    peakEvents = 0;
    peakHashes = 0;
    peakTokens = 0;
  }

  private void grow(int n) {
    kind = Arrays.copyOf(kind, n);
    flags = Arrays.copyOf(flags, n);
    hashStart = Arrays.copyOf(hashStart, n);
    hashCount = Arrays.copyOf(hashCount, n);
    tokenStart = Arrays.copyOf(tokenStart, n);
    tokenCount = Arrays.copyOf(tokenCount, n);
    parent = Arrays.copyOf(parent, n);
    blockSize = Arrays.copyOf(blockSize, n);
    loraId = Arrays.copyOf(loraId, n);
    group = Arrays.copyOf(group, n);
    window = Arrays.copyOf(window, n);
    medium = Arrays.copyOf(medium, n);
    loraName = Arrays.copyOf(loraName, n);
    specKind = Arrays.copyOf(specKind, n);
    locality = Arrays.copyOf(locality, n);
    ownership = Arrays.copyOf(ownership, n);
    session = Arrays.copyOf(session, n);
    cacheSalt = Arrays.copyOf(cacheSalt, n);
    extra = Arrays.copyOf(extra, n);
    extraNils = Arrays.copyOf(extraNils, n);
  }

  // ------------------------------------------------------------------------------------------------------
  // Records

  /** Fills this buffer from decoded records (the general decoder's output). */
  public EventBuffer load(EventBatch batch) {
    clear();
    Integer rank = batch.dataParallelRank();
    batch(batch.ts(), rank != null, rank == null ? 0 : rank, batch.skippedEvents());
    for (KvEvent ev : batch.events()) {
      if (ev instanceof BlockStored s) {
        int e = begin(STORED);
        putHashes(e, s.blockHashes());
        if (s.parentBlockHash() != null) {
          flag(e, PARENT);
          parent[e] = s.parentBlockHash();
        }
        if (s.tokenIds() == null) {
          flag(e, TOKENS_UNSUPPORTED);
        } else {
          int[] t = tokenRoom(s.tokenIds().length);
          System.arraycopy(s.tokenIds(), 0, t, tokenTop, s.tokenIds().length);
          tokensDone(e, tokenTop, s.tokenIds().length);
        }
        blockSize[e] = s.blockSize();
        if (s.loraId() != null) {
          flag(e, LORA_ID);
          loraId[e] = s.loraId();
        }
        medium(e, s.medium());
        loraName(e, s.loraName());
        extra(e, s.extraKeys());
        if (s.groupIdx() != null) {
          flag(e, GROUP);
          group[e] = s.groupIdx();
        }
        specKind(e, s.kvCacheSpecKind());
        if (s.kvCacheSpecSlidingWindow() != null) {
          flag(e, WINDOW);
          window[e] = s.kvCacheSpecSlidingWindow();
        }
        locality(e, s.locality());
        ownership(e, s.ownership());
        session(e, s.sessionId());
        cacheSalt(e, s.cacheSalt());
      } else if (ev instanceof BlockRemoved r) {
        int e = begin(REMOVED);
        putHashes(e, r.blockHashes());
        medium(e, r.medium());
        if (r.groupIdx() != null) {
          flag(e, GROUP);
          group[e] = r.groupIdx();
        }
        locality(e, r.locality());
        ownership(e, r.ownership());
      } else {
        begin(CLEARED);
      }
    }
    return this;
  }

  private void putHashes(int e, long[] h) {
    long[] room = hashRoom(h.length);
    System.arraycopy(h, 0, room, hashTop, h.length);
    hashesDone(e, hashTop, h.length);
  }

  /** The batch as records, as {@link EventDecoder} would return it (tests and diagnostics; allocates). */
  public EventBatch toBatch() {
    List<KvEvent> events = new ArrayList<>(size);
    for (int e = 0; e < size; e++) {
      long[] h = Arrays.copyOfRange(hashes, hashStart[e], hashStart[e] + hashCount[e]);
      switch (kind[e]) {
        case STORED -> {
          int[] t = has(e, TOKENS_UNSUPPORTED) ? null
              : Arrays.copyOfRange(tokens, tokenStart[e], tokenStart[e] + tokenCount[e]);
          List<List<Object>> x;
          if ((flags[e] & S_EXTRA) != 0 && extra[e] == NO_EXTRA) {
            x = new ArrayList<>(extraNils[e]);
            for (int i = 0; i < extraNils[e]; i++) {
              x.add(null);
            }
          } else {
            x = extraKeys(e);
          }
          events.add(new BlockStored(h, has(e, PARENT) ? parent[e] : null, t, blockSize[e],
              has(e, LORA_ID) ? loraId[e] : null, medium(e), loraName(e), x, has(e, GROUP) ? group[e] : null,
              specKind(e), has(e, WINDOW) ? window[e] : null, locality(e), ownership(e), sessionId(e),
              cacheSalt(e)));
        }
        case REMOVED -> events.add(new BlockRemoved(h, medium(e), has(e, GROUP) ? group[e] : null, locality(e),
            ownership(e)));
        default -> events.add(AllBlocksCleared.INSTANCE);
      }
    }
    return new EventBatch(ts, events, hasDp ? dp : null, skipped);
  }
}
