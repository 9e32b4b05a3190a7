package dev.kvrouter.index;

import dev.kvrouter.index.media.MediaIdentities;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Objects;

/**
 * One worker's (and DP rank's) part of the index: which of our block hashes it holds in which tier, and
 * the engine-hash handles that name them in its events.
 *
 * <p>Concurrency: single writer. All mutating methods must be called by one thread at a time (the worker's
 * event thread; the subscriber guarantees it). The handle map and the duplicate counts are confined to that
 * thread; the residency bits go to the shared {@link BlockTable}, which lookups read concurrently. The stale
 * flag and the counters are readable from any thread.
 *
 * <p>Reference counting: vLLM does not de-duplicate identical blocks, so one worker can store the same block
 * twice and remove it twice. The table keeps one bit per (worker, tier, block); the second and later stores
 * are counted aside ({@code dups}) and a remove only clears the bit when no duplicate remains.
 *
 * <p>Aliases: the engine's hash covers what ours may not (an older vLLM's integer LoRA id in the extra keys, a hash
 * seed changed by a restart no event announced), so two engine hashes can name one of our blocks on one worker. A
 * handle must go when its own copies do, not when the block's do: the engine never removes it again, and a handle
 * left behind takes a share entry and, when the sweep picks it, the block another handle still names. So a handle
 * inserted for a block this worker already holds is an alias whose copies are counted per tier ({@code aliasOf},
 * {@code aliasCopies}); the block's other handle, its first, holds the rest. Only aliased blocks pay for this.
 *
 * <p>Prefix closure ({@link IndexConfig#prefixJump}): the lookup's jump search skips blocks of workers whose view
 * is prefix-closed (holding block k implies holding its parent). What may break that is tracked here, in three
 * kinds: {@link #stale()} (events lost right now), {@code holes} (this view's own doing: the router's share
 * eviction, handle conflicts, CPU/disk blocks, lost events since the last clear; until {@link #clear}) and
 * {@link #notPrefixClosed()} (evidence that the engine itself removes a parent before its child, or was
 * configured so; kept until the worker leaves the index). A worker with any of them is read block by block.
 * The engine evidence comes from the event applier (hybrid-model signatures) and from a sampled check here: for
 * one GPU block in {@value #LINK_SAMPLE} (by our hash) the view remembers its parent, and when that block leaves
 * the GPU tier while its parent is already gone, the engine removed a parent before its child.
 */
public final class WorkerView {

  private static final long[] DUP_SALT = {0, 0x243F6A8885A308D3L, 0x13198A2E03707344L, 0, 0xA4093822299F31D0L};
  /** One GPU block in this many (by our hash, which is uniform) has its parent link kept for the closure check. */
  static final int LINK_SAMPLE = 64;
  private static final long LINK_MASK = LINK_SAMPLE - 1;

