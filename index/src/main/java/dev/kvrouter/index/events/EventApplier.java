package dev.kvrouter.index.events;

import dev.kvrouter.index.Tier;
import dev.kvrouter.index.WorkerView;
import dev.kvrouter.index.block.BlockHasher;
import dev.kvrouter.index.block.CacheNamespace;
import dev.kvrouter.index.media.MediaIdentities;
import dev.kvrouter.index.wire.EventBatch;
import dev.kvrouter.index.wire.EventBuffer;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Applies one worker's decoded events to its {@link WorkerView}, translating engine hashes into the router's
 * own block identity.
 *
 * <p>For a {@code BlockStored}, our hashes are computed from the event's {@code token_ids} with
 * {@link BlockHasher}: the chain starts at the namespace root when {@code parent_block_hash} is null, else at
 * our hash of the parent, found through the worker's engine-hash handles. The namespace is (the source's
 * model, the event's {@code lora_name}, the cache salt found in the first block's extra keys or SGLang's
 * {@code cache_salt}). Extra keys are read by these rules, in order, per item of a block's tuple:
 * <ol>
 *   <li>a string equal to {@code lora_name} is skipped (the adapter is already in the namespace);
 *   <li>a string starting with {@code kvr1:} is the cache salt the router wrote (only meaningful on a chain's
 *       first block; elsewhere ignored);
 *   <li>on a chain's first block, a plain string that is the tuple's last item is a raw cache salt (vLLM appends
 *       {@code cache_salt} last, first block only);
 *   <li>{@code [identifier, offset]} is a multimodal item; any other string is a multimodal identifier without
 *       offset (older vLLM); {@code bytes} (prompt-embeds digest) becomes identifier {@code embeds:<hex>}, which
 *       no request can produce, so such blocks never match;
 *   <li>integers (older LoRA int ids) and anything else are ignored.
 * </ol>
 * Multimodal items become the block's {@code extra} through {@link BlockHasher#multimodalExtra}, the helper
 * the request path uses with the content part's {@code uuid}.
 *
 * <p>A block with multimodal items is also reported, with our hash of its parent, to the index's
 * {@link MediaIdentities}, which learns the engine's identifier of an item the router sent without a uuid; blocks
 * without media keys never reach it.
 *
 * <p>A store whose parent is unknown cannot be chained (we do not have the parent's identity), so it is
 * dropped and counted; the caller decides whether that makes the view stale. Stores without tokens (older
 * offload connectors) are mapped through existing handles when the engine hash is already known. Events
 * the router cannot use are skipped and counted: REMOTE locality, media outside GPU/CPU/disk, KV groups that
 * are not full attention, and stores whose block size differs from the source's.
 *
 * <p>Not thread-safe: owned by the worker's event thread.
 */
public final class EventApplier {

  private static final String SALT_PREFIX = "kvr1:";
  private static final HexFormat HEX = HexFormat.of();
  /** In-batch twin stores that mark a view not prefix-closed ({@link #twinInBatch}). */
  static final int TWIN_EVIDENCE = 8;

  private final WorkerView view;
  private final String model;
  private final int blockSize;
  private final WorkerEventHealth health;
  private final long plainRoot;
  /** Whether each KV group learned from stores is full attention (its kind, not kept: an engine's string). */
  private final Map<Integer, Boolean> groupKinds = new HashMap<>();
  /**
   * KV groups remembered at most. An engine has a handful (one per attention kind and window of a hybrid model); a
   * stream naming more is malformed, and what it names past the cap is skipped, stores and removes alike.
   */
  static final int MAX_GROUPS = 32;
  private String[] ids = new String[8];
  private int[] offsets = new int[8];
  /** Items {@link #extraFor} left in {@link #ids} and {@link #offsets}. */
  private int itemCount;
  /** Null when learning is off. */
  private final MediaIdentities media;
  /** Later items of a request whose first item the store being applied named, from its block {@link #chainBase}. */
  private MediaIdentities.Chain chain;
  private int chainBase;
  private String foundSalt;
  private long twins;
  private final byte[] hashScratch;
  /** The last medium seen and its tier ({@link #tier}); null means GPU. */
  private String lastMedium;
  private Tier lastTier = Tier.GPU;
  /** Our hashes of the store being applied. */
  private long[] ours = new long[16];
  /** The batch's removed engine hashes, then our hashes for them ({@link #touchRemoves}). */
  private long[] rm = new long[64];
  /** Sink of the prefetching loads ({@link #touchRemoves}); never read for its value. */
  private long touched;
  /** For batches handed over as records ({@link #apply(EventBatch)}). */
  private EventBuffer records;
  /** Whether a store of another block size was logged ({@link #otherBlockSize}): once per follow. */
  private boolean otherBlockSizeLogged;

  public EventApplier(WorkerView view, String model, int blockSize, WorkerEventHealth health) {
    this.view = Objects.requireNonNull(view, "view");
    this.model = Objects.requireNonNull(model, "model");
    this.blockSize = blockSize;
    this.health = Objects.requireNonNull(health, "health");
    this.plainRoot = CacheNamespace.of(model).rootSeed();
    this.hashScratch = new byte[BlockHasher.scratchSize(blockSize)];
    this.media = view.media().enabled() ? view.media() : null;
  }

  /** The view this applier writes. */
  public WorkerView view() {
    return view;
  }

  /**
   * Applies a batch given as records (tests, in-process streams); the event thread applies
   * {@link EventBuffer}s.
   *
   * @return the number of stores dropped because their parent is unknown
   */
  public int apply(EventBatch batch) {
    if (records == null) {
      records = new EventBuffer();
    }
    return apply(records.load(batch));
  }

  /**
   * Applies a batch.
   *
   * @return the number of stores dropped because their parent is unknown
   */
  public int apply(EventBuffer batch) {
    health.add(EventCounter.SKIPPED_UNKNOWN_TYPE, batch.skippedEvents());
    touchRemoves(batch);
    int unknownParents = 0;
    for (int e = 0, n = batch.size(); e < n; e++) {
      switch (batch.kind(e)) {
        case EventBuffer.STORED -> unknownParents += stored(batch, e) ? 0 : 1;
        case EventBuffer.REMOVED -> removed(batch, e);
        default -> {
          view.reset();
          health.inc(EventCounter.CLEARED_EVENTS);
        }
      }
    }
    return unknownParents;
  }

  /**
   * Loads the table slots the batch's removes will write before any write takes a lock, so their cache misses
   * overlap instead of being taken one after another under each write's lock.
   */
  private void touchRemoves(EventBuffer batch) {
    long[] hashes = batch.hashes();
    int m = 0;
    for (int e = 0, n = batch.size(); e < n; e++) {
      if (batch.kind(e) == EventBuffer.REMOVED) {
        int c = batch.hashCount(e);
        if (rm.length < m + c) {
          rm = Arrays.copyOf(rm, Math.max(m + c, rm.length * 2));
        }
        System.arraycopy(hashes, batch.hashStart(e), rm, m, c);
        m += c;
      }
    }
    if (m < 2) {
      return; // nothing to overlap
    }
    long[] r = rm;
    long sink = 0;
    // three tight loops, none branching on what it loads, so each loop's misses are in flight together
    for (int i = 0; i < m; i++) {
      sink += view.touchHandle(r[i]);
    }
    for (int i = 0; i < m; i++) {
      r[i] = view.handle(r[i]); // our hash (0 when unknown: a harmless touch)
    }
    for (int i = 0; i < m; i++) {
      sink += view.touchBlock(r[i]);
    }
    touched += sink;
  }

  /**
   * A store of a block size other than the one configured for the worker: skipped and counted, and logged once, as
   * it is a configuration mismatch that skips every store of the worker, so that its cache is never credited, and
   * nothing else would show it.
   */
  private void otherBlockSize(int engineBlockSize) {
    health.inc(EventCounter.SKIPPED_BLOCK_SIZE);
    if (!otherBlockSizeLogged) {
      otherBlockSizeLogged = true;
      org.slf4j.LoggerFactory.getLogger(EventApplier.class).warn(
          "{}: its KV events have block_size {} but the router expects {} (its workers.yaml block_size, else its"
              + " model's block_size in kvrouter.yaml): every such event is skipped (kvrouter_events_skipped_total"
              + "{reason=\"block_size\"}) and its cache is never credited; set its block_size to the engine's"
              + " (vLLM --block-size)", health.id(), engineBlockSize, blockSize);
    }
  }

  /** Returns false only for an unknown parent. */
  private boolean stored(EventBuffer s, int e) {
    if ("REMOTE".equalsIgnoreCase(s.locality(e))) {
      health.inc(EventCounter.SKIPPED_LOCALITY);
      return true;
    }
    Integer group = s.has(e, EventBuffer.GROUP) ? s.group(e) : null;
    if (group != null && !groupKinds.containsKey(group) && groupKinds.size() >= MAX_GROUPS) {
      health.inc(EventCounter.SKIPPED_GROUP_LIMIT);
      return true;
    }
    if (!mainAttentionStore(group, s.specKind(e))) {
      health.inc(EventCounter.SKIPPED_GROUP);
      return true;
    }
    Tier tier = tier(s.medium(e));
    if (tier == null) {
      health.inc(EventCounter.SKIPPED_MEDIUM);
      return true;
    }
    long[] engine = s.hashes();
    int first = s.hashStart(e);
    int n = s.hashCount(e);
    if (s.has(e, EventBuffer.TOKENS_UNSUPPORTED)) {
      health.inc(EventCounter.SKIPPED_TOKENS);
      return true;
    }
    int[] tokens = s.tokens();
    int tokenStart = s.tokenStart(e);
    int tokenCount = s.tokenCount(e);
    if (tokenCount == 0) {
      return tokenless(engine, first, n, tier);
    }
    if (s.blockSize(e) != blockSize) {
      otherBlockSize(s.blockSize(e));
      return true;
    }
    if (tokenCount != n * blockSize) {
      health.inc(EventCounter.SKIPPED_TOKENS);
      return true;
    }
    boolean root = !s.has(e, EventBuffer.PARENT);
    long parent;
    List<List<Object>> extra = s.extraKeys(e);
    String lora = s.loraName(e);
    if (root) {
      foundSalt = null;
      if (n > 0 && extra != null && !extra.isEmpty()) {
        extraFor(extra.get(0), lora, true); // finds the salt
      }
      String salt = foundSalt != null ? foundSalt : s.cacheSalt(e);
      parent = lora == null && salt == null ? plainRoot : new CacheNamespace(model, lora, salt).rootSeed();
    } else if (view.hasHandle(s.parent(e))) {
      parent = view.handle(s.parent(e));
    } else {
      health.inc(EventCounter.UNKNOWN_PARENT);
      return false;
    }
    if (ours.length < n) {
      ours = new long[Math.max(n, ours.length * 2)];
    }
    long[] o = ours;
    long parentOfFirst = parent;
    chain = null;
    for (int i = 0; i < n; i++) {
      long x = extra == null || i >= extra.size() ? 0L : extraFor(extra.get(i), lora, root && i == 0);
      if (x != 0 && media != null) {
        mediaBlock(i, parent);
      }
      parent = BlockHasher.blockHash(parent, tokens, tokenStart + i * blockSize, blockSize, x, hashScratch);
      o[i] = parent;
    }
    long sink = 0;
    for (int i = 0; i < n; i++) {
      sink += view.touchStore(engine[first + i], o[i]); // the event's misses overlap before its first locked write
    }
    touched += sink;
    long dupsBefore = view.duplicateStores();
    for (int i = 0; i < n; i++) {
      if (root && i == 0) {
        view.store(engine[first], o[0], tier);
      } else {
        view.store(engine[first + i], o[i], tier, i == 0 ? parentOfFirst : o[i - 1]);
      }
    }
    if (view.duplicateStores() != dupsBefore && n > 0) {
      twinInBatch(s, e);
    }
    health.inc(EventCounter.STORED_EVENTS);
    health.add(EventCounter.STORED_BLOCKS, n);
    return true;
  }

  /**
   * Block {@code i} of the store being applied has media keys ({@link #ids}, {@link #offsets}) and our parent hash
   * {@code parent}: report it to the learning. Kept out of {@link #stored}'s loop so text blocks pay one test.
   */
  private void mediaBlock(int i, long parent) {
    MediaIdentities.Chain c = media.observe(view.id(), parent, ids, offsets, itemCount);
    if (c != null) {
      chain = c;
      chainBase = i;
    }
    if (chain != null) {
      chain.observe(i - chainBase, ids, offsets, itemCount);
    }
  }

  /** Offload stores without tokens: map through handles the GPU stores created. */
  private boolean tokenless(long[] engine, int first, int n, Tier tier) {
    int applied = 0;
    for (int i = first; i < first + n; i++) {
      long e = engine[i];
      if (view.hasHandle(e)) {
        view.store(e, view.handle(e), tier);
        applied++;
      } else {
        health.inc(EventCounter.SKIPPED_UNKNOWN_BLOCK);
      }
    }
    if (applied > 0) {
      health.inc(EventCounter.STORED_EVENTS);
      health.add(EventCounter.STORED_BLOCKS, applied);
    }
    return true;
  }

  private void removed(EventBuffer r, int e) {
    if ("REMOTE".equalsIgnoreCase(r.locality(e))) {
      health.inc(EventCounter.SKIPPED_LOCALITY);
      return;
    }
    Integer group = r.has(e, EventBuffer.GROUP) ? r.group(e) : null;
    if (group != null && group != 0 && !groupKinds.containsKey(group) && groupKinds.size() >= MAX_GROUPS) {
      health.inc(EventCounter.SKIPPED_GROUP_LIMIT);
      return;
    }
    if (!mainAttentionGroup(group)) {
      health.inc(EventCounter.SKIPPED_GROUP);
      return;
    }
    Tier tier = tier(r.medium(e));
    if (tier == null) {
      health.inc(EventCounter.SKIPPED_MEDIUM);
      return;
    }
    int removed = 0;
    long[] hashes = r.hashes();
    int count = r.hashCount(e);
    if (count > 1) {
      view.removingTogether(hashes, r.hashStart(e), count); // one eviction: their order is not the engine's
    }
    for (int i = r.hashStart(e), end = i + count; i < end; i++) {
      if (view.remove(hashes[i], tier)) {
        removed++;
      } else {
        health.inc(EventCounter.UNKNOWN_REMOVES);
      }
    }
    if (count > 1) {
      view.removedTogether();
    }
    health.inc(EventCounter.REMOVED_EVENTS);
    health.add(EventCounter.REMOVED_BLOCKS, removed);
  }

  /**
   * {@link Tier#fromMedium}, remembering the last answer by string identity: the fast reader hands out one
   * instance per distinct medium, so a stream's repeated {@code "GPU"} costs one comparison, not a case-folding.
   */
  private Tier tier(String medium) {
    if (medium == lastMedium) {
      return lastTier;
    }
    Tier t = Tier.fromMedium(medium);
    lastMedium = medium;
    lastTier = t;
    return t;
  }

  /**
   * A store repeated blocks this worker already held. If an earlier store of the same batch begins with the same
   * block, count a twin: a hybrid model (full attention plus sliding-window or Mamba groups) on a vLLM that sends
   * no group information stores every block once per KV group in the same step, and its sliding-window copies
   * are freed from the front, so the blocks this worker appears to hold are not prefix-closed. Once twins are at
   * least {@value #TWIN_EVIDENCE} and a quarter of all stores (a hybrid model twins every store; a full-attention
   * engine only when identical requests fill the same block in the same step), the view is marked.
   */
  private void twinInBatch(EventBuffer s, int e) {
    if (view.notPrefixClosed() != null) {
      return;
    }
    long[] hashes = s.hashes();
    long h = hashes[s.hashStart(e)];
    for (int k = 0; k < e; k++) {
      if (s.kind(k) == EventBuffer.STORED && s.hashCount(k) > 0 && hashes[s.hashStart(k)] == h) {
        twins++;
        long stores = health.count(EventCounter.STORED_EVENTS) + 1;
        if (twins >= TWIN_EVIDENCE && twins * 4 >= stores) {
          view.markNotPrefixClosed(twins + " of " + stores + " stores repeat a store of the same batch (a hybrid"
              + " model's KV groups without group_idx): its sliding-window blocks leave parents first");
        }
        return;
      }
    }
  }

  /** Stores carry the group's kind; learn it so removes (which carry only the group index) can be filtered. */
  int knownGroups() {
    return groupKinds.size();
  }

  private boolean mainAttentionStore(Integer group, String kind) {
    if (kind == null && group != null && group != 0 && view.notPrefixClosed() == null) {
      // several KV groups and no kinds: group 0 is taken for full attention, but nothing says it is
      view.markNotPrefixClosed("stores of KV group " + group + " without kv_cache_spec_kind: which group is full"
          + " attention is unknown");
    }
    if (kind != null) {
      boolean main = mainAttention(kind);
      if (group != null) {
        groupKinds.put(group, main);
      }
      return main;
    }
    return mainAttentionGroup(group);
  }

  private boolean mainAttentionGroup(Integer group) {
    if (group == null) {
      return true;
    }
    Boolean main = groupKinds.get(group);
    return main == null ? group == 0 : main;
  }

  private static boolean mainAttention(String kind) {
    return switch (kind) {
      case "full_attention", "mla_attention", "sink_full_attention" -> true;
      default -> false;
    };
  }

  /** The block's multimodal extra value by the rules in the class comment; sets {@code foundSalt} on a root. */
  private long extraFor(List<Object> items, String lora, boolean rootBlock) {
    itemCount = 0;
    if (items == null || items.isEmpty()) {
      return 0L;
    }
    int n = 0;
    int last = items.size() - 1;
    for (int k = 0; k <= last; k++) {
      Object it = items.get(k);
      String id = null;
      int off = BlockHasher.NO_OFFSET;
      if (it instanceof String s) {
        if (s.equals(lora)) {
          continue;
        }
        if (s.startsWith(SALT_PREFIX) || (rootBlock && k == last)) {
          if (rootBlock) {
            foundSalt = s;
          }
          continue;
        }
        id = s;
      } else if (it instanceof List<?> pair && !pair.isEmpty() && pair.get(0) instanceof String s) {
        id = s;
        if (pair.size() > 1 && pair.get(1) instanceof Long o) {
          off = (int) Math.max(Integer.MIN_VALUE + 1, Math.min(Integer.MAX_VALUE, o));
        }
      } else if (it instanceof byte[] b) {
        id = "embeds:" + HEX.formatHex(b);
      }
      if (id != null) {
        if (n == ids.length) {
          ids = Arrays.copyOf(ids, n * 2);
          offsets = Arrays.copyOf(offsets, n * 2);
        }
        ids[n] = id;
        offsets[n] = off;
        n++;
      }
    }
    itemCount = n;
    return BlockHasher.multimodalExtra(ids, offsets, 0, n);
  }
}
