package dev.kvrouter.extproc.routing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import dev.kvrouter.extproc.load.WorkerLoad;
import dev.kvrouter.xds.registry.Worker;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Hand-worked cases of the cost model; every expected number is computed in the comment above it. */
class CostModelTest {

  static final int B = 16;

  /** The defaults before the decode-read term: the whole decode weight, 0.5, on held (deduplicated) blocks. */
  /** The defaults with the decode weight on held blocks only, and no idle relief (cases that set it say so). */
  static final Weights MEMORY_ONLY = Weights.DEFAULTS.with("decode_load_scale", 0.5).with("decode_read_weight", 0)
      .with("new_prefill_idle_relief", 0);

  static Worker worker(String name, int weight) {
    return new Worker(name, "10.0.0.1", 8000, "m", List.of(), Worker.Role.BOTH, null, 1, B, weight, null, false,
        Map.of());
  }

  static WorkerLoad load(long prefillTokens, long decodeBlocks, long requests) {
    return load(prefillTokens, decodeBlocks, decodeBlocks, requests);
  }

  static WorkerLoad load(long prefillTokens, long decodeBlocks, long contextBlocks, long requests) {
    return new WorkerLoad(prefillTokens, decodeBlocks, contextBlocks, requests, -1, Double.NaN, false);
  }

  static Candidate cand(String name, Overlap o, WorkerLoad l) {
    return Candidate.of(worker(name, 1), 0, o, l, 0);
  }

  static Overlap gpu(int blocks) {
    return new Overlap(blocks, 0, 0, 0, false);
  }

  /** A prompt of {@code blocks} full blocks, no partial block, no expected output. */
  static RequestShape prompt(int blocks) {
    return RequestShape.of((long) blocks * B, B, blocks, 0);
  }

  @Test
  void dynamosDocumentedThreeWorkerExampleOnTheFormula() {
    // docs: W1 cached 2 of 10 -> prefill 8, decode 10: 1.0 x 8 + 10 = 18; W2 5 + 5 = 10 (chosen); W3 2 + 9 = 11
    Weights w = Weights.DYNAMO;
    assertThat(CostModel.cost(8, 0, 10, 0, 0, w, 1)).isEqualTo(18.0);
    assertThat(CostModel.cost(5, 0, 5, 0, 0, w, 1)).isEqualTo(10.0);
    assertThat(CostModel.cost(2, 0, 9, 0, 0, w, 1)).isEqualTo(11.0);
  }

  /** Dynamo's documented example: 10-block request; 2, 5, 8 blocks cached; 10, 5, 9 active decode blocks. */
  static List<Candidate> dynamosThreeWorkers() {
    return List.of(cand("w1", gpu(2), load(0, 10, 0)), cand("w2", gpu(5), load(0, 5, 0)),
        cand("w3", gpu(8), load(0, 9, 0)));
  }

  @Test
  void theDefaultsChargeTheBlocksARequestRecomputesOnceMore() {
    // Dynamo's example under our defaults: prefill + the same again as new blocks + 0.2 per decode block (0.1 per
    // held block + 0.1 per block read; nothing is shared here, so the two counts are equal):
    // w1 8 + 8 + 4 = 20, w2 5 + 5 + 3 = 13, w3 2 + 2 + 3.8 = 7.8: now w3 wins, the worker that holds the most
    List<Candidate> cs = dynamosThreeWorkers();
    CostModel.score(cs, Weights.DEFAULTS, prompt(10), 0);
    assertThat(cs.get(0).cost()).isCloseTo(20.0, within(1e-9));
    assertThat(cs.get(1).cost()).isCloseTo(13.0, within(1e-9));
    assertThat(cs.get(2).cost()).isCloseTo(7.8, within(1e-9));
    assertThat(new KvAwarePolicy().choose(new Scoring(null, cs, Weights.DEFAULTS, prompt(10), true, new Random(1)))
        .candidate().worker().name()).isEqualTo("w3");
  }