  private final KvIndex index;
  private final BlockTable table;
  private final WorkerId id;
  private final int ordinal;
  /** This view's number among the index's registrations ({@link KvIndex#registrations()}). */
  private final long registration;
  private final LongLongMap handles = new LongLongMap();
  private final LongIntMap dups = new LongIntMap();
  /** Alias handles (see the class notes) to the block they name; writer thread only. */
  private final LongLongMap aliasOf = new LongLongMap();
  /** Per aliased block (our hash): its live alias handles. */
  private final LongIntMap aliasCount = new LongIntMap();
  /** Per (alias handle, tier): its copies ({@link #dupKey}). */
  private final LongIntMap aliasCopies = new LongIntMap();
  /** Per (aliased block, tier): its alias handles' copies summed; the first handle holds the rest. */
  private final LongIntMap aliasSums = new LongIntMap();
  private int sweep;
  private volatile boolean stale;
  /**
   * The view may have holes (a block held without its parent) or holds CPU/disk blocks: set by this worker's own
   * evictions, handle conflicts and non-GPU stores, kept until {@link #clear}. With {@link #stale} it decides
   * whether a lookup's jump search may skip this worker's blocks ({@link KvIndex#openWord}).
   */
  private volatile boolean holes;
  /** Events were lost since the last {@link #clear}: removes may be missing, leaving blocks without parents. */
  private volatile boolean lossSinceClear;
  /**
   * Blocks are being removed in an order that does not keep the view prefix-closed: {@link #clear} goes in
   * handle-map order, and one event's blocks ({@link #removingTogether}) may be listed head first (SGLang). Open
   * meanwhile, so a lookup starting during the removal walks this worker instead of crediting, by closure, blocks
   * it skipped that are already gone. A lookup that checked before it was set sees, at the blocks it does read,
   * what was left of the closed state from before the removal began, so its answer is that state's.
   */
  private volatile boolean reshaping;
  /** Why the engine's views are not prefix-closed (sticky until the worker leaves the index), or null. */
  private volatile String notClosed;
  /** Sampled GPU blocks (our hash) to their parent's hash, for the closure check; writer thread only. */
  private final LongLongMap links = new LongLongMap();
  /**
   * Our hashes of the blocks the event being applied removes together ({@link #removingTogether}); writer thread
   * only. An engine that evicts a whole stretch at once (SGLang evicts a radix node, listing its pages head first)
   * removes parent and child in one step: that is not a parent removed first.
   */
  private long[] together = new long[0];
  private int togetherCount;
  private volatile long duplicateStores;
  private volatile long holesSeen;
  private volatile boolean retired;
  private volatile boolean eventStream;
  private volatile long evictions;
  private volatile long conflicts;
  /** Handle count for other threads (gauges); written with release semantics by the writer. */
  private volatile int size;
  private static final VarHandle SIZE;

