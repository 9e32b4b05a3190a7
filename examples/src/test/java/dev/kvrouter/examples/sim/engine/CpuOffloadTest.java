package dev.kvrouter.examples.sim.engine;

import static dev.kvrouter.examples.sim.testing.Tokens.concat;
import static dev.kvrouter.examples.sim.testing.Tokens.seq;
import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.sim.clock.VirtualClock;
import dev.kvrouter.examples.sim.testing.RecordingObserver;
import dev.kvrouter.examples.sim.testing.RecordingSink;
import dev.kvrouter.examples.sim.timing.StepWork;
import dev.kvrouter.examples.sim.timing.TimingModel;
import dev.kvrouter.index.block.BlockHasher;
import dev.kvrouter.index.block.CacheNamespace;
import dev.kvrouter.index.wire.BlockRemoved;
import dev.kvrouter.index.wire.BlockStored;
import dev.kvrouter.index.wire.EventBatch;
import dev.kvrouter.index.wire.KvEvent;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The CPU offload tier of the simulated engine, modelled on vLLM's native {@code OffloadingConnector}: store on
 * compute, LRU eviction with CPU events, load instead of recompute with the copy's time, cached tokens as vLLM
 * reports them. Every expectation below is worked by hand from a timing model with round numbers.
 */
class CpuOffloadTest {

  private static final int BS = 4;
  private static final long MS = 1_000_000;
  /** A step costs 1 ms plus 10 us per new token; a copy 1 us per token each way; a token's KV is 100 bytes. */
  private static final TimingModel TIMING = new TimingModel() {
    @Override
    public long stepNanos(StepWork w) {
      return w.newTokens() <= 0 ? 0 : MS + 10_000 * w.newTokens();
    }

    @Override
    public long kvTransferNanos(long tokens) {
      return 1_000 * tokens;
    }

    @Override
    public long kvBytes(long tokens) {
      return 100 * tokens;
    }
  };

  private final VirtualClock clock = new VirtualClock();
  private final RecordingSink sink = new RecordingSink();

  /** 5 usable GPU blocks of 4 tokens and {@code cpuBlocks} CPU blocks. */
  private SimEngine engine(int cpuBlocks) {
    EngineConfig c = EngineConfig.builder("m").blockSize(BS).numGpuBlocks(6).maxNumSeqs(8).maxNumBatchedTokens(64)
        .maxModelLen(64).seed(7).numCpuBlocks(cpuBlocks).build();
    return new SimEngine("w", c, clock, TIMING, sink, OutputTokens.range(1, 9));
  }

  private RecordingObserver run(SimEngine e, long at, String id, int[] prompt) {
    RecordingObserver o = new RecordingObserver();
    clock.schedule(at, () -> e.submitNow(RequestSpec.of(id, prompt, 1), o));
    clock.runUntilIdle(100_000);
    return o;
  }

  private static long[] ids(int[] tokens) {
    return BlockHasher.hashFullBlocks(CacheNamespace.of("m").rootSeed(), tokens, tokens.length, BS);
  }

  private static <T extends KvEvent> List<T> of(EventBatch b, Class<T> type) {
    List<T> out = new ArrayList<>();
    for (KvEvent e : b.events()) {
      if (type.isInstance(e)) {
        out.add(type.cast(e));
      }
    }
    return out;
  }

  private static final int[] A = seq(12, 100);
  private static final int[] B = seq(12, 200);

