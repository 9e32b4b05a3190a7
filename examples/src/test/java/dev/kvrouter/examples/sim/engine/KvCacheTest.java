package dev.kvrouter.examples.sim.engine;

import static dev.kvrouter.examples.sim.testing.Tokens.concat;
import static dev.kvrouter.examples.sim.testing.Tokens.seq;
import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.index.wire.AllBlocksCleared;
import dev.kvrouter.index.wire.BlockRemoved;
import dev.kvrouter.index.wire.BlockStored;
import dev.kvrouter.index.wire.KvEvent;
import dev.kvrouter.examples.sim.testing.RecordingObserver;
import dev.kvrouter.index.block.BlockHasher;
import dev.kvrouter.index.block.CacheNamespace;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The paged prefix cache: hits, reference counts, vLLM's eviction order and the events it emits. */
class KvCacheTest {

  private static final int BS = 4;
  private static final String MODEL = "m";

  private final KvBlockPool pool = new KvBlockPool(8, 1234L, true); // 7 usable blocks
  private final KvCacheManager cache = new KvCacheManager(pool, BS, 1024, true);

  private static EngineRequest req(String id, int[] tokens, String adapter, String salt) {
    RequestSpec spec = new RequestSpec(id, tokens, 4, adapter, salt, 0);
    long root = new CacheNamespace(MODEL, adapter, salt).rootSeed();
    return new EngineRequest(spec, root, BS, new RecordingObserver(), 0);
  }

  private static EngineRequest req(String id, int[] tokens) {
    return req(id, tokens, null, null);
  }

  /** Admits a request the way the scheduler does: cached prefix first, then the rest of its tokens. */
  private boolean admit(EngineRequest r) {
    int[] hits = cache.computedBlocks(r);
    int computed = hits.length * BS;
    boolean ok = cache.allocateSlots(r, r.numTokens - computed, hits);
    if (ok) {
      r.numComputedTokens = r.numTokens;
      r.numCachedTokens = computed;
    }
    pool.checkInvariants();
    return ok;
  }

  @Test
  void repeatedPromptHitsAllFullBlocksButTheOneHoldingTheLastToken() {
    int[] prompt = seq(20, 1); // 5 full blocks
    EngineRequest a = req("a", prompt);
    assertThat(admit(a)).isTrue();
    assertThat(a.numCachedTokens).isZero();
    cache.free(a);

    EngineRequest b = req("b", prompt);
    assertThat(admit(b)).isTrue();
    // vLLM never serves the last prompt token from cache: the block holding it (block 4) is recomputed.
    assertThat(b.numCachedTokens).isEqualTo(16);

    EngineRequest c = req("c", concat(prompt, seq(3, 500)));
    cache.free(b);
    assertThat(admit(c)).isTrue();
    assertThat(c.numCachedTokens).isEqualTo(20);
  }

  @Test
  void blockIdentityIsTheRoutersBlockHasherChain() {
    int[] prompt = seq(12, 3);
    EngineRequest a = req("a", prompt);
    admit(a);
    long[] expected = BlockHasher.hashFullBlocks(CacheNamespace.of(MODEL).rootSeed(), prompt, 12, BS);
    for (int i = 0; i < 3; i++) {
      assertThat(pool.identityOf(a.blocks[i])).isEqualTo(expected[i]);
      assertThat(pool.lookup(expected[i])).isEqualTo(a.blocks[i]);
    }
  }

  @Test
  void namespacesNeverShareBlocks() {
    int[] prompt = seq(12, 3);
    EngineRequest base = req("base", prompt);
    admit(base);
    cache.free(base);
    assertThat(cache.computedBlocks(req("salted", prompt, null, "tenant-1"))).isEmpty();
    assertThat(cache.computedBlocks(req("lora", prompt, "lora-a", null))).isEmpty();
    assertThat(cache.computedBlocks(req("again", prompt))).hasSize(2);
  }