  @Test
  void theQueueWeightRaisesTheRecomputeChargeWithTheFleetsQueuedPrefill() {
    // 10-block prompt; w1 holds 8 and has 80 tokens (5 blocks) queued, w2 holds nothing and none queued.
    // new_prefill_weight 1 + new_prefill_queue_weight 2 x min(1, mean queued 2.5 blocks / 10) = 1.5
    // (decode weight 0.5 on 10 blocks = 5 on both): w1 (5 + 2) + 1.5 x 2 + 5 = 15, w2 10 + 1.5 x 10 + 5 = 30
    Weights w = MEMORY_ONLY.with("new_prefill_queue_weight", 2);
    List<Candidate> cs = List.of(cand("w1", gpu(8), load(80, 0, 0)), cand("w2", gpu(0), load(0, 0, 0)));
    CostModel.score(cs, w, prompt(10), 0);
    assertThat(cs.get(0).cost()).isCloseTo(15.0, within(1e-9));
    assertThat(cs.get(1).cost()).isCloseTo(30.0, within(1e-9));
    // an idle fleet: the plain weight 1 (w1 2 + 2 + 5 = 9, w2 10 + 10 + 5 = 25)
    List<Candidate> idle = List.of(cand("w1", gpu(8), load(0, 0, 0)), cand("w2", gpu(0), load(0, 0, 0)));
    CostModel.score(idle, w, prompt(10), 0);
    assertThat(idle.get(0).cost()).isCloseTo(9.0, within(1e-9));
    assertThat(idle.get(1).cost()).isCloseTo(25.0, within(1e-9));
    // a queue of more than the prompt per worker caps the charge at 1 + 2 = 3: w2 (50 + 10) + 3 x 10 + 5 = 95
    List<Candidate> busy = List.of(cand("w1", gpu(8), load(1600, 0, 0)), cand("w2", gpu(0), load(800, 0, 0)));
    CostModel.score(busy, w, prompt(10), 0);
    assertThat(busy.get(1).cost()).isCloseTo(95.0, within(1e-9));
  }

  /** A 10-block prompt's holder of 8 blocks with 10 blocks of prefill queued (w1), and an idle worker (w2). */
  static List<Candidate> holderAndIdle() {
    return List.of(cand("w1", gpu(8), load(160, 0, 0)), cand("w2", gpu(0), load(0, 0, 0)));
  }

  @Test
  void theEvictionWeightRaisesTheRecomputeChargeOnlyWhileTheFleetEvictsWhatComesBack() {
    // 10-block prompt; w1 holds 8 with 160 tokens (10 blocks) queued, w2 holds nothing, idle. Decode 0.5 x 10 = 5.
    // Without eviction pressure the charge is 1: w1 (10 + 2) + 2 + 5 = 19, w2 10 + 10 + 5 = 25.
    Weights w = MEMORY_ONLY.with("new_prefill_eviction_weight", 2).with("eviction_share_full", 0.05);
    List<Candidate> calm = holderAndIdle();
    CostModel.score(calm, w, prompt(10), 0);
    assertThat(calm.get(0).cost()).isCloseTo(19.0, within(1e-9));
    assertThat(calm.get(1).cost()).isCloseTo(25.0, within(1e-9));
    // Half the full share: 1 + 2 x 0.5 = 2: w1 12 + 4 + 5 = 21, w2 10 + 20 + 5 = 35
    List<Candidate> half = holderAndIdle();
    CostModel.score(half, w, prompt(10), 0.025);
    assertThat(half.get(0).cost()).isCloseTo(21.0, within(1e-9));
    assertThat(half.get(1).cost()).isCloseTo(35.0, within(1e-9));
    // Past the full share it is capped at 1 + 2 = 3: w2 10 + 30 + 5 = 45
    List<Candidate> full = holderAndIdle();
    CostModel.score(full, w, prompt(10), 0.4);
    assertThat(full.get(1).cost()).isCloseTo(45.0, within(1e-9));
    // The weight off (0), any share changes nothing
    List<Candidate> off = holderAndIdle();
    CostModel.score(off, MEMORY_ONLY.with("new_prefill_eviction_weight", 0), prompt(10), 0.4);
    assertThat(off.get(1).cost()).isCloseTo(25.0, within(1e-9));
  }

