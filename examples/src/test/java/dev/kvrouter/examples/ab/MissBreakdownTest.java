package dev.kvrouter.examples.ab;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.ab.MissBreakdown.Miss;
import dev.kvrouter.examples.workload.IdealReuse;
import dev.kvrouter.examples.workload.PromptIds;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import dev.kvrouter.index.block.BlockHasher;
import dev.kvrouter.index.block.CacheNamespace;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.LongConsumer;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/**
 * The miss breakdown on a hand-built fleet, where every block's class follows from the definitions, and on a real
 * virtual run, where its totals must agree with the engines' own counters and with the fleet-LRU ideal.
 */
class MissBreakdownTest {

  private static final int B = 4;
  private static final long ROOT = 77;

  /** Worker caches as sets of identities; a lead is the run of a prompt's identities a worker holds. */
  private static final class HandFleet implements MissBreakdown.Fleet {
    final List<Set<Long>> caches = new ArrayList<>();
    final long capacity;

    HandFleet(int workers, long capacity) {
      for (int i = 0; i < workers; i++) {
        caches.add(new HashSet<>());
      }
      this.capacity = capacity;
    }

    void hold(int w, long[] ids, int n) {
      for (int i = 0; i < n; i++) {
        caches.get(w).add(ids[i]);
      }
    }

    @Override
    public int workers() {
      return caches.size();
    }

    @Override
    public int cachedLead(int w, long[] ids, int n) {
      int i = 0;
      while (i < n && caches.get(w).contains(ids[i])) {
        i++;
      }
      return i;
    }

    @Override
    public void forEachCached(int w, LongConsumer sink) {
      caches.get(w).forEach(sink::accept);
    }

    @Override
    public long capacityBlocks() {
      return capacity;
    }
  }

  private static int[] tokens(int n) {
    return IntStream.range(0, n).map(i -> 1000 + i).toArray();
  }

  private static long[] ids(int[] t) {
    return BlockHasher.hashFullBlocks(ROOT, t, t.length, B);
  }

  @Test
  void classifiesEveryMissedBlockOfAHandBuiltFleet() {
    // fleet LRU of 7 blocks; A fills 6, B (8 blocks, A's 6 first) ends freeing its last block first, which its
    // others then push out (vLLM's order): C finds B's first 7 there, not its 8th
    MissBreakdown m = new MissBreakdown(ROOT, B, 7);
    HandFleet fleet = new HandFleet(3, 2);
    int[] a = tokens(6 * B + 1); // 6 cacheable blocks
    int[] b = tokens(8 * B + 1); // A's 6 blocks then 2 new: 8 cacheable
    long[] idsB = ids(b);

    MissBreakdown.Pending pa = m.decided(PromptIds.text(a), null, 0, new int[3], 0, fleet);
    m.admitted(pa, 0);
    assertThat(m.missed(Miss.COLD, false)).isEqualTo(6);

    // at B's decision: w0 holds 2 blocks of it, w1 holds 5 (the router knows of 3 there), w2 none; the router
    // predicts 3 on w0, which it chose; by admission w0 has lost its second block
    fleet.hold(0, idsB, 2);
    fleet.hold(1, idsB, 5);
    MissBreakdown.Pending pb = m.decided(PromptIds.text(b), null, 0, new int[] {3, 3, 0}, 3, fleet);
    // C, the same prompt, is decided before B is admitted: B's two new blocks are seen but not computed yet
    MissBreakdown.Pending pc = m.decided(PromptIds.text(b), null, 2, new int[3], 0, new HandFleet(3, 2));
    m.admitted(pb, 1);
    m.admitted(pc, 0);

    // B: block 0 hit; 1 lost while queued; 2 elsewhere, known; 3-4 elsewhere, unknown; 5 evicted; 6-7 cold
    // C: blocks 0-5 evicted (A computed them), 6-7 pending (only B, not yet admitted then, carried them); the fleet
    // LRU held all but block 7
    assertThat(m.hits()).isEqualTo(1);
    assertThat(m.missed(Miss.LOST_WHILE_QUEUED, true)).isEqualTo(1);
    assertThat(m.missed(Miss.ELSEWHERE_KNOWN, true)).isEqualTo(1);
    assertThat(m.missed(Miss.ELSEWHERE_UNKNOWN, true)).isEqualTo(2);
    assertThat(m.missed(Miss.EVICTED, true)).isEqualTo(1 + 6); // B's block 5 and C's 0-5: the fleet LRU held them
    assertThat(m.missed(Miss.EVICTED, false)).isZero();
    assertThat(m.missed(Miss.PENDING, true)).isEqualTo(1);
    assertThat(m.missed(Miss.PENDING, false)).isEqualTo(1);
    assertThat(m.missed(Miss.COLD, false)).isEqualTo(6 + 2);
    assertThat(m.missed(Miss.COLD, true)).isZero();
    assertThat(m.hitsBeyondFleetLru()).isZero();
    assertThat(m.routerOver()).isEqualTo(1); // predicted 3 on w0, which held 2
    assertThat(m.routerUnder()).isZero();
    assertThat(m.gainedWhileQueued()).isZero();

    Map<String, Object> json = m.toJson();
    // the fleet-LRU ideal served B's 6 leading blocks and C's 7; we served 1 of them: the gap is the other 12
    long promptTokens = a.length + 2L * b.length;
    assertThat(json.get("gapToFleetLruShare")).isEqualTo(Math.round(12.0 * B / promptTokens * 10000) / 10000.0);
    assertThat(json.get("requests")).isEqualTo(3L);
  }