  @Test
  void engineHashesAreAPerProcessHandleNotTheIdentity() {
    int[] prompt = seq(8, 3);
    EngineRequest a = req("a", prompt);
    admit(a);
    BlockStored stored = (BlockStored) pool.takeEvents().get(0);
    long[] identity = BlockHasher.hashFullBlocks(CacheNamespace.of(MODEL).rootSeed(), prompt, 8, BS);
    assertThat(stored.blockHashes()).doesNotContain(identity[0], identity[1]);

    KvBlockPool sameSeed = new KvBlockPool(8, 1234L, true);
    KvBlockPool otherSeed = new KvBlockPool(8, 99L, true);
    assertThat(sameSeed.engineHash(identity[0])).isEqualTo(stored.blockHashes()[0]);
    assertThat(otherSeed.engineHash(identity[0])).isNotEqualTo(stored.blockHashes()[0]);
  }

  @Test
  void blockStoredCarriesTokensParentLoraAndExtraKeys() {
    int[] prompt = seq(16, 9);
    EngineRequest r = req("r", prompt, "lora-a", "salt-1");
    // Two chunks of 8 tokens: two BlockStored events, the second chained to the first by its parent.
    assertThat(cache.allocateSlots(r, 8, new int[0])).isTrue();
    r.numComputedTokens = 8;
    assertThat(cache.allocateSlots(r, 8, new int[0])).isTrue();
    List<KvEvent> events = pool.takeEvents();
    assertThat(events).hasSize(2);
    BlockStored first = (BlockStored) events.get(0);
    BlockStored second = (BlockStored) events.get(1);

    assertThat(first.parentBlockHash()).isNull();
    assertThat(first.tokenIds()).containsExactly(Arrays.copyOfRange(prompt, 0, 8));
    assertThat(first.blockSize()).isEqualTo(BS);
    assertThat(first.medium()).isEqualTo("GPU");
    assertThat(first.loraName()).isEqualTo("lora-a");
    assertThat(first.cacheSalt()).isEqualTo("salt-1");
    assertThat(first.groupIdx()).isZero();
    assertThat(first.kvCacheSpecKind()).isEqualTo("full_attention");
    assertThat(first.extraKeys()).containsExactly(List.<Object>of("lora-a", "salt-1"), List.<Object>of("lora-a"));

    assertThat(second.parentBlockHash()).isEqualTo(first.blockHashes()[1]);
    assertThat(second.tokenIds()).containsExactly(Arrays.copyOfRange(prompt, 8, 16));
    assertThat(second.extraKeys()).containsExactly(List.<Object>of("lora-a"), List.<Object>of("lora-a"));
  }

  @Test
  void baseModelBlocksHaveNoExtraKeys() {
    EngineRequest r = req("r", seq(8, 1));
    admit(r);
    BlockStored stored = (BlockStored) pool.takeEvents().get(0);
    assertThat(stored.extraKeys()).isNull();
    assertThat(stored.loraName()).isNull();
  }

  @Test
  void sharedBlocksAreReferenceCountedAndOnlyFreedWhenNobodyHoldsThem() {
    int[] prompt = seq(12, 1);
    EngineRequest a = req("a", concat(prompt, seq(1, 900)));
    EngineRequest b = req("b", concat(prompt, seq(1, 901)));
    admit(a);
    admit(b);
    int shared = a.blocks[0];
    assertThat(b.blocks[0]).isEqualTo(shared);
    assertThat(pool.refCnt(shared)).isEqualTo(2);
    cache.free(a);
    assertThat(pool.refCnt(shared)).isEqualTo(1);
    assertThat(pool.freeQueue()).doesNotContain(shared);
    cache.free(b);
    assertThat(pool.refCnt(shared)).isZero();
    assertThat(pool.freeQueue()).contains(shared);
    pool.checkInvariants();
  }

  @Test
  void aHitOnAFreeBlockTakesItOutOfTheFreeQueue() {
    int[] prompt = seq(12, 1);
    EngineRequest a = req("a", prompt);
    admit(a);
    cache.free(a);
    int free = pool.freeCount();
    EngineRequest b = req("b", prompt);
    admit(b); // hits blocks 0 and 1, recomputes block 2 into a fresh block
    assertThat(pool.refCnt(a.blocks[0])).isEqualTo(1);
    assertThat(pool.freeQueue()).doesNotContain(b.blocks[0], b.blocks[1]);
    assertThat(pool.freeCount()).isEqualTo(free - 3);
  }