  @Test
  void aHotPrefixIsChargedItsWaitOnlyFromTwoWorkersShareOfTheRequests() {
    // The prompt of the eviction case above (10 blocks; w1 holds 8 and has 10 blocks queued, w2 holds nothing and
    // is idle), no eviction pressure. The base charge of 1 keeps it on w1: 19 against 25.
    Weights w = MEMORY_ONLY;
    List<Candidate> cold = holderAndIdle();
    CostModel.score(cold, w, prompt(10), 0, 0, 1);
    assertThat(cold.get(0).cost()).isCloseTo(19.0, within(1e-9));
    assertThat(cold.get(1).cost()).isCloseTo(25.0, within(1e-9));
    // Halfway from one worker's share to two (hot excess 0.5): the charge is 0.5, w1 12 + 1 + 5 = 18, w2 10 + 5 + 5
    List<Candidate> warm = holderAndIdle();
    CostModel.score(warm, w, prompt(10), 0, 0.5, 1);
    assertThat(warm.get(0).cost()).isCloseTo(18.0, within(1e-9));
    assertThat(warm.get(1).cost()).isCloseTo(20.0, within(1e-9));
    // Two workers' share or more (excess 1, and anything above is capped): its wait only, w1 12 + 5 = 17 against
    // w2 10 + 5 = 15: the copy on the idle worker now comes first
    for (double excess : new double[] {1, 3}) {
      List<Candidate> hot = holderAndIdle();
      CostModel.score(hot, w, prompt(10), 0, excess, 1);
      assertThat(hot.get(0).cost()).isCloseTo(17.0, within(1e-9));
      assertThat(hot.get(1).cost()).isCloseTo(15.0, within(1e-9));
    }
    // The relief off, or half of it: excess 1 charges 1 or 0.5
    List<Candidate> off = holderAndIdle();
    CostModel.score(off, w.with("hot_prefix_relief", 0), prompt(10), 0, 1, 1);
    assertThat(off.get(1).cost()).isCloseTo(25.0, within(1e-9));
    List<Candidate> half = holderAndIdle();
    CostModel.score(half, w.with("hot_prefix_relief", 0.5), prompt(10), 0, 1, 1);
    assertThat(half.get(1).cost()).isCloseTo(20.0, within(1e-9));
    // The eviction charge is not the relief's: with a full eviction share (the share as charged, already scaled
    // down for a hot prefix by the Router) a recomputed block still costs 0 + 8 = 8 on top: w2 10 + 80 + 5
    List<Candidate> evicting = holderAndIdle();
    CostModel.score(evicting, w, prompt(10), 0.05, 1, 1);
    assertThat(evicting.get(1).cost()).isCloseTo(95.0, within(1e-9));
  }

  /**
   * A 10-block prompt; w1 holds 8 of it, has 10 blocks queued and runs 4 requests; w2, w3 and w4 hold nothing,
   * queue nothing and run 0, 1 and 3 requests (the mean is 2).
   */
  static List<Candidate> holderAndThreeLoads() {
    return List.of(cand("w1", gpu(8), load(160, 0, 4)), cand("w2", gpu(0), load(0, 0, 0)),
        cand("w3", gpu(0), load(0, 0, 1)), cand("w4", gpu(0), load(0, 0, 3)));
  }

