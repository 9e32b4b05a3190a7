package dev.kvrouter.examples.workload;

import static dev.kvrouter.examples.sim.testing.Tokens.concat;
import static dev.kvrouter.examples.sim.testing.Tokens.seq;
import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.engine.EngineCore;
import dev.kvrouter.examples.sim.engine.OutputTokens;
import dev.kvrouter.examples.sim.engine.RequestSpec;
import dev.kvrouter.examples.sim.engine.ScheduledStep;
import dev.kvrouter.examples.sim.testing.RecordingObserver;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class IdealReuseTest {

  private static IdealReuse of(int blockSize, int[]... prompts) {
    return bounded(blockSize, Long.MAX_VALUE, prompts);
  }

  private static IdealReuse bounded(int blockSize, long capacity, int[]... prompts) {
    List<WorkloadRequest> reqs = new ArrayList<>();
    for (int i = 0; i < prompts.length; i++) {
      reqs.add(new WorkloadRequest(i, "r" + i, i, null, Prompt.tokens(List.of(new Segment(i, 0))), 1));
    }
    return IdealReuse.compute(reqs, r -> PromptIds.text(prompts[r.index()]), null, blockSize, capacity);
  }

  @Test
  void aFiniteCacheEvictsAChainFromItsTailAsVllmDoes() {
    int[] a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    int[] b = {11, 12, 13, 14, 15, 16, 17, 18, 19};
    // infinite: the second a hits both its full blocks (2 x 4 tokens, the last token rule allows 2)
    assertThat(bounded(4, Long.MAX_VALUE, a, b, a).reusedBlocks()).isEqualTo(2);
    // room for 3 blocks: b's two blocks push out a's last block, freed first; a's root is still there
    assertThat(bounded(4, 3, a, b, a).reusedBlocks()).isEqualTo(1);
    // room for 4: both prompts fit
    assertThat(bounded(4, 4, a, b, a).reusedBlocks()).isEqualTo(2);
    // a, a, b, a with room for 3: the second a hits both blocks and frees them again, tail first; b then pushes
    // out a's tail, so the last a hits its root
    IdealReuse r = bounded(4, 3, a, a, b, a);
    assertThat(r.reusedBlocks()).isEqualTo(3);
    assertThat(r.uniqueBlocks()).as("blocks inserted, a's tail twice").isEqualTo(5);
  }

  /**
   * The fleet cache is published as a bound on what engines of the same total size can serve, so it must keep what
   * vLLM keeps: one engine serving requests one after another, with the cache's block count plus vLLM's null
   * block, serves exactly as much. Prompts are whole blocks ending in a block of their own, so neither the engine's
   * block for a partial tail nor its recomputed last block (a fully cached prompt) takes room the ideal does not.
   */
  @Test
  void oneEngineServesWhatTheFleetCacheOfItsSizeServes() {
    int b = 4;
    int capacity = 12;
    java.util.Random rnd = new java.util.Random(5);
    int[][] docs = new int[4][];
    for (int d = 0; d < docs.length; d++) {
      docs[d] = seq(b * (3 + d), 1000 * (d + 1));
    }
    List<int[]> prompts = new ArrayList<>();
    for (int i = 0; i < 60; i++) {
      int[] doc = docs[rnd.nextInt(docs.length)];
      int shared = b * (1 + rnd.nextInt(doc.length / b));
      prompts.add(concat(java.util.Arrays.copyOf(doc, shared), seq(b, 100_000 + 100 * i)));
    }

    EngineConfig config = EngineConfig.builder("m").blockSize(b).numGpuBlocks(capacity + 1)
        .maxNumBatchedTokens(256).maxNumSeqs(8).maxModelLen(1024).build();
    EngineCore core = EngineCore.create(config, 7L, OutputTokens.range(100, 50));
    long now = 0;
    for (int i = 0; i < prompts.size(); i++) {
      assertThat(core.add(new RequestSpec("r" + i, prompts.get(i), 1, null, null, i), new RecordingObserver(), now))
          .isTrue();
      while (core.hasWork()) {
        ScheduledStep step = core.schedule(now);
        now += 1_000_000;
        core.complete(step, 1_000_000, now);
      }
    }
    int[][] all = prompts.toArray(new int[0][]);
    IdealReuse fleet = bounded(b, capacity, all);
    assertThat(core.stats().cachedPromptTokens()).isPositive();
    assertThat(fleet.cacheableHitTokens()).as("tokens the fleet cache serves, against the engine of its size")
        .isEqualTo(core.stats().cachedPromptTokens());
    assertThat(fleet.cacheableHitTokens()).isLessThan(of(b, all).cacheableHitTokens());
  }

  @Test
  void handWorkedExampleWithTheLastTokenRule() {
    int[] ten = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    int[] eight = {1, 2, 3, 4, 5, 6, 7, 8};
    int[] forked = {1, 2, 3, 4, 99, 98, 97, 96};
    IdealReuse r = of(4, ten, ten, eight, forked);
    // ten:    2 full blocks, nothing seen
    // ten:    2 seen; (10-1)/4 = 2 cacheable -> 8 tokens
    // eight:  2 seen; (8-1)/4 = 1 cacheable (the last token is always computed) -> 4 tokens
    // forked: block 0 seen, block 1 new -> 4 tokens
    assertThat(r).isEqualTo(new IdealReuse(4, 4, 36, 8, 5, 16, 3));
    assertThat(r.blockShare()).isEqualTo(5 / 8.0);
    assertThat(r.tokenShare()).isEqualTo(16 / 36.0);
  }

  @Test
  void identityIsThePrefixNotTheBlockContent() {
    // the second prompt's second block has the first prompt's first block as content, after another prefix
    IdealReuse r = of(4, new int[] {1, 2, 3, 4}, new int[] {5, 6, 7, 8, 1, 2, 3, 4});
    assertThat(r.reusedBlocks()).isZero();
    assertThat(r.uniqueBlocks()).isEqualTo(3);
  }

  @Test
  void partialBlocksAreNeverCached() {
    IdealReuse r = of(16, new int[15], new int[15]);
    assertThat(r.fullBlocks()).isZero();
    assertThat(r.tokenShare()).isZero();
    assertThat(r.blockShare()).isZero();
  }

  @Test
  void sharedPrefixWorkloadByHand() {
    // 10 requests of 64 tokens, one 32-token prefix (2 blocks of 16), 32 unique tokens each
    Workload w = WorkloadCatalog.create("system-prompt:count=10,prompt=64,sharing=0.5,prefixes=1,format=tokens");
    IdealReuse r = w.idealReuse(16);
    assertThat(r.promptTokens()).isEqualTo(640);
    assertThat(r.fullBlocks()).isEqualTo(40);
    assertThat(r.reusedBlocks()).isEqualTo(18);
    assertThat(r.cacheableHitTokens()).isEqualTo(9 * 32);
    assertThat(r.uniqueBlocks()).isEqualTo(2 + 10 * 2);
    assertThat(w.idealReuse(16)).isSameAs(r);
  }

  @Test
  void bestOfNByHand() {
    // 3 groups of 4 identical 64-token prompts at block 16: the first of each group misses, the other three hit
    // all 4 blocks, of which (64-1)/16 = 3 are servable
    IdealReuse r = WorkloadCatalog.create("best-of-n:groups=3,n=4,prompt=64").idealReuse(16);
    assertThat(r.reusedBlocks()).isEqualTo(3 * 3 * 4);
    assertThat(r.fullBlocks()).isEqualTo(12 * 4);
    assertThat(r.cacheableHitTokens()).isEqualTo(3 * 3 * 48);
    assertThat(r.tokenShare()).isEqualTo(432 / 768.0);
  }

  @Test
  void theNoSharingControlOffersNothing() {
    IdealReuse r = WorkloadCatalog.create("unique:count=100").idealReuse(16);
    assertThat(r.reusedBlocks()).isZero();
    assertThat(r.fullBlocks()).isGreaterThan(100);
  }

  @Test
  void sharingKnobMovesTheIdealReuse() {
    double previous = -1;
    for (String s : List.of("0", "0.3", "0.6", "0.9")) {
      double ideal = WorkloadCatalog.create("system-prompt:count=200,prompt=1024,prefixes=4,format=tokens,sharing=" + s)
          .idealReuse(16).tokenShare();
      // each prompt shares sharing * 1024 tokens with its group, minus the 4 first sightings
      double expected = Math.floor(Double.parseDouble(s) * 1024 / 16) * 16 / 1024 * (200 - 4) / 200;
      assertThat(ideal).isCloseTo(expected, org.assertj.core.data.Offset.offset(1e-9));
      assertThat(ideal).isGreaterThan(previous);
      previous = ideal;
    }
  }

  @Test
  void longHashSetHoldsWhatItWasGiven() {
    LongHashSet s = new LongHashSet(4);
    for (long v = -500; v <= 500; v++) {
      assertThat(s.add(v * 7919)).isTrue();
    }
    assertThat(s.add(0)).isFalse();
    assertThat(s.size()).isEqualTo(1001);
    for (long v = -500; v <= 500; v++) {
      assertThat(s.contains(v * 7919)).isTrue();
      assertThat(s.contains(v * 7919 + 1)).isFalse();
    }
  }
}