  @Test
  void aRefusedRequestFeedsTheIdealsButIsNotClassified() {
    MissBreakdown m = new MissBreakdown(ROOT, B, 100);
    HandFleet fleet = new HandFleet(2, 10);
    int[] a = tokens(3 * B + 1);
    assertThat(m.decided(PromptIds.text(a), null, -1, new int[2], 0, fleet)).isNull();
    MissBreakdown.Pending p = m.decided(PromptIds.text(a), null, 1, new int[2], 0, fleet);
    m.admitted(p, 0);
    // seen before (by the refused one) but never computed: pending, and the fleet LRU would have held them
    assertThat(m.missed(Miss.PENDING, true)).isEqualTo(3);
    assertThat(m.toJson().get("requests")).isEqualTo(1L);
  }

  @Test
  void duplicationCountsOnlyAFullFleet() {
    MissBreakdown m = new MissBreakdown(ROOT, B, 6);
    HandFleet fleet = new HandFleet(2, 3);
    long[] x = ids(tokens(3 * B));
    fleet.hold(0, x, 2);
    m.sample(fleet); // 2 of 6 blocks cached: not full, not counted
    assertThat(m.toJson().get("fullFleetSamples")).isEqualTo(0L);
    fleet.hold(0, x, 3);
    fleet.hold(1, x, 3);
    m.sample(fleet); // 6 cached, 3 distinct
    assertThat(m.toJson().get("fullFleetSamples")).isEqualTo(1L);
    assertThat(m.toJson().get("duplicateShare")).isEqualTo(0.5);
  }