  @Test
  void theIdleReliefLiftsTheRecomputeChargeOffWorkersTheFleetLeavesIdle() {
    // In every relieved case below the held prefix takes a whole worker's share of the requests (shared())
    // Decode 0.5 x 10 = 5 everywhere. Off: w1 (10 + 2) + 2 + 5 = 19, the others 10 + 10 + 5 = 25
    List<Candidate> off = holderAndThreeLoads();
    CostModel.score(off, MEMORY_ONLY, prompt(10), 0);
    assertThat(off.stream().map(Candidate::cost).toList()).containsExactly(19.0, 25.0, 25.0, 25.0);
    // Relief 1: w1 above the mean keeps its charge (19); idle w2 loses it (10 + 0 + 5 = 15: the copy on the idle
    // worker now wins); w3, at half the mean, loses (1 - 1/2)^2 = 1/4 of it (10 + 7.5 + 5 = 22.5); w4 none (25)
    Weights w = MEMORY_ONLY.with("new_prefill_idle_relief", 1);
    List<Candidate> on = holderAndThreeLoads();
    shared(on, w, 0);
    assertThat(on.get(0).cost()).isCloseTo(19.0, within(1e-9));
    assertThat(on.get(1).cost()).isCloseTo(15.0, within(1e-9));
    assertThat(on.get(2).cost()).isCloseTo(22.5, within(1e-9));
    assertThat(on.get(3).cost()).isCloseTo(25.0, within(1e-9));
    // Half the relief: w2 charged 0.5, 10 + 5 + 5 = 20
    List<Candidate> half = holderAndThreeLoads();
    shared(half, MEMORY_ONLY.with("new_prefill_idle_relief", 0.5), 0);
    assertThat(half.get(1).cost()).isCloseTo(20.0, within(1e-9));
    // The eviction charge is about cache, not compute, and stays: a full share charges 1 + 8 = 9, w2 keeps 8 of it,
    // 10 + 80 + 5 = 95
    List<Candidate> evicting = holderAndThreeLoads();
    shared(evicting, w, 0.05);
    assertThat(evicting.get(1).cost()).isCloseTo(95.0, within(1e-9));
    // A prefix hot enough for hot_prefix_relief has no base charge left to lift: w2 15 either way
    List<Candidate> hot = holderAndThreeLoads();
    CostModel.score(hot, w, prompt(10), 0, 1, 1);
    assertThat(hot.get(1).cost()).isCloseTo(15.0, within(1e-9));
    // Weights count: a weight-2 worker running 1 request beside weight-1 workers running 2 and 0 (3 in flight over
    // 4 units of weight, 0.75 per unit) is at two thirds of its share of 1.5: idle share 1/3, relief 1/9 of the
    // charge, (10 + 10 x 8/9 + 5) / 2 = 11.94 (unweighted, at the mean of 1, it got none: 12.5); a weight-1 worker
    // with 2 is over its share (25), the idle one relieved (15)
    List<Candidate> weighted = List.of(Candidate.of(worker("big", 2), 0, gpu(0), load(0, 0, 1), 0),
        cand("w1", gpu(0), load(0, 0, 2)), cand("w2", gpu(0), load(0, 0, 0)));
    shared(weighted, w, 0);
    assertThat(weighted.get(0).cost()).isCloseTo((10 + 10 * 8.0 / 9 + 5) / 2, within(1e-9));
    assertThat(weighted.get(1).cost()).isCloseTo(25.0, within(1e-9));
    assertThat(weighted.get(2).cost()).isCloseTo(15.0, within(1e-9));
    // A fleet with nothing in flight is idle everywhere: the holder is relieved too, 12 + 0 + 5 = 17
    List<Candidate> quiet = List.of(cand("w1", gpu(8), load(160, 0, 0)), cand("w2", gpu(0), load(0, 0, 0)));
    shared(quiet, w, 0);
    assertThat(quiet.get(0).cost()).isCloseTo(17.0, within(1e-9));
    assertThat(quiet.get(1).cost()).isCloseTo(15.0, within(1e-9));
  }

  /** {@code CostModel.score} on the 10-block prompt whose held prefix takes one worker's share of the requests. */
  private static void shared(List<Candidate> cs, Weights w, double evictionShare) {
    CostModel.score(cs, w, prompt(10), evictionShare, 0, 1);
  }

  @Test
  void theIdleReliefLeavesAPrefixNoOtherRequestReusesItsCharge() {
    // A conversation's history, a best-of-N group's prompt: a copy on the idle worker serves this session alone,
    // which waits for it. Owner share 0 (what the Router reads for a prefix no recent request ended on): the costs
    // of the relief off, 19 on the holder against 25 on the idle w2, so the session stays
    Weights w = MEMORY_ONLY.with("new_prefill_idle_relief", 1);
    List<Candidate> own = holderAndThreeLoads();
    CostModel.score(own, w, prompt(10), 0, 0, 0);
    assertThat(own.stream().map(Candidate::cost).toList()).containsExactly(19.0, 25.0, 25.0, 25.0);
    // Half a worker's share: half the relief on w2 (10 + 5 + 5 = 20), a quarter of half on w3 (10 + 8.75 + 5)
    List<Candidate> half = holderAndThreeLoads();
    CostModel.score(half, w, prompt(10), 0, 0, 0.5);
    assertThat(half.get(1).cost()).isCloseTo(20.0, within(1e-9));
    assertThat(half.get(2).cost()).isCloseTo(23.75, within(1e-9));
    // More than one worker's share is capped at the whole relief (15, as at 1); the four-argument score is a
    // prefix no one else reuses
    List<Candidate> hotter = holderAndThreeLoads();
    CostModel.score(hotter, w, prompt(10), 0, 0, 2.5);
    assertThat(hotter.get(1).cost()).isCloseTo(15.0, within(1e-9));
    List<Candidate> plain = holderAndThreeLoads();
    CostModel.score(plain, w, prompt(10), 0);
    assertThat(plain.get(1).cost()).isCloseTo(25.0, within(1e-9));
  }