  @Test
  void blocksAreStoredOnComputeAndAnnouncedWhenTheCopyEnds() {
    SimEngine e = engine(6);
    RecordingObserver a = run(e, 0, "a", A);
    // prefill 12 tokens: 1 ms + 120 us; the 3 full blocks are copied when the step ends (12 us) and only then
    // announced on CPU, in their own batch: no step is running, the engine polls the copy.
    assertThat(a.outcome.ttftNanos()).isEqualTo(MS + 120_000);
    assertThat(sink.batches).hasSize(2);
    BlockStored gpu = of(sink.batches.get(0), BlockStored.class).get(0);
    assertThat(gpu.medium()).isEqualTo("GPU");
    assertThat(gpu.tokenIds()).hasSize(12);
    assertThat(of(sink.batches.get(0), BlockStored.class)).hasSize(1);
    BlockStored cpu = of(sink.batches.get(1), BlockStored.class).get(0);
    assertThat(cpu.medium()).isEqualTo("CPU");
    assertThat(cpu.blockHashes()).containsExactly(gpu.blockHashes());
    // vLLM's default offload payload: no parent, no tokens, block size 0, group 0
    assertThat(cpu.parentBlockHash()).isNull();
    assertThat(cpu.tokenIds()).isEmpty();
    assertThat(cpu.blockSize()).isZero();
    assertThat(cpu.groupIdx()).isZero();
    assertThat(sink.batches.get(1).ts() - sink.batches.get(0).ts()).isCloseTo(12e-6, org.assertj.core.data.Offset.offset(1e-9));

    EngineStats.Offload o = e.statsNow().offload();
    assertThat(o.numCpuBlocks()).isEqualTo(6);
    assertThat(o.cpuCachedBlocks()).isEqualTo(3);
    assertThat(o.storeBytes()).isEqualTo(1200);
    assertThat(o.storeNanos()).isEqualTo(12_000);
    assertThat(o.loadBytes()).isZero();
  }

  @Test
  void aPrefixEvictedFromGpuButHeldOnCpuIsLoadedInsteadOfRecomputed() {
    SimEngine e = engine(6);
    run(e, 0, "a", A);
    run(e, 10 * MS, "b", B); // takes GPU blocks 4, 5, 3: evicts a's third block; a0, a1 stay on GPU
    sink.batches.clear();

    int[] a2 = concat(A, seq(4, 900)); // 16 tokens: a0 a1 on GPU, a2 on CPU, the last block new
    RecordingObserver o = run(e, 20 * MS, "a2", a2);
    // GPU hit 2 blocks; CPU hit 1 block = 4 tokens, copied in 4 us; then the last 4 tokens are prefilled.
    assertThat(o.outcome.cachedTokens()).isEqualTo(12);
    assertThat(o.outcome.ttftNanos()).isEqualTo(4_000 + MS + 40_000);
    // recomputing a2 instead takes 1 ms + 8 x 10 us (see withoutACpuTierNothingIsOffloaded): 36 us more

    long[] id = ids(a2);
    KvBlockPool pool = e.coreForTests().pool();
    // the loaded blocks are cached on GPU when the copy ends, with their tokens and parent (a GPU store event)
    BlockStored loaded = null;
    for (EventBatch batch : sink.batches) {
      for (BlockStored st : of(batch, BlockStored.class)) {
        if (loaded == null && "GPU".equals(st.medium())) {
          loaded = st;
        }
      }
    }
    assertThat(loaded).isNotNull();
    assertThat(loaded.medium()).isEqualTo("GPU");
    assertThat(loaded.blockHashes()).containsExactly(pool.engineHash(id[2]));
    assertThat(loaded.parentBlockHash()).isEqualTo(pool.engineHash(id[1]));
    assertThat(loaded.tokenIds()).containsExactly(java.util.Arrays.copyOfRange(a2, 8, 12));

    EngineStats s = e.statsNow();
    assertThat(s.offload().externalHitTokens()).isEqualTo(4);
    assertThat(s.offload().externalQueryTokens()).isEqualTo(12 + 12 + 16);
    assertThat(s.offload().loadBytes()).isEqualTo(400);
    assertThat(s.offload().loadNanos()).isEqualTo(4_000);
    assertThat(s.prefixHitTokens()).isEqualTo(8); // vllm:prefix_cache_hits counts the GPU part only
    assertThat(s.cachedPromptTokens()).isEqualTo(12); // cached_tokens: GPU and CPU
  }

  @Test
  void theWholePromptOnCpuIsReportedAsPromptMinusOneCachedTokens() {
    SimEngine e = engine(9); // room for a, b and c on CPU
    run(e, 0, "a", A);
    run(e, 10 * MS, "b", B);
    run(e, 20 * MS, "c", seq(12, 300)); // GPU now holds none of a's blocks
    RecordingObserver o = run(e, 30 * MS, "a-again", A);
    // all 3 blocks come from CPU (12 us); vLLM recomputes the last token: cached 11, prefill 1 token
    assertThat(o.outcome.cachedTokens()).isEqualTo(11);
    assertThat(o.outcome.ttftNanos()).isEqualTo(12_000 + MS + 10_000);
  }

