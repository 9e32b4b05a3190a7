package dev.kvrouter.examples.report;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import dev.kvrouter.examples.workload.IdealReuse;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class PolicyResultTest {

  private static final IdealReuse IDEAL = new IdealReuse(16, 7, 7000, 430, 280, 4000, 150); // 4000/7000 tokens

  @Test
  void countsLatencyAndThroughput() {
    PolicyResult p = PolicyResult.summarize(RunDataFixtures.run("x", 40, 500), IDEAL);
    assertThat(p.counts()).isEqualTo(new PolicyResult.Counts(7, 6, 6, 1, 1, 0, 4));
    assertThat(p.errors()).containsExactly(Map.entry("overflow", 1L));
    assertThat(p.ttftMs().count()).isEqualTo(6);
    assertThat(p.ttftMs().p50()).isCloseTo(40, within(0.05));
    assertThat(p.e2eMs().p99()).isCloseTo(120, within(0.1));
    // (e2e - ttft) / (completion - 1) = (120 - 40) / 10 ms
    assertThat(p.tpotMs().p50()).isCloseTo(8, within(0.01));
    assertThat(p.itlMs().count()).isEqualTo(50);
    assertThat(p.sendLagMs().p50()).isCloseTo(0.1, within(0.001));
    assertThat(p.durationSeconds()).isEqualTo(2.0);
    assertThat(p.throughput().requestsPerSecond()).isEqualTo(3.0);
    assertThat(p.throughput().outputTokensPerSecond()).isEqualTo(33.0);
    assertThat(p.throughput().promptTokensPerSecond()).isEqualTo(3000.0);
    assertThat(p.notes()).containsExactly("a note");
  }

  @Test
  void cacheFiguresComeFromTheWorkersTruthBesideTheIdeal() {
    PolicyResult p = PolicyResult.summarize(RunDataFixtures.run("x", 40, 500), IDEAL);
    PolicyResult.Cache c = p.cache();
    assertThat(c.source()).isEqualTo("sim");
    assertThat(c.promptTokens()).isEqualTo(6000);
    assertThat(c.cachedTokens()).isEqualTo(3000);
    assertThat(c.computedTokens()).isEqualTo(3000);
    assertThat(c.servedShare()).isEqualTo(0.5);
    assertThat(c.idealShare()).isEqualTo(0.5714);
    assertThat(c.servedVsIdeal()).isEqualTo(0.875);
    assertThat(c.hitRate()).isEqualTo(0.5);
    assertThat(c.usagePromptTokens()).isEqualTo(6000);
    assertThat(c.usageCachedTokens()).isEqualTo(3000);
    assertThat(c.usageResponses()).isEqualTo(6);
  }

  @Test
  void withoutScrapesTheUsageIsTheSource() {
    RunData r = RunDataFixtures.run("x", 40, 250);
    RunData bare = new RunData("x", r.workers(), r.requests(), r.itlMicros(), r.durationMicros(), Map.of(), List.of(),
        250_000, null, null, -1, null, 1, List.of(), null);
    PolicyResult p = PolicyResult.summarize(bare, IDEAL);
    assertThat(p.cache().source()).isEqualTo("usage");
    assertThat(p.cache().servedShare()).isEqualTo(0.25);
    assertThat(p.cache().hitRate()).isNull();
    assertThat(p.balance().prefillImbalance()).isNull();
    assertThat(p.balance().meanLoadImbalance()).isNull();
    assertThat(p.router()).isNull();
  }

  @Test
  void imbalanceIsMaxOverMean() {
    PolicyResult p = PolicyResult.summarize(RunDataFixtures.run("x", 40, 500), IDEAL);
    // requests a=3 b=2 c=1: mean 2, max 3
    assertThat(p.balance().requests()).containsExactly(Map.entry("a", 3L), Map.entry("b", 2L), Map.entry("c", 1L));
    assertThat(p.balance().requestImbalance()).isEqualTo(1.5);
    assertThat(p.balance().computedPrefillTokens()).containsEntry("a", 1500L);
    assertThat(p.balance().prefillImbalance()).isEqualTo(1.5);
    // work: a 1500 + 33, b 1000 + 22, c 500 + 11 = 1533 / 1022 / 511: mean 1022
    assertThat(p.balance().computedTokens()).containsExactly(Map.entry("a", 1533L), Map.entry("b", 1022L),
        Map.entry("c", 511L));
    assertThat(p.balance().workImbalance()).isEqualTo(1.5);
    // ticks: (4, 0, 0) -> 3.0; (1, 1, 1) -> 1.0; (0, -, -) has no load and does not count
    assertThat(p.balance().meanLoadImbalance()).isEqualTo(2.0);
    assertThat(PolicyResult.imbalance(List.of(0, 0))).isEqualTo(1.0);
    assertThat(PolicyResult.imbalance(List.of(5, 0, 0, 0, 0))).isEqualTo(5.0);
  }

  @Test
  void aWorkerWhoseScrapeASampleSkippedIsNotCountedIdle() {
    RunData base = RunDataFixtures.run("x", 40, 500);
    // every worker equally loaded throughout; c's scrape in the second tick was skipped (the previous one still
    // outstanding), and in the third only a answered
    List<LoadSample> load = List.of(new LoadSample(0, "a", 2, 1), new LoadSample(0, "b", 3, 0),
        new LoadSample(0, "c", 1, 2), new LoadSample(250_000, "a", 3, 0), new LoadSample(250_000, "b", 3, 0),
        new LoadSample(500_000, "a", 3, 0));
    RunData run = new RunData(base.policy(), base.workers(), base.requests(), base.itlMicros(),
        base.durationMicros(), base.counters(), load, 250_000, base.routerBefore(), base.routerAfter(),
        base.routerPeakHeapBytes(), base.overhead(), base.maxInFlight(), base.notes(), base.sessions());
    assertThat(PolicyResult.summarize(run, IDEAL).balance().meanLoadImbalance()).isEqualTo(1.0);
  }

  @Test
  void workImbalanceWeighsRequestsByTheTokensTheyCost() {
    // a: 3 requests, mostly served from cache (100 computed + 900 generated); b: 1 request computed whole
    RunData r = RunDataFixtures.run("x", 40, 500);
    Map<String, WorkerCounters> counters = new java.util.LinkedHashMap<>();
    counters.put("a", new WorkerCounters(3000, 2900, 3000, 900, 3, 100, 2900));
    counters.put("b", new WorkerCounters(1000, 0, 1000, 0, 1, 1000, 0));
    counters.put("c", new WorkerCounters(1000, 0, 1000, 0, 1, 1000, 0));
    RunData run = new RunData("x", r.workers(), r.requests(), r.itlMicros(), r.durationMicros(), counters, r.load(),
        r.loadIntervalMicros(), null, null, -1, null, 1, List.of(), null);
    PolicyResult p = PolicyResult.summarize(run, IDEAL);
    assertThat(p.balance().requestImbalance()).isEqualTo(1.5); // requests a=3 b=2 c=1
    // prefill 100 / 1000 / 1000: mean 700, max 1000
    assertThat(p.balance().prefillImbalance()).isEqualTo(1.429);
    // work 1000 / 1000 / 1000
    assertThat(p.balance().workImbalance()).isEqualTo(1.0);
  }

  @Test
  void theEnginesTtftIsTheirHistogramsMeanBesideTheClients() {
    RunData r = RunDataFixtures.run("x", 40, 500); // six requests, 40 ms to the first token at the client
    assertThat(PolicyResult.summarize(r, IDEAL).engineTtft()).as("no histogram scraped").isNull();
    // a: three first tokens in 0.09 s, b: two in 0.05 s, c exports no histogram: 0.14 s / 5 = 28 ms
    Map<String, WorkerCounters> counters = new java.util.LinkedHashMap<>();
    counters.put("a", new WorkerCounters(3000, 0, 3000, 30, 3, 3000, 0, 0.09, 3, 0.006, 0.1, 3));
    counters.put("b", new WorkerCounters(2000, 0, 2000, 20, 2, 2000, 0, 0.05, 2, 0.004, 0.06, 2));
    counters.put("c", new WorkerCounters(1000, 0, 1000, 10, 1, 1000, 0));
    RunData run = new RunData("x", r.workers(), r.requests(), r.itlMicros(), r.durationMicros(), counters, r.load(),
        r.loadIntervalMicros(), null, null, -1, null, 1, List.of(), null);
    PolicyResult.EngineTtft e = PolicyResult.summarize(run, IDEAL).engineTtft();
    assertThat(e.requests()).isEqualTo(5);
    assertThat(e.meanMs()).isEqualTo(28.0);
    assertThat(e.frontMs()).isCloseTo(12.0, within(0.1)); // 40 at the client
    assertThat(e.simLateMs()).as("of which the simulated engines' lateness: 10 ms over 5").isEqualTo(2.0);
    assertThat(e.simServerMs()).as("their servers' own TTFT: 0.16 s over 5").isEqualTo(32.0);
    // the histogram's _sum and _count change over a run like the other counters
    WorkerCounters before = new WorkerCounters(0, 0, 0, 0, 0, 0, 0, 1.5, 40, 0.1, 2.0, 40);
    WorkerCounters after = new WorkerCounters(0, 0, 0, 0, 0, 0, 0, 1.59, 43, 0.13, 2.1, 43);
    assertThat(after.minus(before).ttftSecondsSum()).isCloseTo(0.09, within(1e-9));
    assertThat(after.minus(before).ttftCount()).isEqualTo(3);
    assertThat(after.minus(before).simFirstTokenLateSeconds()).isCloseTo(0.03, within(1e-9));
    assertThat(after.minus(before).simHttpFirstChunks()).isEqualTo(3);
  }

  @Test
  void workersThatServedNothingCount() {
    RunData r = RunDataFixtures.run("x", 40, 500);
    RunData wider = new RunData("x", List.of("a", "b", "c", "d"), r.requests(), r.itlMicros(), r.durationMicros(),
        r.counters(), r.load(), r.loadIntervalMicros(), null, null, -1, null, 1, List.of(), null);
    PolicyResult p = PolicyResult.summarize(wider, IDEAL);
    assertThat(p.balance().requests()).containsEntry("d", 0L);
    assertThat(p.balance().requestImbalance()).isEqualTo(2.0); // 3 / (6 / 4)
  }

  @Test
  void routerCostFromSnapshots() {
    PolicyResult.RouterCost c = PolicyResult.summarize(RunDataFixtures.run("x", 40, 500), IDEAL).router();
    assertThat(c.cpuSeconds()).isEqualTo(0.6);
    assertThat(c.cpuMicrosPerRequest()).isEqualTo(100_000.0);
    assertThat(c.peakHeapBytes()).isEqualTo(20_000_000L);
    assertThat(c.heapUsedAfterBytes()).isEqualTo(12_000_000L);
    assertThat(c.rssAfterBytes()).isEqualTo(60_000_000L);
    assertThat(c.decisions().p99Micros()).isEqualTo(400);
    assertThat(c.jitCpuSeconds()).as("the snapshots cannot tell JIT apart").isNull();
    assertThat(c.cpuMicrosPerRequestWithoutJit()).isNull();
  }

  @Test
  void theJitShareOfTheRouterCpuIsReportedApart() {
    RunData r = RunDataFixtures.run("x", 40, 500);
    RunData withJit = new RunData(r.policy(), r.workers(), r.requests(), r.itlMicros(), r.durationMicros(),
        r.counters(), r.load(), r.loadIntervalMicros(), new RouterSnapshot(1_000_000_000L, -1, -1, 300_000_000L),
        new RouterSnapshot(1_600_000_000L, -1, -1, 450_000_000L), -1, r.overhead(), 1, List.of(), null);
    PolicyResult.RouterCost c = PolicyResult.summarize(withJit, IDEAL).router();
    assertThat(c.cpuSeconds()).isEqualTo(0.6);
    assertThat(c.jitCpuSeconds()).isEqualTo(0.15);
    // 6 requests sent: 0.6 s is 100 ms each, 0.45 s without the compiler threads 75 ms each
    assertThat(c.cpuMicrosPerRequest()).isEqualTo(100_000.0);
    assertThat(c.cpuMicrosPerRequestWithoutJit()).isEqualTo(75_000.0);
  }

  @Test
  void ttftCdfIsMonotone() {
    List<double[]> cdf = PolicyResult.summarize(RunDataFixtures.run("x", 40, 500), IDEAL).ttftCdf();
    assertThat(cdf).hasSize(103);
    for (int i = 1; i < cdf.size(); i++) {
      assertThat(cdf.get(i)[0]).isGreaterThanOrEqualTo(cdf.get(i - 1)[0]);
      assertThat(cdf.get(i)[1]).isGreaterThan(cdf.get(i - 1)[1]);
    }
    assertThat(cdf.get(cdf.size() - 1)[1]).isEqualTo(1.0);
  }

  @Test
  void countersDeltaHandlesResets() {
    WorkerCounters before = new WorkerCounters(100, 10, 100, 5, 1, Double.NaN, Double.NaN);
    WorkerCounters after = new WorkerCounters(150, 30, 160, 2, 3, 7, Double.NaN);
    WorkerCounters d = after.minus(before);
    assertThat(d.promptTokens()).isEqualTo(50);
    assertThat(d.prefixCacheHits()).isEqualTo(20);
    assertThat(d.generationTokens()).isEqualTo(2); // went down: restarted, count from zero
    assertThat(d.simPrefillComputed()).isEqualTo(7);
    assertThat(d.simPromptTokensCached()).isNaN();
  }
}