  @Test
  void withAStepBudgetTheReadTermCountsEveryStepTheFirstTokenWaits() {
    // 10-block prompt. h holds 6 of it with a cold 20-block prompt queued and light decoding (20 held, 20 read); i
    // holds nothing, has nothing queued and decodes heavily (70 held, 70 read). Defaults, no pressure:
    // h: prefill 20 + 10 - 6 = 24, new 4, held 20 + 10 = 30, read 30: 24 + 4 + 3 + 3 = 34
    // i: prefill 10, new 10, held 70 + 10 = 80, read 80: 10 + 10 + 8 + 8 = 36, so h wins
    List<Candidate> off = holderBehindAColdPrompt();
    CostModel.score(off, Weights.DEFAULTS, prompt(10), 0);
    assertThat(off.get(0).cost()).isCloseTo(34.0, within(1e-9));
    assertThat(off.get(1).cost()).isCloseTo(36.0, within(1e-9));
    // A 160-token step: h's first token comes after 24 blocks = 384 tokens, 2.4 steps, each reading its 30 blocks:
    // 24 + 4 + 3 + 0.1 x 30 x 2.4 = 38.2; i's 10 blocks fit one step, its cost stays 36: now i wins
    List<Candidate> on = holderBehindAColdPrompt();
    CostModel.score(on, Weights.DEFAULTS.with("step_tokens", 160), prompt(10), 0);
    assertThat(on.get(0).cost()).isCloseTo(38.2, within(1e-9));
    assertThat(on.get(1).cost()).isCloseTo(36.0, within(1e-9));
    assertThat(on.get(0).readBlocks()).isEqualTo(30.0); // the record keeps the blocks, the cost counts the steps
    // A budget that takes h's 384 tokens in one step changes nothing
    List<Candidate> wide = holderBehindAColdPrompt();
    CostModel.score(wide, Weights.DEFAULTS.with("step_tokens", 384), prompt(10), 0);
    assertThat(wide).extracting(Candidate::cost).containsExactly(34.0, 36.0);
  }

  static List<Candidate> holderBehindAColdPrompt() {
    return List.of(cand("h", gpu(6), load(320, 20, 20, 1)), cand("i", gpu(0), load(0, 70, 70, 4)));
  }

  @Test
  void dynamosExampleThroughTheScorerPicksWorkerTwo() {
    // The docs' decode column is each worker's active blocks; the scorer adds the request's own 10 blocks to every
    // worker alike (nothing of it is active anywhere), so each cost is the documented one plus 10.
    List<Candidate> cs = dynamosThreeWorkers();
    CostModel.score(cs, Weights.DYNAMO, prompt(10), 0);
    assertThat(cs).extracting(Candidate::prefillBlocks).containsExactly(8.0, 5.0, 2.0);
    assertThat(cs).extracting(Candidate::decodeBlocks).containsExactly(20.0, 15.0, 19.0);
    assertThat(cs).extracting(Candidate::cost).containsExactly(28.0, 20.0, 21.0);
    Candidate best = Selection.argmin(cs, Candidate::cost, Candidate::loadCost, new Random(1));
    assertThat(best.worker().name()).isEqualTo("w2");
    assertThat(new KvAwarePolicy().choose(new Scoring(null, cs, Weights.DYNAMO, prompt(10), true, new Random(1)))
        .candidate().worker().name()).isEqualTo("w2");
  }

  @Test
  void lowerTiersEarnPartialCredit() {
    // 2 on GPU, 4 more on CPU, 4 more on disk: credit 2 x 1 + 4 x 0.75 + 4 x 0.25 = 6 -> prefill 10 - 6 = 4
    Candidate c = cand("w", new Overlap(2, 4, 4, 0, false), load(0, 0, 0));
    CostModel.score(List.of(c), Weights.DYNAMO, prompt(10), 0);
    assertThat(c.creditBlocks()).isEqualTo(6.0);
    assertThat(c.prefillBlocks()).isEqualTo(4.0);
    assertThat(c.cost()).isEqualTo(14.0); // 4 + decode 10
  }

  @Test
  void leadingRunsPerTierBecomeExclusiveExtensions() {
    assertThat(Overlap.fromLeadingRuns(2, 6, 10, 0, false)).isEqualTo(new Overlap(2, 4, 4, 0, false));
    assertThat(Overlap.fromLeadingRuns(8, 3, 0, 1, true)).isEqualTo(new Overlap(8, 0, 0, 1, true));
    assertThat(Overlap.fromLeadingRuns(0, 0, 5, 0, false)).isEqualTo(new Overlap(0, 0, 5, 0, false));
  }

