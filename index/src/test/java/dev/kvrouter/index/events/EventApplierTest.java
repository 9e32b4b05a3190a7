package dev.kvrouter.index.events;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.PrefixMatches;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.WorkerView;
import dev.kvrouter.index.block.BlockHasher;
import dev.kvrouter.index.block.CacheNamespace;
import dev.kvrouter.index.wire.AllBlocksCleared;
import dev.kvrouter.index.wire.BlockRemoved;
import dev.kvrouter.index.wire.BlockStored;
import dev.kvrouter.index.wire.EventBatch;
import dev.kvrouter.index.wire.KvEvent;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/** Events in, router identities out: the index must answer requests hashed the way the request path hashes. */
class EventApplierTest {

  private static final String MODEL = "Qwen/Qwen3-0.6B";
  private static final int BS = 16;
  private final KvIndex index = new KvIndex(IndexConfig.defaults(), Clock.systemUTC());
  private final WorkerId w = WorkerId.of("w1");
  private final EventPlaneHealth health =
      new EventPlaneHealth(new SimpleMeterRegistry(), Clock.systemUTC(), Duration.ZERO);
  private final WorkerView view = index.register(w);
  private final WorkerEventHealth h = health.register(view);
  private final EventApplier applier = new EventApplier(view, MODEL, BS, h);