  @Test
  void freedRequestsAreEvictedTailFirstInLeastRecentlyFreedOrder() {
    EngineRequest a = req("a", seq(12, 1)); // blocks a0 a1 a2
    admit(a);
    int[] aBlocks = Arrays.copyOf(a.blocks, 3);
    EngineRequest b = req("b", seq(8, 1000)); // blocks b0 b1
    admit(b);
    int[] bBlocks = Arrays.copyOf(b.blocks, 2);
    cache.free(a); // queue tail: a2 a1 a0
    cache.free(b); // then b1 b0
    pool.takeEvents();
    // Free queue: the 2 never-used blocks, then a's blocks tail first, then b's.
    int[] queue = pool.freeQueue();
    assertThat(Arrays.copyOfRange(queue, 2, 7)).containsExactly(aBlocks[2], aBlocks[1], aBlocks[0], bBlocks[1],
        bBlocks[0]);

    EngineRequest c = req("c", seq(12, 5000)); // needs 3 blocks: the 2 unused and a2
    admit(c);
    List<KvEvent> events = pool.takeEvents();
    List<BlockRemoved> removed = events.stream().filter(e -> e instanceof BlockRemoved)
        .map(e -> (BlockRemoved) e).toList();
    assertThat(removed).hasSize(1);
    assertThat(removed.get(0).blockHashes()).containsExactly(pool.engineHash(a.blockHash(2)));
    assertThat(removed.get(0).medium()).isEqualTo("GPU");
    // a's head survives: a new request with a's prompt still hits a0 and a1.
    assertThat(cache.computedBlocks(req("a2", concat(seq(12, 1), seq(1, 7))))).hasSize(2);
  }

  @Test
  void referencedBlocksAreNeverEvictedAndCapacityIsNeverExceeded() {
    EngineRequest a = req("a", seq(20, 1)); // 5 of 7 blocks
    admit(a);
    pool.takeEvents();
    EngineRequest b = req("b", seq(12, 3000)); // needs 3, only 2 free
    assertThat(admit(b)).isFalse();
    assertThat(b.numBlocks).isZero();
    assertThat(pool.freeCount()).isEqualTo(2);
    assertThat(pool.takeEvents()).isEmpty();
    for (int i = 0; i < 5; i++) {
      assertThat(pool.refCnt(a.blocks[i])).isEqualTo(1);
      assertThat(pool.isCached(a.blocks[i])).isTrue();
    }
  }

  @Test
  void resetPrefixCacheClearsOnlyWhenNothingIsReferenced() {
    EngineRequest a = req("a", seq(8, 1));
    admit(a);
    pool.takeEvents();
    assertThat(pool.resetPrefixCache()).isFalse();
    cache.free(a);
    assertThat(pool.resetPrefixCache()).isTrue();
    assertThat(pool.takeEvents()).containsExactly(AllBlocksCleared.INSTANCE);
    assertThat(cache.computedBlocks(req("b", seq(12, 1)))).isEmpty();
    pool.checkInvariants();
  }

  @Test
  void duplicateBlocksComputedConcurrentlyAreBothIndexedAndEvictedSeparately() {
    // Both requests miss (b is admitted before a caches anything beyond its first chunk), so block 0 of each
    // is computed twice with the same identity, as happens in vLLM under chunked prefill.
    int[] prompt = seq(8, 1);
    EngineRequest a = req("a", prompt);
    EngineRequest b = req("b", prompt);
    assertThat(cache.allocateSlots(a, 3, new int[0])).isTrue(); // no full block yet
    a.numComputedTokens = 3;
    assertThat(cache.allocateSlots(b, 8, cache.computedBlocks(b))).isTrue();
    b.numComputedTokens = 8;
    assertThat(cache.allocateSlots(a, 5, new int[0])).isTrue();
    List<BlockStored> stored = pool.takeEvents().stream().map(e -> (BlockStored) e).toList();
    assertThat(stored).hasSize(2);
    assertThat(stored.get(0).blockHashes()).containsExactly(stored.get(1).blockHashes());
    assertThat(a.blocks[0]).isNotEqualTo(b.blocks[0]);
    pool.checkInvariants();
    cache.free(a);
    cache.free(b);
    pool.checkInvariants();
  }
}