  @Test
  void theCpuTierEvictsItsLeastRecentlyUsedBlockWithABlockRemovedOnCpu() {
    SimEngine e = engine(6);
    run(e, 0, "a", A); // CPU, least to most recent: a2 a1 a0 (a store touches its request's blocks in reverse)
    run(e, 10 * MS, "b", B); // a2 a1 a0 b2 b1 b0: full
    long[] b = ids(B);
    CpuOffloadManager cpu = e.coreForTests().offload();
    long[] a = ids(A);
    assertThat(cpu.lruOrder()).containsExactly(a[2], a[1], a[0], b[2], b[1], b[0]);
    sink.batches.clear();

    RecordingObserver o = run(e, 20 * MS, "a2", concat(A, seq(4, 900)));
    // its lookup touched a: b2 b1 b0 a2 a1 a0; storing its 4th block evicts b2, the least recently used
    KvBlockPool pool = e.coreForTests().pool();
    List<BlockRemoved> cpuRemoved = new ArrayList<>();
    for (EventBatch batch : sink.batches) {
      for (BlockRemoved r : of(batch, BlockRemoved.class)) {
        if ("CPU".equals(r.medium())) {
          cpuRemoved.add(r);
        }
      }
    }
    assertThat(cpuRemoved).hasSize(1);
    assertThat(cpuRemoved.get(0).blockHashes()).containsExactly(pool.engineHash(b[2]));
    long a3 = ids(concat(A, seq(4, 900)))[3];
    assertThat(cpu.lruOrder()).containsExactly(b[1], b[0], a3, a[2], a[1], a[0]);
    assertThat(o.outcome.cachedTokens()).isEqualTo(12);
    assertThat(e.statsNow().offload().evictions()).isEqualTo(1);
  }

  @Test
  void aStoreThatFindsNoEvictableBlockStoresNothingAndRetriesLater() {
    CpuOffloadManager cpu = new CpuOffloadManager(2);
    assertThat(cpu.prepareStore(new long[] {1, 2}, new long[] {11, 12})).containsExactly(0, 1);
    // both still being copied: not ready, not evictable
    assertThat(cpu.lookup(new long[] {1, 2}, 0, 2)).isZero();
    assertThat(cpu.prepareStore(new long[] {3}, new long[] {13})).isNull();
    cpu.completeStore(new long[] {1, 2});
    assertThat(cpu.lookup(new long[] {1, 2}, 0, 2)).isEqualTo(2);
    cpu.prepareLoad(new long[] {1, 2}, 0, 2); // being loaded: not evictable either
    assertThat(cpu.prepareStore(new long[] {3}, new long[] {13})).isNull();
    cpu.completeLoad(new long[] {1, 2}, 0, 1);
    assertThat(cpu.prepareStore(new long[] {3}, new long[] {13})).containsExactly(0);
    assertThat(cpu.contains(1)).isFalse();
    List<KvEvent> ev = cpu.takeEvents();
    assertThat(ev).hasSize(2);
    assertThat(((BlockStored) ev.get(0)).blockHashes()).containsExactly(11, 12);
    assertThat(((BlockRemoved) ev.get(1)).blockHashes()).containsExactly(11);
    assertThat(((BlockRemoved) ev.get(1)).medium()).isEqualTo("CPU");
  }

  @Test
  void withoutACpuTierNothingIsOffloaded() {
    SimEngine e = engine(0);
    run(e, 0, "a", A);
    run(e, 10 * MS, "b", B);
    RecordingObserver o = run(e, 20 * MS, "a2", concat(A, seq(4, 900)));
    assertThat(o.outcome.cachedTokens()).isEqualTo(8); // a0 a1 only: a2 was evicted and is recomputed
    assertThat(o.outcome.ttftNanos()).isEqualTo(MS + 80_000);
    for (KvEvent ev : sink.events()) {
      if (ev instanceof BlockStored s) {
        assertThat(s.medium()).isEqualTo("GPU");
      }
    }
    assertThat(e.statsNow().offload()).isEqualTo(EngineStats.Offload.NONE);
  }
}