  @Test
  void aStaleViewIsScoredWithPredictedEntriesOnly() {
    // stale: the 8 GPU blocks are not believed; predicted 3 -> credit 3, prefill 7
    Candidate stale = cand("s", new Overlap(8, 0, 0, 3, true), load(0, 0, 0));
    // fresh: max(events 2, predicted 5) -> credit 5, prefill 5
    Candidate fresh = cand("f", new Overlap(2, 0, 0, 5, false), load(0, 0, 0));
    CostModel.score(List.of(stale, fresh), Weights.DYNAMO, prompt(10), 0);
    assertThat(stale.creditBlocks()).isEqualTo(3.0);
    assertThat(stale.prefillBlocks()).isEqualTo(7.0);
    assertThat(fresh.creditBlocks()).isEqualTo(5.0);
    assertThat(fresh.prefillBlocks()).isEqualTo(5.0);
    assertThat(stale.overlap().effective()).isEqualTo(3);
    assertThat(fresh.overlap().effective()).isEqualTo(5);
  }

  @Test
  void aStaleViewConfirmedByUsageIsCreditedAtItsTrust() {
    // stale, 8 GPU blocks claimed, trust 0.75: event credit 6 beats predicted 3
    Candidate trusted = cand("t", new Overlap(8, 0, 0, 3, true), load(0, 0, 0));
    trusted.viewTrust = 0.75;
    // stale, trust 0.25: event credit 2 loses to predicted 3
    Candidate doubted = cand("d", new Overlap(8, 0, 0, 3, true), load(0, 0, 0));
    doubted.viewTrust = 0.25;
    // fresh: a trust value left on it changes nothing
    Candidate fresh = cand("f", new Overlap(8, 0, 0, 3, false), load(0, 0, 0));
    fresh.viewTrust = 0.1;
    CostModel.score(List.of(trusted, doubted, fresh), Weights.DYNAMO, prompt(10), 0);
    assertThat(trusted.creditBlocks()).isEqualTo(6.0);
    assertThat(doubted.creditBlocks()).isEqualTo(3.0);
    assertThat(fresh.creditBlocks()).isEqualTo(8.0);
    assertThat(fresh.viewTrust()).isZero();
    assertThat(trusted.viewTrust()).isEqualTo(0.75);
  }

  @Test
  void creditNeverExceedsTheHashedBlocks() {
    // 20 blocks claimed, the request has 10: credit 10, prefill 0 (the last partial block has no hash: prompt of
    // 170 tokens = 10 full + 1 partial block -> prefill 11 - 10 = 1)
    Candidate c = cand("w", gpu(20), load(0, 0, 0));
    CostModel.score(List.of(c), Weights.DYNAMO, RequestShape.of(170, B, 10, 0), 0);
    assertThat(c.creditBlocks()).isEqualTo(10.0);
    assertThat(c.prefillBlocks()).isEqualTo(1.0);
  }

  @Test
  void queuedPrefillIsScaledAndActiveBlocksAdd() {
    // active prefill 320 tokens = 20 blocks; prompt 10, credit 10 -> prefill 20; decode 30 active + 10 new = 40;
    // scale 2 -> 2 x 20 + 40 = 80
    Candidate c = cand("w", gpu(10), load(320, 30, 3));
    CostModel.score(List.of(c), Weights.DYNAMO.with("prefill_load_scale", 2.0), prompt(10), 0);
    assertThat(c.prefillBlocks()).isEqualTo(20.0);
    assertThat(c.decodeBlocks()).isEqualTo(40.0);
    assertThat(c.cost()).isEqualTo(80.0);
    // the load alone (no request): 2 x 20 + 30 = 70
    assertThat(c.loadCost()).isEqualTo(70.0);
    // decode scale 0.5 and 4 per request: 2 x 20 + 0.5 x 40 + 4 x 3 = 72
    CostModel.score(List.of(c), Weights.DYNAMO.withOverrides(
        "prefill_load_scale=2,decode_load_scale=0.5,active_request_weight=4"), prompt(10), 0);
    assertThat(c.cost()).isEqualTo(72.0);
  }

  @Test
  void blocksAlreadyActiveOnTheWorkerAddNothing() {
    // 10-block prompt whose first 6 blocks are held by an in-flight request there: decode 6 active + 4 new = 10
    Candidate shared = Candidate.of(worker("w", 1), 0, Overlap.NONE, load(0, 6, 1), 6);
    CostModel.score(List.of(shared), Weights.DYNAMO, prompt(10), 0);
    assertThat(shared.decodeBlocks()).isEqualTo(10.0);
  }

