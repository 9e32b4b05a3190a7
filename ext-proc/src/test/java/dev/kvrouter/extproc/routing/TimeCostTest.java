package dev.kvrouter.extproc.routing;

import static dev.kvrouter.extproc.routing.CostModelTest.B;
import static dev.kvrouter.extproc.routing.CostModelTest.cand;
import static dev.kvrouter.extproc.routing.CostModelTest.gpu;
import static dev.kvrouter.extproc.routing.CostModelTest.load;
import static dev.kvrouter.extproc.routing.CostModelTest.worker;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Hand-worked cases of the time model ({@link TimeCost}) where it picks differently from the block model, with round
 * coefficients: 10 us a prefilled token, 1,000 us a step plus 100 us per thousand resident tokens, 1,000 tokens a
 * step. The request: 1,024 prompt tokens (64 full blocks), 16 output tokens, so {@code life} = 1,024 + 8 = 1,032
 * tokens and each of its decode steps reads {@code 100 x 1.032 = 103.2} us more on its worker.
 */
class TimeCostTest {

  static final Weights TIME = Weights.DEFAULTS.withOverrides(
      "time_prefill_us_per_token=10,time_step_us=1000,time_step_us_per_ktoken=100,step_tokens=1000");

  static final RequestShape REQUEST = RequestShape.of(1024, B, 64, 16);

  /** Scores {@code a} and {@code b} together with {@code w} and checks their costs. */
  static void assertCosts(Weights w, Candidate a, double costA, Candidate b, double costB) {
    CostModel.score(List.of(a, b), w, REQUEST, 0);
    assertThat(a.cost()).isCloseTo(costA, within(1e-9));
    assertThat(b.cost()).isCloseTo(costB, within(1e-9));
  }

  @Test
  void anIdleWorkerRecomputesRatherThanSlowADecodingHolder() {
    // holder: all 64 blocks cached, 4 requests decoding over 500 context blocks (8,000 tokens)
    Candidate holder = cand("holder", gpu(64), load(0, 500, 500, 4));
    Candidate idle = cand("idle", gpu(0), load(0, 0, 0, 0));

    // blocks (defaults): holder 0.1 x (500 + 64 + 1) held + 0.1 x (500 + 64 + 1) read = 113; idle 64 queued
    // + 64 new + 0.1 x 65 + 0.1 x 65 = 141: the holder wins (no idle relief: no other request reuses the prefix)
    assertCosts(Weights.DEFAULTS, holder, 113, idle, 141);

    // time: holder step 1,000 + 100 x 8 = 1,800; ttft 1 step = 1,800; own 16 x (1,800 + 103.2) = 30,451.2;
    // others 4 x 16 x 103.2 = 6,604.8; 38,856 us. idle: 1.024 steps of 1,000 + 10 x 1,024 = 11,264; own
    // 16 x 1,103.2 = 17,651.2; nobody to slow; 28,915.2 us. The 8,000 resident tokens slow each of the request's
    // 16 steps by 0.8 ms, and its 1,032 tokens slow the holder's 4 decodes: 19.4 ms, against 10.2 ms of prefill
    assertCosts(TIME, holder, 38.856, idle, 28.9152);
  }

  @Test
  void aHolderWithQueuedPrefillBeatsRecomputingBesideManyDecodes() {
    // holder: all cached, 3,000 prefill tokens queued, 2 requests over 10 blocks; busy: no cache, 8 requests over 20
    Candidate holder = cand("holder", gpu(64), load(3000, 10, 10, 2));
    Candidate busy = cand("busy", gpu(0), load(0, 20, 20, 8));

    // blocks: holder 3,000 / 16 = 187.5 queued + 0.1 x 75 + 0.1 x 75 = 202.5; busy 64 + 64 + 0.1 x 85 x 2 = 145:
    // the block model recomputes, since a queued block and a recomputed one cost the same whatever runs there
    assertCosts(Weights.DEFAULTS, holder, 202.5, busy, 145);

    // time: holder 3 steps of 1,016 + 10 x 3,000 = 33,048; own 16 x 1,119.2 = 17,907.2; others 2 x 1,651.2 =
    // 3,302.4; 54,257.6 us. busy: 1.024 x 1,032 + 10,240 = 11,296.768; own 16 x 1,135.2 = 18,163.2; others
    // 8 x (10,240 + 1,651.2) = 95,129.6; 124,589.568 us. Recomputing stalls 8 decodes through 10.2 ms of prefill
    // each: waiting 30 ms behind the holder's queue is cheaper
    assertCosts(TIME, holder, 54.2576, busy, 124.589568);
  }

  @Test
  void aHeavierWorkerTakesProportionallyLessTime() {
    Candidate big = Candidate.of(worker("big", 2), 0, gpu(0), load(0, 0, 0, 0), 0);
    CostModel.score(List.of(big), TIME, REQUEST, 0);
    assertThat(big.cost()).isCloseTo(28.9152 / 2, within(1e-9));
  }

  @Test
  void withoutAStepBudgetThePrefillIsOneStep() {
    // a header can set the coefficients without step_tokens: one step of 1,000 + 10 x 1,024, not a division by 0
    Candidate idle = cand("idle", gpu(0), load(0, 0, 0, 0));
    CostModel.score(List.of(idle), TIME.with("step_tokens", 0), REQUEST, 0);
    assertThat(idle.cost()).isCloseTo((1000 + 10240 + 17651.2) / 1000, within(1e-9));
  }

  @Test
  void theCreditCutsThePrefillTimeBlockForBlock() {
    // 32 of 64 blocks cached: 512 uncached, 1 step of 1,000 + 5,120 + own 17,651.2 = 23.7712 ms
    Candidate half = cand("half", gpu(32), load(0, 0, 0, 0));
    CostModel.score(List.of(half), TIME, REQUEST, 0);
    assertThat(half.cost()).isCloseTo(23.7712, within(1e-9));
  }
}