  static {
    try {
      SIZE = MethodHandles.lookup().findVarHandle(WorkerView.class, "size", int.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  WorkerView(KvIndex index, BlockTable table, WorkerId id, int ordinal, long registration) {
    this.index = index;
    this.table = table;
    this.id = Objects.requireNonNull(id, "id");
    this.ordinal = ordinal;
    this.registration = registration;
  }

  /** The index's media identifier learning (its event path reports stores of media blocks there). */
  public MediaIdentities media() {
    return index.media();
  }

  public WorkerId id() {
    return id;
  }

  /** The worker's small integer in the shared table; reused after {@link KvIndex#remove}. */
  public int ordinal() {
    return ordinal;
  }

  /** When this view was registered: a lookup that began before that cannot have read its blocks. */
  long registration() {
    return registration;
  }

  /** Whether {@code engineHash} names a block this worker holds (or recently held, see the class notes). */
  public boolean hasHandle(long engineHash) {
    return handles.containsKey(engineHash);
  }

  /** Our hash for {@code engineHash}; only meaningful when {@link #hasHandle} is true. */
  public long handle(long engineHash) {
    return handles.get(engineHash, 0L);
  }

  /**
   * Loads what {@link #store} of {@code ourHash} under {@code engineHash} will touch (the handle's home slot, the
   * block's table slot), changing nothing (see {@link BlockTable#touch}); returns a value to keep so the loads
   * stay. No branch depends on what it loads, so several calls in a row have their cache misses in flight at once.
   */
  public long touchStore(long engineHash, long ourHash) {
    return handles.touch(engineHash) + table.touch(ourHash);
  }

  /** Loads {@code engineHash}'s home slot in the handle map, changing nothing; see {@link #touchStore}. */
  public long touchHandle(long engineHash) {
    return handles.touch(engineHash);
  }

  /** Loads {@code ourHash}'s table slot, changing nothing; see {@link #touchStore}. */
  public long touchBlock(long ourHash) {
    return table.touch(ourHash);
  }

  /**
   * Records that the worker stored block {@code ourHash}, named {@code engineHash} by the engine, in {@code tier}.
   * A GPU store is trusted to keep the view prefix-closed (a chain's blocks stored head first, each after its
   * parent, as {@link dev.kvrouter.index.events.EventApplier} does) for {@link IndexConfig#prefixJump}.
   */
  public void store(long engineHash, long ourHash, Tier tier) {
    int bit = bit(tier);
    if (bit != BlockTable.GPU && !holes) {
      markHoles(); // tier counts need every block read
    }
    boolean fresh; // the handle did not name this block before
    if (engineHash == 0) {
      fresh = storeZeroKey(ourHash);
    } else {
      int i = handles.findOrInsert(engineHash);
      fresh = i < 0;
      if (fresh) {
        handles.setValueAt(-i - 1, ourHash);
        if (handles.size() > index.perWorkerCap()) {
          evict(engineHash);
        }
      } else if (handles.valueAt(i) != ourHash) {
        repoint(i, ourHash);
        fresh = true;
      }
    }
    int before = table.add(ourHash, ordinal, bit);
    if ((before & bit) != 0) {
      dups.add(dupKey(ourHash, bit), 1);
      duplicateStores++;
    }
    if ((before & BlockTable.REAL) != 0 && (fresh || aliasCount.size() > 0)) {
      aliasStored(engineHash, ourHash, bit, fresh);
    }
    SIZE.setRelease(this, handles.size());
  }

  /**
   * {@link #store(long, long, Tier)} for a block whose parent is {@code parentHash} (our hash): the form event
   * appliers use for every block but a chain's first, so the view can check that the engine removes children
   * before parents (sampled, see the class notes).
   */
  public void store(long engineHash, long ourHash, Tier tier, long parentHash) {
    store(engineHash, ourHash, tier);
    if ((ourHash & LINK_MASK) == 0 && tier == Tier.GPU && notClosed == null) {
      links.put(ourHash, parentHash);
    }
  }

  /**
   * The engine reused a handle for different content (or our identity saw it differently): the handle now names
   * the new block, so the old residency would become unreachable; drop it rather than leak it.
   */
  private void repoint(int slot, long ourHash) {
    conflicts++;
    markHoles(); // the old block's descendants lost their parent
    dropAll(handles.valueAt(slot));
    handles.setValueAt(slot, ourHash);
  }

  /** Returns whether the handle did not name {@code ourHash} before. */
  private boolean storeZeroKey(long ourHash) {
    boolean fresh = true;
    if (handles.containsKey(0)) {
      long old = handles.get(0, 0L);
      if (old != ourHash) {
        conflicts++;
        markHoles();
        dropAll(old);
      } else {
        fresh = false;
      }
    }
    handles.put(0, ourHash);
    return fresh;
  }

  /**
   * A store of a block this worker already held: a handle new to it becomes an alias (see the class notes), and an
   * alias's copies are counted. The block's first handle is not tracked: its copies are what the aliases' are not.
   */
  private void aliasStored(long engineHash, long ourHash, int bit, boolean fresh) {
    if (fresh) {
      aliasOf.put(engineHash, ourHash);
      aliasCount.add(ourHash, 1);
    } else if (!isAlias(engineHash, ourHash)) {
      return;
    }
    aliasCopies.add(dupKey(engineHash, bit), 1);
    aliasSums.add(dupKey(ourHash, bit), 1);
  }

  private boolean isAlias(long engineHash, long ourHash) {
    return aliasOf.containsKey(engineHash) && aliasOf.get(engineHash, 0L) == ourHash;
  }

  /** Copies of aliased block {@code ourHash} in tier {@code bit} under its first handle. */
  private int firstHandleCopies(long ourHash, int bit) {
    int held = (table.tiers(ourHash, ordinal) & bit) != 0 ? 1 + dups.get(dupKey(ourHash, bit)) : 0;
    return held - aliasSums.get(dupKey(ourHash, bit));
  }

  /**
   * Records that the engine removed {@code engineHash} from {@code tier}.
   *
   * @return false if the handle is unknown (the store was never seen, or was evicted here)
   */
  public boolean remove(long engineHash, Tier tier) {
    long ourHash;
    int slot = -1;
    if (engineHash == 0) {
      if (!handles.containsKey(0)) {
        return false;
      }
      ourHash = handles.get(0, 0L);
    } else {
      slot = handles.indexOf(engineHash);
      if (slot < 0) {
        return false;
      }
      ourHash = handles.valueAt(slot);
    }
    int bit = bit(tier);
    if (aliasCount.size() > 0 && aliasCount.get(ourHash) > 0) {
      removeAliased(engineHash, slot, ourHash, bit);
      return true;
    }
    if (dups.size() > 0) {
      long dk = dupKey(ourHash, bit);
      if (dups.get(dk) > 0) {
        dups.add(dk, -1);
        return true;
      }
    }
    int after = removeOne(ourHash, bit);
    if ((after & BlockTable.REAL) == 0) {
      dropHandle(slot);
    }
    return true;
  }

  /** Takes one copy of {@code ourHash} off the table; returns the tiers the worker holds it in after. */
  private int removeOne(long ourHash, int bit) {
    int after = table.remove(ourHash, ordinal, bit);
    if ((ourHash & LINK_MASK) == 0 && bit == BlockTable.GPU && (after & BlockTable.GPU) == 0) {
      checkParent(ourHash);
    }
    return after;
  }

  /** Forgets the handle at {@code slot} of the handle map, or the zero key if negative. */
  private void dropHandle(int slot) {
    if (slot >= 0) {
      handles.removeAt(slot);
    } else {
      handles.remove(0);
    }
    SIZE.setRelease(this, handles.size());
  }

  /**
   * {@link #remove} of a copy of an aliased block: takes one of the handle's own copies (none left in the tier: the
   * engine removed what it never stored there, as for a block with one handle), and the handle once it has none.
   */
  private void removeAliased(long engineHash, int slot, long ourHash, int bit) {
    boolean alias = isAlias(engineHash, ourHash);
    int mine = alias ? aliasCopies.get(dupKey(engineHash, bit)) : firstHandleCopies(ourHash, bit);
    if (mine > 0) {
      if (alias) {
        aliasCopies.add(dupKey(engineHash, bit), -1);
        aliasSums.add(dupKey(ourHash, bit), -1);
      }
      long dk = dupKey(ourHash, bit);
      if (dups.get(dk) > 0) {
        dups.add(dk, -1);
      } else {
        removeOne(ourHash, bit);
      }
    }
    for (int b = BlockTable.GPU; b <= BlockTable.DISK; b <<= 1) {
      if ((alias ? aliasCopies.get(dupKey(engineHash, b)) : firstHandleCopies(ourHash, b)) > 0) {
        return; // the handle still names a copy
      }
    }
    if (alias) {
      aliasOf.remove(engineHash);
      aliasCount.add(ourHash, -1);
    }
    dropHandle(slot);
  }

  /**
   * Declares that the next {@link #remove} calls, up to {@link #removedTogether}, apply one engine event that
   * removes {@code engineHashes[from, from + count)} at once. Writer thread only.
   */
  public void removingTogether(long[] engineHashes, int from, int count) {
    if (!open()) {
      reshaping = true; // before the first removal (see reshaping)
      publishOpen();
    }
    if (together.length < count) {
      together = new long[Math.max(count, 2 * together.length)];
    }
    for (int i = 0; i < count; i++) {
      together[i] = handles.get(engineHashes[from + i], 0L);
    }
    togetherCount = count;
  }

  /** Ends what {@link #removingTogether} began. */
  public void removedTogether() {
    togetherCount = 0;
    if (reshaping) {
      reshaping = false; // every block of the event is gone: what is left is closed again
      publishOpen();
    }
  }

  /** A sampled block left the GPU tier: its parent must still be there unless the engine evicts parents first. */
  private void checkParent(long ourHash) {
    if (links.size() == 0 || !links.containsKey(ourHash)) {
      return;
    }
    long parent = links.get(ourHash, 0L);
    links.remove(ourHash);
    if ((table.tiers(parent, ordinal) & BlockTable.GPU) == 0 && !removedInThisEvent(parent)) {
      holesSeen++;
      if (holes || lossSinceClear || stale) {
        markHoles(); // may be our own doing (share eviction, conflicts, lost events): not the engine's evidence
      } else {
        markNotPrefixClosed("the engine removed a block before one of its children");
      }
    }
  }

  private boolean removedInThisEvent(long ourHash) {
    for (int i = 0; i < togetherCount; i++) {
      if (together[i] == ourHash) {
        return true;
      }
    }
    return false;
  }

  /** Forgets every block of this worker in every tier ({@code AllBlocksCleared}, restart, purge). */
  public void clear() {
    reshaping = true; // handle-map order is no order at all: open before the first removal (see reshaping)
    publishOpen();
    for (int i = 0, n = handles.capacity(); i < n; i++) {
      if (handles.usedAt(i)) {
        table.remove(handles.valueAt(i), ordinal, BlockTable.REAL);
      }
    }
    if (handles.hasZeroKey()) {
      table.remove(handles.zeroValue(), ordinal, BlockTable.REAL);
    }
    handles.clear();
    dups.clear();
    if (aliasOf.size() > 0) {
      aliasOf.clear();
      aliasCount.clear();
      aliasCopies.clear();
      aliasSums.clear();
    }
    links.clear();
    SIZE.setRelease(this, 0);
    holes = false; // nothing held: closed again
    lossSinceClear = false;
    reshaping = false;
    publishOpen();
  }

  private void markHoles() {
    holes = true;
    publishOpen();
  }

  /** Sets the index's open bit from the flags; serialized, so the last call sees every earlier flag write. */
  private synchronized void publishOpen() {
    if (!retired) {
      index.setOpenBit(ordinal, open());
    }
  }

  /**
   * Whether a lookup must read every block of this worker (it is stale, may hold a block without its parent,
   * holds CPU/disk blocks, lost events since its last clear, is removing blocks out of order right now, or its
   * engine is not prefix-closed) instead of trusting its blocks to be prefix-closed.
   */
  public boolean open() {
    return stale || holes || lossSinceClear || reshaping || notClosed != null;
  }

  /**
   * Records evidence that this worker's engine does not keep its cached blocks prefix-closed (it may remove a
   * parent before its child with no event lost), or that it was configured so: lookups read every block of this
   * worker from now on, until it leaves the index. Idempotent; the first reason is kept. Any thread.
   */
  public void markNotPrefixClosed(String reason) {
    Objects.requireNonNull(reason, "reason");
    synchronized (this) {
      if (notClosed != null) {
        return;
      }
      notClosed = reason;
    }
    org.slf4j.LoggerFactory.getLogger(WorkerView.class).warn(
        "{}: lookups read every block of this worker from now on: {}", id, reason);
    publishOpen();
  }

  /** Why this worker's engine is treated as not prefix-closed, or null (see {@link #markNotPrefixClosed}). */
  public String notPrefixClosed() {
    return notClosed;
  }

  /** Stores of a block this worker already held in the same tier (reference-counted duplicates). */
  public long duplicateStores() {
    return duplicateStores;
  }

  /** Sampled blocks that left the GPU tier after their parent (see the class notes). */
  public long holesSeen() {
    return holesSeen;
  }

  /**
   * The engine emptied its cache ({@code AllBlocksCleared}, a restart): drops every block of this worker and its
   * predicted entries too, which were made before and are void now (otherwise the router would credit blocks
   * nobody holds until they expire). Event thread only.
   */
  public void reset() {
    clear();
    index.cacheReset(this);
  }

  /** Blocks (handles) this worker holds in the index. */
  public int size() {
    return size;
  }

  /** Entries dropped here because the worker exceeded its share of {@link IndexConfig#maxEntries}. */
  public long evictions() {
    return evictions;
  }

  /** Stores that re-pointed an existing handle to a different block. */
  public long conflicts() {
    return conflicts;
  }

  /** Whether this worker's event view may be wrong (gap without replay, unexpected unknown parent, ...). */
  public boolean stale() {
    return stale;
  }

  /** Set by the event plane; lookups report it per worker so the router can fall back visibly. */
  public void setStale(boolean value) {
    stale = value;
    if (value) {
      lossSinceClear = true; // lost removes may leave blocks whose parents go later: walk until the next clear
    }
    if (!retired) {
      index.setStaleBit(ordinal, value);
    }
    publishOpen();
  }

  /** Whether an event stream feeds this worker (predictions then use the short TTL). */
  public boolean hasEventStream() {
    return eventStream;
  }

  public void setEventStream(boolean value) {
    eventStream = value;
  }

  boolean retired() {
    return retired;
  }

  void retire() {
    retired = true;
  }

  /** The tier mask this worker holds for {@code ourHash} (tests and diagnostics). */
  int tiers(long ourHash) {
    return table.tiers(ourHash, ordinal) & BlockTable.REAL;
  }

  /** Evicts about 1/64 of the share with a sweeping hand, never the handle just stored. */
  private void evict(long keep) {
    markHoles(); // the hand takes any block, parents included
    int target = Math.max(1, index.perWorkerCap() / 64);
    int removed = 0;
    int cap = handles.capacity();
    for (int scanned = 0; scanned < cap && removed < target; scanned++) {
      int i = sweep++ & (cap - 1);
      if (!handles.usedAt(i) || handles.keyAt(i) == keep) {
        continue;
      }
      dropAll(handles.valueAt(i));
      handles.removeAt(i);
      removed++;
      SIZE.setRelease(this, handles.size());
      sweep--; // backward shift may have moved a later entry into slot i
      if (handles.capacity() != cap) {
        break;
      }
    }
    evictions += removed;
  }

  private void dropAll(long ourHash) {
    table.remove(ourHash, ordinal, BlockTable.REAL);
    if (aliasCount.size() > 0 && aliasCount.get(ourHash) > 0) {
      forgetAliases(ourHash);
    }
    if ((ourHash & LINK_MASK) == 0 && links.size() > 0) {
      links.remove(ourHash);
    }
    for (int bit = BlockTable.GPU; bit <= BlockTable.DISK; bit <<= 1) {
      long dk = dupKey(ourHash, bit);
      int n = dups.get(dk);
      if (n != 0) {
        dups.add(dk, -n);
      }
    }
  }

  /**
   * The block's copies are gone all at once (share eviction, a conflict): its aliases are no longer counted. The
   * block's other handles stay, as every handle of an evicted block did, until the engine removes them; scans the
   * live aliases, which only aliased blocks evicted pay for.
   */
  private void forgetAliases(long ourHash) {
    long[] gone = new long[aliasCount.get(ourHash)];
    int n = 0;
    for (int i = 0, cap = aliasOf.capacity(); i < cap && n < gone.length; i++) {
      if (aliasOf.usedAt(i) && aliasOf.valueAt(i) == ourHash) {
        gone[n++] = aliasOf.keyAt(i);
      }
    }
    if (n < gone.length && aliasOf.hasZeroKey() && aliasOf.zeroValue() == ourHash) {
      gone[n++] = 0;
    }
    for (int k = 0; k < n; k++) {
      aliasOf.remove(gone[k]);
    }
    for (int bit = BlockTable.GPU; bit <= BlockTable.DISK; bit <<= 1) {
      for (int k = 0; k < n; k++) {
        aliasCopies.add(dupKey(gone[k], bit), -aliasCopies.get(dupKey(gone[k], bit)));
      }
      aliasSums.add(dupKey(ourHash, bit), -aliasSums.get(dupKey(ourHash, bit)));
    }
    aliasCount.add(ourHash, -aliasCount.get(ourHash));
  }

  private static long dupKey(long ourHash, int bit) {
    return ourHash ^ DUP_SALT[bit];
  }

  static int bit(Tier tier) {
    return switch (tier) {
      case GPU -> BlockTable.GPU;
      case CPU -> BlockTable.CPU;
      case DISK -> BlockTable.DISK;
    };
  }

  long footprintBytes() {
    return 64 + handles.footprintBytes() + dups.footprintBytes() + links.footprintBytes() + aliasOf.footprintBytes()
        + aliasCount.footprintBytes() + aliasCopies.footprintBytes() + aliasSums.footprintBytes();
  }

  @Override
  public String toString() {
    return "WorkerView[" + id + ", ordinal " + ordinal + ", " + size + " blocks" + (stale ? ", stale" : "") + "]";
  }
}