  @Test
  void onARealRunTheBreakdownAddsUpToTheEnginesAndTheFleetIdeal() {
    // a fleet too small for the workload's prefixes, so every class but pending shows up
    VirtualSetup setup = VirtualSetup.defaults().withWorkers(4).withNumGpuBlocks(600);
    Workload w = WorkloadCatalog.create("system-prompt:format=tokens,count=300,rate=40,prompt=1024,sharing=0.8,"
        + "prefixes=48,output=16,seed=3");
    long fleetBlocks = 4L * 600;
    IdealReuse bounded = IdealReuse.compute(w.requests(), w::promptIds, w::answerTokens, 16, fleetBlocks);
    for (String policy : List.of("kv_aware", "round_robin")) {
      VirtualOutcome o = VirtualRun.run(w, policy, setup, null, null, true);
      Map<String, Object> j = o.missBreakdown();
      long cached = o.data().counters().values().stream().mapToLong(c -> (long) c.simPromptTokensCached()).sum();
      assertThat((long) j.get("hitBlocks") * 16).as(policy).isEqualTo(cached);
      long missed = 0;
      long missedInFleet = 0;
      @SuppressWarnings("unchecked")
      Map<String, Map<String, Object>> classes = (Map<String, Map<String, Object>>) j.get("missed");
      for (Miss c : Miss.values()) {
        missed += (long) classes.get(c.key()).get("blocks");
        missedInFleet += (long) classes.get(c.key()).get("inFleetLruBlocks");
      }
      assertThat(missed + (long) j.get("hitBlocks")).as(policy).isEqualTo(j.get("cacheableBlocks"));
      // the fleet-LRU ideal replayed beside the run is IdealReuse's: its hits = ours inside it + missed inside it
      long fleetHits = (long) j.get("hitBlocks") - (long) j.get("hitBlocksBeyondFleetLru") + missedInFleet;
      assertThat(fleetHits * 16).as(policy).isEqualTo(bounded.cacheableHitTokens());
      assertThat((long) classes.get("evicted").get("blocks")).as(policy).isPositive();
      assertThat((long) classes.get("cold").get("blocks")).as(policy).isPositive();
    }
    // round-robin leaves prefixes on other workers that kv_aware routes to
    Map<String, Object> rr = VirtualRun.run(w, "round_robin", setup, null, null, true).missBreakdown();
    @SuppressWarnings("unchecked")
    Map<String, Map<String, Object>> classes = (Map<String, Map<String, Object>>) rr.get("missed");
    assertThat((long) classes.get("elsewhere_known").get("blocks")).isPositive();
  }

  /**
   * Chat conversations resending the model's answer as text: the ideals beside the run cache the answer as the
   * engine generated it (the text's tokens, the end of turn cut by max_tokens), as VirtualAb's ideal does. With a
   * fleet cache larger than the workload, the shadow fleet-LRU ideal's hits do not depend on how sessions interleave, so they
   * equal IdealReuse's over the same prompts and answers.
   */
  @Test
  void chatAnswersEnterTheIdealsAsTheEngineGeneratedThem() throws Exception {
    VirtualSetup setup = VirtualSetup.defaults().withWorkers(4).withNumGpuBlocks(8192);
    Workload w = WorkloadCatalog.create("multi-turn:format=chat,answers=model,sessions=20,rate=3,turns=3..4,"
        + "think=1,system=100,user=20..40,output=40..60,seed=56");
    try (ChatFront chat = ChatFront.load(setup.model(), dev.kvrouter.examples.sim.testing.Fixtures.tokenizer(
        "llama3_1"), 16, null)) {
      dev.kvrouter.examples.workload.ChatAnswers answers = chat.encoder().chatAnswers(w.tokenSpace());
      // every answer's text fits in max_tokens (only its end of turn is cut), so every prompt is sent as listed: a
      // seed whose answers never open with a word Llama's tokenizer splits in two (most seeds have one or two)
      assertThat(w.requests()).allMatch(r -> answers.tokens(r.answer()).length - 1 <= r.outputTokens());
      IdealReuse ideal = IdealReuse.compute(w.requests(), chat.engineIds(w, setup.model()),
          r -> r.answer() == null ? null : r.generated(answers.tokens(r.answer())), 16, Long.MAX_VALUE);
      Map<String, Object> j = VirtualRun.run(w, "kv_aware", setup, chat, null, true).missBreakdown();
      @SuppressWarnings("unchecked")
      Map<String, Map<String, Object>> classes = (Map<String, Map<String, Object>>) j.get("missed");
      long missedInFleet = 0;
      for (Miss c : Miss.values()) {
        missedInFleet += (long) classes.get(c.key()).get("inFleetLruBlocks");
      }
      long fleetHits = (long) j.get("hitBlocks") - (long) j.get("hitBlocksBeyondFleetLru") + missedInFleet;
      assertThat(fleetHits * 16).isEqualTo(ideal.cacheableHitTokens());
    }
  }

  @Test
  void offRunsCarryNoBreakdown() {
    Workload w = WorkloadCatalog.create("unique:count=10,rate=10,prompt=64,output=4,seed=1");
    assertThat(VirtualRun.run(w, "kv_aware", VirtualSetup.defaults().withWorkers(2).withNumGpuBlocks(512), null)
        .missBreakdown()).isNull();
    assertThat(Arrays.asList(Miss.values())).hasSize(6);
    assertThat(CacheNamespace.of("m").rootSeed()).isNotZero();
  }
}