  @Test
  void expectedOutputBlocksAddToDecode() {
    // 100 output tokens at block 16 = 7 blocks
    Candidate c = cand("w", Overlap.NONE, load(0, 0, 0));
    CostModel.score(List.of(c), Weights.DYNAMO, RequestShape.of(160, B, 10, 100), 0);
    assertThat(c.decodeBlocks()).isEqualTo(17.0);
  }

  @Test
  void theDecodeReadTermCountsEveryRequestsContextWhereMemoryCountsASharedDocumentOnce() {
    // RAG: a 100-block document, a 4-block question, 4 output blocks. hot holds the document with 20 requests on
    // it (memory: 100 + 20 x 8 = 260 blocks; reads: 20 x 108 = 2160); cold holds it with 2 (memory 100 + 16 = 116;
    // reads 216). Both have it cached and nothing queued: credit 100, prefill = new = 4 + 0 output = 4.
    RequestShape shape = RequestShape.of(104 * B, B, 104, 4 * B);
    Candidate hot = Candidate.of(worker("hot", 1), 0, gpu(100), load(0, 260, 2160, 20), 100);
    Candidate cold = Candidate.of(worker("cold", 1), 0, gpu(100), load(0, 116, 216, 2), 100);
    // memory only (read weight 0): decode = active + (104 - 100 shared) + 4 output: 268 vs 124
    // cost = 4 + 4 + 0.5 x 268 = 142 vs 4 + 4 + 0.5 x 124 = 70: cold wins on memory already here
    CostModel.score(List.of(hot, cold), MEMORY_ONLY, shape, 0);
    assertThat(hot.decodeBlocks()).isEqualTo(268.0);
    assertThat(cold.decodeBlocks()).isEqualTo(124.0);
    assertThat(hot.cost()).isEqualTo(142.0);
    assertThat(cold.cost()).isEqualTo(70.0);
    // the read term: active reads + the request's own 104 + 4 = 108 (never deduplicated): 2268 vs 324
    assertThat(hot.readBlocks()).isEqualTo(2268.0);
    assertThat(cold.readBlocks()).isEqualTo(324.0);
    // with decode_read_weight 0.25: 142 + 567 = 709 vs 70 + 81 = 151
    Weights w = MEMORY_ONLY.with("decode_read_weight", 0.25);
    CostModel.score(List.of(hot, cold), w, shape, 0);
    assertThat(hot.cost()).isEqualTo(709.0);
    assertThat(cold.cost()).isEqualTo(151.0);
    // the load without the request: 0.5 x 260 + 0.25 x 2160 = 670; 0.5 x 116 + 0.25 x 216 = 112
    assertThat(hot.loadCost()).isEqualTo(670.0);
    assertThat(cold.loadCost()).isEqualTo(112.0);
    // the defaults (0.1 held + 0.1 read): 8 + 0.1 x 268 + 0.1 x 2268 = 8 + 26.8 + 226.8 = 261.6;
    // 8 + 0.1 x 124 + 0.1 x 324 = 8 + 12.4 + 32.4 = 52.8; loads 26 + 216 = 242 and 11.6 + 21.6 = 33.2
    CostModel.score(List.of(hot, cold), Weights.DEFAULTS, shape, 0);
    assertThat(hot.cost()).isCloseTo(261.6, within(1e-9));
    assertThat(cold.cost()).isCloseTo(52.8, within(1e-9));
    assertThat(hot.loadCost()).isCloseTo(242.0, within(1e-9));
    assertThat(cold.loadCost()).isCloseTo(33.2, within(1e-9));
  }

