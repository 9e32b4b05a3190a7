package dev.kvrouter.extproc.routing;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.extproc.load.ScrapedLoad;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.xds.registry.Worker;
import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.statistics.Statistics;

/**
 * A worker never receives traffic while ineligible: whatever the fleet (draining, roles, data-parallel ranks),
 * health, load, busy thresholds, overlaps, stale views and policy, a routed request lands on a worker that is
 * not draining, serves the decode phase, is healthy unless the decision says {@code all_unhealthy}, and is below
 * every busy threshold unless the decision says {@code all_busy}; and a request is only refused when no worker
 * was eligible.
 */
class EligibilityPropertiesTest {

  /** One worker's state. */
  record W(boolean draining, boolean prefillOnly, int dp, boolean ejected, int prefillTokens, int blocks,
      int scrapedWaiting, double scrapedUsage, int overlap, boolean stale) {}

  record Fleet(List<W> workers, BusyThresholds busy, boolean leastLoadedWhenBusy, String policy, int shared,
      String weights) {}

  @Provide
  Arbitrary<Fleet> fleets() {
    Arbitrary<W> w = Combinators.combine(
        Arbitraries.of(false, false, false, true), Arbitraries.of(false, false, false, true),
        Arbitraries.integers().between(1, 2), Arbitraries.of(false, false, true),
        Arbitraries.integers().between(0, 3000), Arbitraries.integers().between(0, 40),
        Arbitraries.integers().between(-1, 12), Arbitraries.doubles().between(0, 1).ofScale(2))
        .as((d, p, dp, ej, pt, bl, wt, u) -> new W(d, p, dp, ej, pt, bl, wt, u, 0, false));
    Arbitrary<W> withOverlap = Combinators.combine(w, Arbitraries.integers().between(0, 12), Arbitraries.of(false, true))
        .as((x, o, s) -> new W(x.draining(), x.prefillOnly(), x.dp(), x.ejected(), x.prefillTokens(), x.blocks(),
            x.scrapedWaiting(), x.scrapedUsage(), o, s));
    Arbitrary<BusyThresholds> busy = Combinators.combine(Arbitraries.of(0L, 500L, 2000L),
        Arbitraries.of(0L, 10L, 30L), Arbitraries.of(0.0, 0.5, 0.9), Arbitraries.of(0L, 3L, 10L))
        .as(BusyThresholds::new);
    return Combinators.combine(withOverlap.list().ofMinSize(1).ofMaxSize(6), busy, Arbitraries.of(true, false),
        Arbitraries.of(StandardPolicies.NAMES), Arbitraries.integers().between(0, 12),
        Arbitraries.of("", "temperature=0.7", "imbalance_gate=true,imbalance_abs=2", "gpu_credit=0",
            "bounded_load=1"))
        .as(Fleet::new);
  }

  @Property(tries = 400)
  void aWorkerNeverReceivesTrafficWhileIneligible(@ForAll("fleets") Fleet f) {
    RouterHarness h = new RouterHarness();
    List<Worker> workers = new ArrayList<>();
    for (int i = 0; i < f.workers().size(); i++) {
      W w = f.workers().get(i);
      workers.add(RouterHarness.worker("w" + i, w.dp(), w.prefillOnly() ? Worker.Role.PREFILL : Worker.Role.BOTH,
          w.draining()));
    }
    h.fleet(workers.toArray(Worker[]::new));
    h.settings(new ModelRouting(f.policy(), Weights.DEFAULTS, f.busy(),
        f.leastLoadedWhenBusy() ? ModelRouting.WhenAllBusy.LEAST_LOADED : ModelRouting.WhenAllBusy.REJECT));
    for (int i = 0; i < f.workers().size(); i++) {
      W w = f.workers().get(i);
      String name = "w" + i;
      if (w.ejected()) {
        for (int k = 0; k < 5; k++) {
          h.health.response(name, 503);
        }
      }
      for (WorkerId id : workers.get(i).cacheOwners()) {
        h.ledger.reserve(id, w.prefillTokens(), new long[] {i * 100L + id.dpRank()}, w.blocks());
        if (w.scrapedWaiting() >= 0) {
          h.scraped.put(id, new ScrapedLoad(1, w.scrapedWaiting(), w.scrapedUsage(), 100, h.clock.getAsLong()));
        }
        h.overlaps.put(id, new Overlap(w.overlap(), 0, 0, w.overlap() / 2, w.stale()));
      }
    }
    for (int r = 0; r < 3; r++) { // a few requests, each adding its own load
      RouteRequest req = RouterHarness.request(RouterHarness.prompt(1, f.shared(), 2, r))
          .withWeightsOverride(f.weights());
      Decision d = h.route(req);
      List<Candidate> cs = d.detail().candidates();
      boolean anyHard = false;
      boolean anyFullyEligible = false;
      for (Candidate c : cs) {
        boolean hard = !c.worker().draining() && c.worker().role() != Worker.Role.PREFILL;
        boolean healthy = h.health.unhealthyReason(c.worker().name()) == null;
        boolean notBusy = f.busy().check(c.load()) == null;
        anyHard |= hard;
        anyFullyEligible |= hard && healthy && notBusy;
      }
      String fallback = d.fallback() == null ? "" : d.fallback();
      Statistics.label("outcome").collect(d.routed() ? "routed" : "refused " + d.rejection().status());
      Statistics.label("fallback").collect(fallback.replace("no_tokenization", "").replace("stale_events", "")
          .replace(",", " ").trim());
      if (!d.routed()) {
        assertThat(anyFullyEligible).as("refused although a worker was eligible: %s", cs).isFalse();
        if (anyHard) {
          assertThat(d.rejection().status()).isEqualTo(429);
          assertThat(f.leastLoadedWhenBusy()).isFalse();
        } else {
          assertThat(d.rejection().status()).isEqualTo(503);
        }
        continue;
      }
      Candidate chosen = d.detail().chosen();
      assertThat(chosen.worker().draining()).isFalse();
      assertThat(chosen.worker().role()).isNotEqualTo(Worker.Role.PREFILL);
      assertThat(chosen.whyNot()).isNull();
      if (!fallback.contains("all_unhealthy")) {
        assertThat(h.health.unhealthyReason(chosen.worker().name())).as("chose an unhealthy worker").isNull();
      }
      if (!fallback.contains("all_busy")) {
        assertThat(f.busy().check(chosen.load())).as("chose a busy worker").isNull();
      }
      if (anyFullyEligible) {
        assertThat(fallback).doesNotContain("all_busy").doesNotContain("all_unhealthy");
      }
    }
  }
}
