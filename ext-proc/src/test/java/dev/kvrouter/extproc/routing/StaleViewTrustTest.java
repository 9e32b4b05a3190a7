package dev.kvrouter.extproc.routing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import dev.kvrouter.index.WorkerId;
import org.junit.jupiter.api.Test;

class StaleViewTrustTest {

  private static final int B = 16;
  private static final WorkerId W = new WorkerId("w", 0);
  private static final WorkerId OTHER = new WorkerId("w", 1);

  /** A prompt of {@code blocks} full blocks and a few tokens more. */
  private static RequestShape shape(int blocks) {
    return RequestShape.of(blocks * B + 5L, B, blocks, 0);
  }

  private static Overlap stale(int gpu, int predicted) {
    return new Overlap(gpu, 0, 0, predicted, true);
  }

  @Test
  void aViewThatJustWentStaleGetsHalfCreditAndAFreshOneNone() {
    StaleViewTrust t = new StaleViewTrust();
    assertThat(t.trust(W)).isZero(); // never seen going stale
    t.staleChanged(W, true, "gap");
    assertThat(t.trust(W)).isEqualTo(StaleViewTrust.PRIOR);
    assertThat(t.trust(OTHER)).isZero();
    assertThat(t.tracked()).isEqualTo(1);
  }

  @Test
  void confirmedClaimsEarnTheCreditBackAndAMissTakesItAway() {
    StaleViewTrust t = new StaleViewTrust();
    t.staleChanged(W, true, "gap");
    // the view claimed 100 blocks, the router predicted none, the engine had all 100
    t.report(W, stale(100, 0), shape(100), 100L * B);
    assertThat(t.trust(W)).isEqualTo((32 * 0.9 + 100) / (64 * 0.9 + 100), within(1e-9));
    for (int i = 0; i < 10; i++) {
      t.report(W, stale(100, 0), shape(100), 100L * B);
    }
    assertThat(t.trust(W)).isGreaterThan(0.98);
    // a lost cache clear: the view claims 500 blocks the engine no longer has
    t.report(W, stale(500, 0), shape(500), 0);
    assertThat(t.trust(W)).isLessThan(0.65);
    t.report(W, stale(500, 0), shape(500), 0);
    t.report(W, stale(500, 0), shape(500), 0);
    assertThat(t.trust(W)).isLessThan(0.3);
  }

  @Test
  void aLongMissRightAfterTheGapLeavesAlmostNothing() {
    StaleViewTrust t = new StaleViewTrust();
    t.staleChanged(W, true, "gap");
    t.report(W, stale(500, 0), shape(500), 0);
    assertThat(t.trust(W)).isLessThan(0.07);
  }

  @Test
  void blocksThePredictionsCoverAreNotEvidence() {
    StaleViewTrust t = new StaleViewTrust();
    t.staleChanged(W, true, "gap");
    // everything the view claims, the router sent there itself: the hit says nothing about the view
    t.report(W, stale(40, 40), shape(40), 40L * B);
    t.report(W, stale(40, 60), shape(40), 40L * B);
    assertThat(t.trust(W)).isEqualTo(StaleViewTrust.PRIOR);
    // beyond the predictions: 30 claimed, the engine had 10 of them past the 20 predicted
    t.report(W, stale(50, 20), shape(50), 30L * B);
    double claimed = 64 * 0.9 + 30;
    double confirmed = 32 * 0.9 + 10;
    assertThat(t.trust(W)).isEqualTo(confirmed / claimed, within(1e-9));
  }

  @Test
  void theHitIsCappedAsVllmCapsIt() {
    StaleViewTrust t = new StaleViewTrust();
    t.staleChanged(W, true, "gap");
    // a prompt of exactly 10 blocks: vLLM computes its last token, so at most 9 blocks hit; the 10th is no miss
    RequestShape exact = RequestShape.of(10L * B, B, 10, 0);
    t.report(W, stale(10, 0), exact, 9L * B);
    assertThat(t.trust(W)).isEqualTo((32 * 0.9 + 9) / (64 * 0.9 + 9), within(1e-9));
  }

  @Test
  void onlyStaleDecisionsCountAndAnUnreportedHitConfirmsNothing() {
    StaleViewTrust t = new StaleViewTrust();
    t.staleChanged(W, true, "gap");
    t.report(W, new Overlap(100, 0, 0, 0, false), shape(100), 0); // decided on a fresh view
    assertThat(t.trust(W)).isEqualTo(StaleViewTrust.PRIOR);
    // a worker that does not report cached_tokens cannot vouch for its view
    t.report(W, stale(100, 0), shape(100), -1);
    assertThat(t.trust(W)).isEqualTo(32 * 0.9 / (64 * 0.9 + 100), within(1e-9));
  }

  @Test
  void evidenceIsForgottenWhenTheViewIsFreshAgainOrGoesStaleAnew() {
    StaleViewTrust t = new StaleViewTrust();
    t.staleChanged(W, true, "gap");
    t.report(W, stale(500, 0), shape(500), 0);
    t.staleChanged(W, false, "replayed");
    assertThat(t.trust(W)).isZero();
    assertThat(t.tracked()).isZero();
    // a report of a decision made while it was stale, arriving after it recovered: nothing to test any more
    t.report(W, stale(500, 0), shape(500), 0);
    assertThat(t.tracked()).isZero();
    t.staleChanged(W, true, "gap");
    assertThat(t.trust(W)).isEqualTo(StaleViewTrust.PRIOR);
    t.staleChanged(W, false, "worker removed");
    assertThat(t.tracked()).isZero();
  }

  @Test
  void eachStaleWorkerExportsItsTrustWhileStale() {
    var registry = new io.micrometer.core.instrument.simple.SimpleMeterRegistry();
    StaleViewTrust t = new StaleViewTrust().bindTo(registry);
    t.staleChanged(W, true, "gap");
    var gauge = registry.get("kvrouter.events.stale.view.trust").tag("worker", "w").tag("dp_rank", "0").gauge();
    assertThat(gauge.value()).isEqualTo(StaleViewTrust.PRIOR);
    t.report(W, stale(500, 0), shape(500), 0);
    assertThat(gauge.value()).isLessThan(0.07);
    t.staleChanged(W, true, "another gap, its evidence anew");
    assertThat(registry.get("kvrouter.events.stale.view.trust").gauges()).hasSize(1);
    assertThat(registry.get("kvrouter.events.stale.view.trust").gauge().value()).isEqualTo(StaleViewTrust.PRIOR);
    t.staleChanged(W, false, "replayed");
    assertThat(registry.find("kvrouter.events.stale.view.trust").gauges()).isEmpty();
  }

  @Test
  void noneTrustsNothing() {
    StaleViewTrust t = StaleViewTrust.NONE;
    t.staleChanged(W, true, "gap");
    t.report(W, stale(100, 0), shape(100), 100L * B);
    assertThat(t.trust(W)).isZero();
    assertThat(t.tracked()).isZero();
    assertThat(t.enabled()).isFalse();
  }
}