  @Test
  void theDecodeReadTermSeesWhatTheMemoryViewMisses() {
    // Two workers with the same distinct blocks (memory 120): "shared" runs 10 requests over one 100-block
    // document (100 + 10 x 2 own blocks; reads 10 x 102 = 1020), "spread" runs 1 request of 120 blocks (reads
    // 120). A 10-block prompt cached nowhere, no output: prefill = new = 10, decode = 120 + 10 = 130 on both.
    RequestShape shape = prompt(10);
    Candidate shared = cand("shared", Overlap.NONE, load(0, 120, 1020, 10));
    Candidate spread = cand("spread", Overlap.NONE, load(0, 120, 120, 1));
    // memory only: 10 + 10 + 0.5 x 130 = 85 on both: a tie the memory view cannot break
    CostModel.score(List.of(shared, spread), MEMORY_ONLY, shape, 0);
    assertThat(shared.cost()).isEqualTo(85.0);
    assertThat(spread.cost()).isEqualTo(85.0);
    // the defaults: 20 + 0.1 x 130 + 0.1 x 1030 = 136 vs 20 + 0.1 x 130 + 0.1 x 130 = 46: the worker reading the
    // document once per request costs three times the one that shares nothing
    CostModel.score(List.of(shared, spread), Weights.DEFAULTS, shape, 0);
    assertThat(shared.cost()).isCloseTo(136.0, within(1e-9));
    assertThat(spread.cost()).isCloseTo(46.0, within(1e-9));
    // decode_read_weight 0.1: + 0.1 x (1020 + 10) = 103 -> 188; + 0.1 x (120 + 10) = 13 -> 98: spread wins
    Weights w = MEMORY_ONLY.with("decode_read_weight", 0.1);
    CostModel.score(List.of(shared, spread), w, shape, 0);
    assertThat(shared.cost()).isCloseTo(188.0, within(1e-9));
    assertThat(spread.cost()).isCloseTo(98.0, within(1e-9));
    assertThat(new KvAwarePolicy().choose(new Scoring(null, List.of(shared, spread), w, shape, true,
        new Random(1))).candidate().worker().name()).isEqualTo("spread");
    // the formula on terms: prefill 10, new 10, decode 130, read 130, 1 request, weight 2 -> (10 + 10 + 65 + 13) / 2
    assertThat(CostModel.cost(10, 10, 130, 130, 1, w, 2)).isCloseTo(49.0, within(1e-9));
  }

  @Test
  void creditDecaysWithExcessQueuedPrefill() {
    // busy holds all 10 blocks but has 160 tokens (10 blocks) more queued than idle: with decay 1,
    // credit = 1 / (1 + 1 x 10 / 10) x 10 = 5 -> prefill 10 + 10 - 5 = 15; idle: no overlap -> 10
    Candidate busy = cand("busy", gpu(10), load(160, 0, 0));
    Candidate idle = cand("idle", Overlap.NONE, load(0, 0, 0));
    CostModel.score(List.of(busy, idle), Weights.DYNAMO.with("overlap_credit_decay", 1.0), prompt(10), 0);
    assertThat(busy.creditBlocks()).isEqualTo(5.0);
    assertThat(busy.prefillBlocks()).isEqualTo(15.0);
    assertThat(idle.prefillBlocks()).isEqualTo(10.0);
    // without decay the holder's queue is fully offset: 10 + 10 - 10 = 10
    CostModel.score(List.of(busy, idle), Weights.DYNAMO, prompt(10), 0);
    assertThat(busy.prefillBlocks()).isEqualTo(10.0);
  }

  @Test
  void aHeavierWorkerCostsProportionallyLess() {
    Candidate big = Candidate.of(worker("big", 2), 0, gpu(2), load(0, 10, 0), 0);
    CostModel.score(List.of(big), Weights.DYNAMO, prompt(10), 0);
    assertThat(big.cost()).isEqualTo((8 + 20) / 2.0);
  }

  @Test
  void predictedCachedTokensFollowVllmsCap() {
    // 160 tokens = 10 full blocks all cached: vLLM always computes the last token, so 9 blocks = 144 tokens hit
    assertThat(CostModel.predictedCachedTokens(gpu(10), prompt(10))).isEqualTo(144);
    // 170 tokens (10 full + 6): the 10 full blocks can hit: 160
    assertThat(CostModel.predictedCachedTokens(gpu(10), RequestShape.of(170, B, 10, 0))).isEqualTo(160);
    assertThat(CostModel.predictedCachedTokens(gpu(3), prompt(10))).isEqualTo(48);
    assertThat(CostModel.predictedCachedTokens(new Overlap(2, 2, 1, 0, false), prompt(10))).isEqualTo(80);
    assertThat(CostModel.predictedCachedTokens(new Overlap(9, 0, 0, 1, true), prompt(10))).isEqualTo(16);
    assertThat(CostModel.predictedCachedTokens(gpu(3), RequestShape.of(0, B, 0, 0))).isZero();
  }

  @Test
  void costsStayWithinFloatTolerance() {
    Candidate a = cand("a", new Overlap(0, 4, 0, 0, false), load(0, 0, 0));
    Candidate b = cand("b", new Overlap(3, 0, 0, 0, false), load(0, 0, 0));
    CostModel.score(List.of(a, b), Weights.DYNAMO, prompt(10), 0);
    // 4 x 0.75 = 3 exactly as 3 x 1: a tie, not a float accident
    assertThat(a.cost()).isCloseTo(b.cost(), within(1e-12));
    assertThat(Selection.same(a.cost(), b.cost())).isTrue();
  }
}