  static int[] tokens(int n, int seed) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = (seed * 7919 + i * 31) % 150_000;
    }
    return t;
  }

  /** What the request path computes for a prompt: BlockHasher from the namespace root. */
  static long[] requestHashes(String lora, String salt, int[] tokens) {
    return BlockHasher.hashFullBlocks(new CacheNamespace(MODEL, lora, salt).rootSeed(), tokens, tokens.length, BS);
  }

  private int apply(KvEvent... events) {
    return applier.apply(new EventBatch(1.0, List.of(events), 0, 0));
  }

  private int matched(long[] request) {
    PrefixMatches m = index.lookup(request, request.length);
    int i = m.indexOf(w);
    return i < 0 ? 0 : m.matchedBlocks(i);
  }

  private static long[] engine(int n, long base) {
    long[] e = new long[n];
    for (int i = 0; i < n; i++) {
      e[i] = base + i;
    }
    return e;
  }

  @Test
  void chainedStoresAcrossEventsMatchTheRequestPath() {
    int[] t = tokens(5 * BS, 1);
    // engine stores blocks 0-1 then 2-4 with the parent handle
    apply(BlockStored.of(engine(2, 100), null, Arrays.copyOf(t, 2 * BS), BS, "GPU"));
    apply(BlockStored.of(new long[] {102, 103, 104}, 101L, Arrays.copyOfRange(t, 2 * BS, 5 * BS), BS, "GPU"));
    long[] req = requestHashes(null, null, t);
    assertThat(matched(req)).isEqualTo(5);
    assertThat(h.count(EventCounter.STORED_BLOCKS)).isEqualTo(5);
    // a request with a different third block matches two
    int[] t2 = t.clone();
    t2[2 * BS + 3]++;
    assertThat(matched(requestHashes(null, null, t2))).isEqualTo(2);
    // removing block 1 cuts the prefix at 1
    apply(BlockRemoved.of("GPU", 101));
    assertThat(matched(req)).isEqualTo(1);
  }

  /**
   * Within one batch, what earlier events did to a store's parent (re-pointed it, removed it, cleared the worker)
   * decides the store's identity, exactly as when each event comes in a batch of its own: the applier touches a
   * batch's slots ahead of its writes, and any work done ahead must not use the parents as they were before the
   * batch (a batch-wide pre-hash was tried and dropped; this pins the behaviour for the next attempt).
   */
  @Test
  void storesHashedAheadFollowWhatEarlierEventsOfTheBatchDidToTheirParent() {
    int[] a = tokens(3 * BS, 11);
    int[] b = tokens(3 * BS, 12);
    int[] child = tokens(2 * BS, 13);
    long[] viaA = requestHashes(null, null, concat(a, child));
    long[] viaB = requestHashes(null, null, concat(b, child));
    // 1. the parent (engine 202, known from an earlier batch) is re-pointed to other content earlier in the batch,
    // and another store comes between: the child chains from b, not from the a its handle named when the batch came
    apply(BlockStored.of(engine(3, 200), null, a, BS, "GPU"));
    assertThat(apply(
        BlockStored.of(engine(3, 200), null, b, BS, "GPU"),
        BlockStored.of(engine(1, 250), null, tokens(BS, 15), BS, "GPU"),
        BlockStored.of(engine(2, 300), 202L, child, BS, "GPU"))).isZero();
    assertThat(matched(viaB)).isEqualTo(5);
    assertThat(matched(viaA)).isZero(); // re-pointed handles drop the blocks they named
    // 2. the parent is removed within the batch before the child: unknown parent, nothing stored
    apply(BlockStored.of(engine(3, 400), null, a, BS, "GPU"));
    assertThat(apply(
        BlockRemoved.of("GPU", 402),
        BlockStored.of(engine(2, 500), 402L, child, BS, "GPU"))).isEqualTo(1);
    // 3. a clear between a known parent and its child: the child's parent is gone
    assertThat(apply(
        AllBlocksCleared.INSTANCE,
        BlockStored.of(engine(2, 600), 202L, child, BS, "GPU"))).isEqualTo(1);
    assertThat(matched(viaB)).isZero();
    // 4. a chain of three events in one batch, the middle one from a handle stored in an earlier batch
    apply(BlockStored.of(engine(3, 700), null, a, BS, "GPU"));
    int[] more = tokens(BS, 14);
    assertThat(apply(
        BlockStored.of(engine(2, 800), 702L, child, BS, "GPU"),
        BlockStored.of(new long[] {900}, 801L, more, BS, "GPU"))).isZero();
    assertThat(matched(requestHashes(null, null, concat(concat(a, child), more)))).isEqualTo(6);
  }

  private static int[] concat(int[] x, int[] y) {
    int[] r = Arrays.copyOf(x, x.length + y.length);
    System.arraycopy(y, 0, r, x.length, y.length);
    return r;
  }

  @Test
  void saltsAndLoraFromExtraKeysSelectTheNamespace() {
    int[] t = tokens(2 * BS, 2);
    List<List<Object>> extra = new ArrayList<>();
    extra.add(new ArrayList<>(List.of("alice-lora", "kvr1:tenant-a")));
    extra.add(new ArrayList<>(List.of("alice-lora")));
    apply(BlockStored.of(engine(2, 200), null, t, BS, "GPU").withLora("alice-lora", extra));
    assertThat(matched(requestHashes("alice-lora", "kvr1:tenant-a", t))).isEqualTo(2);
    assertThat(matched(requestHashes("alice-lora", null, t))).as("no salt: other tenant").isZero();
    assertThat(matched(requestHashes(null, "kvr1:tenant-a", t))).as("base model").isZero();
    assertThat(matched(requestHashes("alice-lora", "kvr1:tenant-b", t))).isZero();

    // a raw salt (not ours) is the last string of the first block
    int[] u = tokens(BS, 3);
    List<List<Object>> raw = new ArrayList<>();
    raw.add(new ArrayList<>(List.of("some-raw-salt")));
    apply(BlockStored.of(engine(1, 300), null, u, BS, "GPU").withExtraKeys(raw));
    assertThat(matched(requestHashes(null, "some-raw-salt", u))).isEqualTo(1);
    assertThat(matched(requestHashes(null, null, u))).isZero();

    // SGLang's cache_salt field
    int[] v = tokens(BS, 4);
    apply(BlockStored.of(engine(1, 400), null, v, BS, "GPU").withCacheSalt("kvr1:tenant-c"));
    assertThat(matched(requestHashes(null, "kvr1:tenant-c", v))).isEqualTo(1);
  }

  @Test
  void multimodalItemsGoIntoTheBlockExtraWithTheSharedHelper() {
    int[] t = tokens(3 * BS, 5);
    List<List<Object>> extra = new ArrayList<>();
    extra.add(null);
    extra.add(new ArrayList<>(List.of(Arrays.asList((Object) "img-uuid-1", 5L))));
    extra.add(new ArrayList<>(
        List.of(Arrays.asList((Object) "img-uuid-1", -11L), Arrays.asList((Object) "img-2", 2L))));
    apply(BlockStored.of(engine(3, 500), null, t, BS, "GPU").withExtraKeys(extra));
    // the request path: same tokens, extra per block from (uuid, offset) through the same helper
    long root = CacheNamespace.of(MODEL).rootSeed();
    long b0 = BlockHasher.blockHash(root, t, 0, BS, 0);
    long b1 = BlockHasher.blockHash(b0, t, BS, BS,
        BlockHasher.multimodalExtra(new String[] {"img-uuid-1"}, new int[] {5}, 0, 1));
    long b2 = BlockHasher.blockHash(b1, t, 2 * BS, BS,
        BlockHasher.multimodalExtra(new String[] {"img-uuid-1", "img-2"}, new int[] {-11, 2}, 0, 2));
    assertThat(matched(new long[] {b0, b1, b2})).isEqualTo(3);
    assertThat(matched(requestHashes(null, null, t))).as("text-only identity differs after block 0").isEqualTo(1);
  }

  @Test
  void unknownParentIsDroppedAndCounted() {
    int[] t = tokens(BS, 6);
    assertThat(apply(BlockStored.of(new long[] {601}, 999L, t, BS, "GPU"))).isEqualTo(1);
    assertThat(h.count(EventCounter.UNKNOWN_PARENT)).isEqualTo(1);
    assertThat(view.size()).isZero();
  }

  /**
   * A worker whose engine runs another block size than workers.yaml says has every store skipped: its cache is never
   * credited. That is a configuration mistake the operator must fix, so the first such store says so in the log,
   * naming the worker and both sizes; later ones are only counted.
   */
  @Test
  void anotherBlockSizeIsLoggedOnceWithTheFix() {
    Logger logger = (Logger) LoggerFactory.getLogger(EventApplier.class);
    ListAppender<ILoggingEvent> logs = new ListAppender<>();
    logs.start();
    logger.addAppender(logs);
    try {
      apply(BlockStored.of(new long[] {1}, null, tokens(32, 1), 32, "GPU"));
      apply(BlockStored.of(new long[] {2}, null, tokens(32, 2), 32, "GPU"));
      apply(BlockStored.of(new long[] {3}, null, tokens(BS, 3), BS, "GPU"));
    } finally {
      logger.detachAppender(logs);
    }
    assertThat(h.count(EventCounter.SKIPPED_BLOCK_SIZE)).isEqualTo(2);
    assertThat(view.size()).isEqualTo(1);
    assertThat(logs.list).filteredOn(e -> e.getLevel() == Level.WARN).singleElement()
        .extracting(ILoggingEvent::getFormattedMessage).satisfies(m -> assertThat(m)
            .startsWith("w1: ").contains("block_size 32").contains("expects 16").contains("workers.yaml block_size")
            .contains("vLLM --block-size").contains("kvrouter_events_skipped_total{reason=\"block_size\"}"));
  }

  @Test
  void whatTheRouterCannotUseIsSkippedByReason() {
    int[] t = tokens(BS, 7);
    apply(BlockStored.of(new long[] {1}, null, tokens(32, 7), 32, "GPU")); // other block size
    apply(new BlockStored(new long[] {2}, null, t, BS, null, "GPU", null, null, null, null, null, "REMOTE", null,
        null, null));
    apply(BlockStored.of(new long[] {3}, null, t, BS, "EXTERNAL"));
    apply(BlockStored.of(new long[] {4}, null, t, BS, "GPU").withGroup(1, "sliding_window"));
    apply(BlockStored.of(new long[] {5}, null, t, BS, "GPU").withGroup(2, null)); // unlearned non-zero group
    apply(BlockStored.of(new long[] {6, 7}, null, t, BS, "GPU")); // tokens for one block, two hashes
    assertThat(view.size()).isZero();
    assertThat(h.count(EventCounter.SKIPPED_BLOCK_SIZE)).isEqualTo(1);
    assertThat(h.count(EventCounter.SKIPPED_LOCALITY)).isEqualTo(1);
    assertThat(h.count(EventCounter.SKIPPED_MEDIUM)).isEqualTo(1);
    assertThat(h.count(EventCounter.SKIPPED_GROUP)).isEqualTo(2);
    assertThat(h.count(EventCounter.SKIPPED_TOKENS)).isEqualTo(1);
    // full-attention group 1 learned from a store; its removes then apply, sliding-window removes do not
    apply(BlockStored.of(new long[] {8}, null, t, BS, "GPU").withGroup(1, "full_attention"));
    assertThat(view.size()).isEqualTo(1);
    apply(new BlockRemoved(new long[] {8}, "GPU", 1, null, null));
    assertThat(view.size()).isZero();
  }

  /**
   * An engine has a handful of KV groups; a stream naming thousands must not grow what the applier remembers of
   * them. Groups past the cap are not indexed at all (their stores would otherwise be kept with removes that
   * could not be matched to a kind), and counted.
   */
  @Test
  void theKvGroupsRememberedAreCapped() {
    int[] t = tokens(BS, 9);
    for (int g = 1; g <= 10_000; g++) {
      apply(BlockStored.of(new long[] {900_000 + g}, null, t, BS, "GPU").withGroup(g, "sliding_window"));
    }
    assertThat(applier.knownGroups()).isEqualTo(EventApplier.MAX_GROUPS);
    assertThat(h.count(EventCounter.SKIPPED_GROUP_LIMIT)).isEqualTo(10_000 - EventApplier.MAX_GROUPS);
    // a full-attention group past the cap is skipped, stores and removes alike: nothing is claimed for it
    apply(BlockStored.of(new long[] {77}, null, t, BS, "GPU").withGroup(20_000, "full_attention"));
    assertThat(view.size()).isZero();
    // a group learned before the cap is still read by its kind
    apply(BlockStored.of(new long[] {78}, null, t, BS, "GPU").withGroup(1, "full_attention"));
    assertThat(view.size()).isEqualTo(1);
    apply(new BlockRemoved(new long[] {78}, "GPU", 1, null, null));
    assertThat(view.size()).isZero();
  }

  @Test
  void tiersDuplicatesAndTokenlessOffloadStores() {
    int[] t = tokens(2 * BS, 8);
    long[] req = requestHashes(null, null, t);
    apply(BlockStored.of(engine(2, 800), null, t, BS, "GPU"));
    apply(BlockStored.of(engine(2, 800), null, t, BS, "GPU")); // vLLM does not de-duplicate
    // an offload connector reports the same blocks on CPU without tokens (older connectors)
    apply(new BlockStored(engine(2, 800), null, new int[0], 0, null, "CPU", null, null, null, null, null, null, null,
        null, null));
    apply(new BlockStored(new long[] {12345}, null, new int[0], 0, null, "CPU", null, null, null, null, null, null,
        null, null, null));
    assertThat(h.count(EventCounter.SKIPPED_UNKNOWN_BLOCK)).isEqualTo(1);
    apply(BlockRemoved.of("GPU", 800, 801));
    PrefixMatches m = index.lookup(req, 2);
    assertThat(m.gpuBlocks(0)).as("one GPU copy left").isEqualTo(2);
    apply(BlockRemoved.of("GPU", 800, 801));
    m = index.lookup(req, 2);
    assertThat(m.matchedBlocks(0)).isEqualTo(2);
    assertThat(m.cpuBlocks(0)).isEqualTo(2);
    apply(BlockRemoved.of("CPU", 800, 801));
    assertThat(index.lookup(req, 2).size()).isZero();
    assertThat(view.size()).isZero();
    apply(BlockRemoved.of("CPU", 800));
    assertThat(h.count(EventCounter.UNKNOWN_REMOVES)).isEqualTo(1);
  }

  @Test
  void clearEmptiesTheWorker() {
    int[] t = tokens(3 * BS, 9);
    assertThat(index.cacheResets()).isZero();
    apply(BlockStored.of(engine(3, 900), null, t, BS, "GPU"), AllBlocksCleared.INSTANCE);
    assertThat(view.size()).isZero();
    assertThat(h.count(EventCounter.CLEARED_EVENTS)).isEqualTo(1);
    // counted for the router, which then stops reading the blocks coming back as evictions
    assertThat(index.cacheResets()).isEqualTo(1);
  }

  @Test
  void clearAlsoVoidsTheRoutersPredictionsForThatWorker() {
    // reset_prefix_cache or a restart: a prediction made before the clear names blocks the engine no longer has
    int[] t = tokens(3 * BS, 10);
    long[] request = requestHashes(null, null, t);
    index.predict(w, request, request.length);
    PrefixMatches before = index.lookup(request, request.length);
    assertThat(before.predictedBlocks(before.indexOf(w))).isEqualTo(3);
    apply(AllBlocksCleared.INSTANCE);
    assertThat(index.lookup(request, request.length).indexOf(w)).isNegative();
    // predictions made after the clear count again
    index.predict(w, request, 2);
    PrefixMatches after = index.lookup(request, request.length);
    assertThat(after.predictedBlocks(after.indexOf(w))).isEqualTo(2);
  }

  // ----------------------------------------------------------------------------------------------------------
  // Prefix closure evidence (the jump search, on by default, trusts each worker's blocks to be prefix-closed)

  /** A two-group hybrid model on a vLLM without group_idx: every store arrives twice in its batch. */
  private void storeTwice(long[] engine, Long parent, int[] t) {
    BlockStored full = BlockStored.of(engine, parent, t, BS, "GPU");
    BlockStored window = BlockStored.of(engine, parent, t, BS, "GPU");
    applier.apply(new EventBatch(1.0, List.of(full, window), 0, 0));
  }

  @Test
  void aHybridModelWithoutGroupInformationIsWalkedAndAnsweredExactly() {
    assertThat(IndexConfig.defaults().prefixJump()).isPositive();
    int chains = EventApplier.TWIN_EVIDENCE;
    int[][] t = new int[chains][];
    long[][] req = new long[chains][];
    for (int c = 0; c < chains; c++) {
      t[c] = tokens(8 * BS, 100 + c);
      req[c] = requestHashes(null, null, t[c]);
      storeTwice(engine(8, 1000L * (c + 1)), null, t[c]);
      assertThat(view.notPrefixClosed()).as("after %d twinned stores", c + 1)
          .isEqualTo(c + 1 < chains ? null : view.notPrefixClosed());
    }
    assertThat(view.notPrefixClosed()).contains("hybrid");
    assertThat(view.open()).isTrue();
    WorkerEventHealth.Snapshot snap = h.snapshot(0);
    assertThat(snap.walked()).isTrue();
    assertThat(snap.notPrefixClosed()).contains("hybrid");
    // the sliding-window group frees blocks 0..5 from the front; then the request ends and full attention frees
    // tail first: blocks 6 and 7 keep their window copies, 0..5 are gone: a hole the jump search cannot see
    long[] e = engine(8, 1000L);
    for (int i = 0; i < 6; i++) {
      apply(BlockRemoved.of("GPU", e[i]));
    }
    for (int i = 7; i >= 0; i--) {
      apply(BlockRemoved.of("GPU", e[i]));
    }
    assertThat(view.size()).isEqualTo(8 * (chains - 1) + 2); // chain 0's blocks 6 and 7 are still held
    assertThat(matched(req[0])).isZero(); // block 0 is gone: exact, although blocks 6 and 7 are held
    assertThat(matched(req[1])).isEqualTo(8);
    // still walked after the engine clears its cache: the evidence is about the engine, not this view
    apply(new AllBlocksCleared());
    assertThat(view.open()).isTrue();
  }

  @Test
  void aFullAttentionEngineWithOccasionalDuplicatesStaysJumpSearched() {
    for (int c = 0; c < 60; c++) {
      int[] t = tokens(4 * BS, 300 + c);
      if (c % 10 == 0) {
        storeTwice(engine(4, 1000L * (c + 1)), null, t); // identical requests filling the same blocks in one step
      } else {
        apply(BlockStored.of(engine(4, 1000L * (c + 1)), null, t, BS, "GPU"));
      }
      // and stored again in a later batch (vLLM does not de-duplicate): not a twin of the same batch
      if (c % 3 == 0) {
        apply(BlockStored.of(engine(4, 1000L * (c + 1)), null, t, BS, "GPU"));
      }
    }
    assertThat(view.duplicateStores()).isPositive();
    assertThat(view.notPrefixClosed()).isNull();
    assertThat(view.open()).isFalse();
  }

  @Test
  void kvGroupsWithKindsAreFilteredAndGroupsWithoutKindsAreWalked() {
    int[] t = tokens(4 * BS, 500);
    for (int c = 0; c < 2 * EventApplier.TWIN_EVIDENCE; c++) {
      long[] e = engine(4, 1000L * (c + 1));
      applier.apply(new EventBatch(1.0, List.of(
          BlockStored.of(e, null, tokens(4 * BS, 500 + c), BS, "GPU").withGroup(0, "full_attention"),
          BlockStored.of(e, null, tokens(4 * BS, 500 + c), BS, "GPU").withGroup(1, "sliding_window")), 0, 0));
    }
    assertThat(view.notPrefixClosed()).isNull(); // the window group is dropped: what is left is closed
    assertThat(view.duplicateStores()).isZero();
    apply(BlockStored.of(engine(4, 99_000), null, t, BS, "GPU").withGroup(2, null));
    assertThat(view.notPrefixClosed()).contains("kv_cache_spec_kind");
    assertThat(view.open()).isTrue();
  }

  /**
   * SGLang evicts a radix node at once, one BlockRemoved listing its pages head first: parent and child leave in
   * one step, which is not a parent removed first. The same removals one event per block, head first, are.
   */
  @Test
  void pagesRemovedInOneEventAreNotEvidenceButParentsRemovedFirstAre() {
    int chains = 24;
    int blocks = 64;
    long[][] e = new long[chains][];
    int sampled = 0;
    for (int c = 0; c < chains; c++) {
      int[] t = tokens(blocks * BS, 700 + c);
      e[c] = engine(blocks, 100_000L * (c + 1));
      apply(BlockStored.of(e[c], null, t, BS, "GPU"));
      long[] ours = requestHashes(null, null, t);
      for (int b = 1; b < blocks; b++) {
        sampled += (ours[b] & 63) == 0 ? 1 : 0; // the view keeps the parent of one block in 64 (by our hash)
      }
    }
    assertThat(sampled).as("sampled blocks with a parent").isGreaterThan(3);
    // the first half: leaf nodes first (the last 16 pages), then the rest of each chain, each node in one event
    for (int c = 0; c < chains / 2; c++) {
      apply(BlockRemoved.of("GPU", Arrays.copyOfRange(e[c], 48, blocks)));
      apply(BlockRemoved.of("GPU", Arrays.copyOfRange(e[c], 0, 48)));
    }
    assertThat(view.holesSeen()).isZero();
    assertThat(view.notPrefixClosed()).isNull();
    assertThat(view.open()).isFalse();
    // the second half: one block per event, head first
    for (int c = chains / 2; c < chains; c++) {
      for (long b : e[c]) {
        apply(BlockRemoved.of("GPU", b));
      }
    }
    assertThat(view.size()).isZero();
    assertThat(view.notPrefixClosed()).contains("removed a block before one of its children");
  }

  /**
   * An older vLLM put the adapter's integer id in the extra keys, which our hash ignores: one prompt under two
   * adapters is one of our blocks named by two engine hashes. Each handle goes with its own block, not the other's.
   */
  @Test
  void integerLoraIdsNameOneBlockTwiceAndEachHandleGoesWithItsOwn() {
    int[] t = tokens(BS, 9);
    long[] req = requestHashes(null, null, t);
    apply(BlockStored.of(new long[] {700}, null, t, BS, "GPU").withExtraKeys(List.of(List.<Object>of(1L))));
    apply(BlockStored.of(new long[] {800}, null, t, BS, "GPU").withExtraKeys(List.of(List.<Object>of(2L))));
    assertThat(view.handle(700)).isEqualTo(req[0]).isEqualTo(view.handle(800));
    apply(BlockRemoved.of("GPU", 700));
    assertThat(view.hasHandle(700)).as("the engine never names 700 again").isFalse();
    assertThat(matched(req)).isEqualTo(1);
    apply(BlockRemoved.of("GPU", 800));
    assertThat(matched(req)).isZero();
    assertThat(view.size()).isZero();
  }
}
