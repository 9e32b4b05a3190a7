package dev.kvrouter.examples.ab;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.report.PolicyResult;
import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.report.WorkerCounters;
import dev.kvrouter.examples.sim.events.EventFaults;
import dev.kvrouter.examples.sim.testing.Fixtures;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import dev.kvrouter.index.wire.WireLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The virtual-time A/B driver: deterministic for a seed, the load ledger back at zero after every run, the
 * workers' truth counters consistent with what the requests saw, and the router's real behaviour (cache
 * affinity, predicted entries, stale views) visible through it.
 */
class VirtualRunTest {

  /** Small fleet and a short sharing workload: a run takes well under a second. */
  private static final VirtualSetup SETUP = VirtualSetup.defaults().withWorkers(4).withNumGpuBlocks(4096);
  private static final Workload SHARING =
      WorkloadCatalog.create("system-prompt:format=tokens,count=160,rate=40,prompt=1024,sharing=0.8,prefixes=32,"
          + "output=16,seed=3");

  /** 96 documents of 32-64 blocks, Zipf-popular, on 4 workers of 512 blocks: the fleet keeps evicting them. */
  private static final int SHORT_BLOCKS = 512;
  private static final Workload EVICTING =
      WorkloadCatalog.create("rag:count=1200,rate=40,documents=96,document=512..1024,zipf=0.8,output=16,seed=3");

  @Test
  void sameSeedGivesTheSameRunForEveryPolicy() {
    for (String policy : List.of("kv_aware", "round_robin", "least_load", "cache_only", "random", "dynamo", "llm_d")) {
      VirtualOutcome a = VirtualRun.run(SHARING, policy, SETUP, null);
      VirtualOutcome b = VirtualRun.run(SHARING, policy, SETUP, null);
      assertThat(b.data().requests()).as(policy).isEqualTo(a.data().requests());
      assertThat(b.data().counters()).as(policy).isEqualTo(a.data().counters());
      assertThat(b.data().load()).as(policy).isEqualTo(a.data().load());
      assertThat(b.truth()).as(policy).isEqualTo(a.truth());
    }
  }

  @Test
  void anotherSeedChangesTheRandomPolicysChoices() {
    VirtualOutcome a = VirtualRun.run(SHARING, "random", SETUP, null);
    VirtualOutcome b = VirtualRun.run(SHARING, "random", SETUP.withSeed(2), null);
    assertThat(servedBy(b)).isNotEqualTo(servedBy(a));
  }

  /**
   * A closed-loop turn held for its predecessor's answer is due when that answer is done, as the Envoy driver
   * schedules it: the hold is the conversation's (counted in the sessions figures), and a virtual run, with no
   * driver, has no send lag at all.
   */
  @Test
  void aHeldTurnIsDueWhenItsPredecessorIsDone() {
    Workload w = WorkloadCatalog.create("multi-turn:sessions=2,rate=10,turns=3,think=0.001,system=32,user=16,"
        + "output=50,format=tokens,seed=1");
    VirtualOutcome o = VirtualRun.run(w, "round_robin", VirtualSetup.defaults().withWorkers(2), null);
    long held = 0;
    for (RequestRecord r : o.data().requests()) {
      assertThat(r.scheduledMicros()).as(r.requestId()).isEqualTo(r.sentMicros());
      if (r.scheduledMicros() > w.requests().get(r.index()).arrivalMicros()) {
        held++;
      }
    }
    assertThat(held).isPositive().isEqualTo(o.data().sessions().heldBack());
    assertThat(PolicyResult.summarize(o.data(), null).sendLagMs().max()).isZero();
  }

  @Test
  void ledgerReturnsToZeroAndCountersAgreeWithTheRequests() {
    for (String policy : List.of("kv_aware", "round_robin", "least_load", "cache_only", "random", "dynamo", "llm_d")) {
      VirtualOutcome o = VirtualRun.run(SHARING, policy, SETUP, null);
      assertThat(o.ledger().zero()).as(policy + " " + o.ledger()).isTrue();
      assertThat(o.ledger().expired()).as(policy).isZero();
      assertCountersMatchRequests(o, policy);
    }
  }

  @Test
  void ledgerReturnsToZeroUnderEventFaultsAndFailedRequests() {
    // Prompts beyond the context are refused by the worker after the router reserved: released on the 400.
    Workload tooLong = WorkloadCatalog.create("unique:count=40,rate=20,prompt=2000..5000,output=8,seed=5");
    VirtualSetup limited = SETUP.withWorkers(3).withModel("m").withEngineLimits(64, 2048).withMaxModelLen(4096)
        .withEvents(WireLayout.VLLM_ARRAY, 0, new EventFaults(0.3, 40, 0.2, false))
        .withStaleRecovery(java.time.Duration.ofSeconds(1)).withSeed(9);
    VirtualOutcome o = VirtualRun.run(tooLong, "kv_aware", limited, null);
    assertThat(o.ledger().zero()).as(o.ledger().toString()).isTrue();
    long refused = o.data().requests().stream().filter(r -> "http_400".equals(r.error())).count();
    assertThat(refused).isPositive().isLessThan(40);
    assertThat(o.events().get("dropped_batches")).isPositive();
  }

  @Test
  void kvAwareServesMoreFromCacheThanRoundRobinAndPredictsWhatWorkersReport() {
    VirtualOutcome ours = VirtualRun.run(SHARING, "kv_aware", SETUP, null);
    VirtualOutcome rr = VirtualRun.run(SHARING, "round_robin", SETUP, null);
    PolicyResult a = PolicyResult.summarize(ours.data(), SHARING.idealReuse(16));
    PolicyResult b = PolicyResult.summarize(rr.data(), SHARING.idealReuse(16));
    // 32 prefixes, each used about 5 times, over 4 workers: round-robin computes a prefix again on almost every
    // worker it sends one to, kv_aware mostly once. (With 4 prefixes every worker soon holds every prefix under
    // any policy and the difference is a few percent.)
    assertThat(a.cache().servedShare()).isGreaterThan(b.cache().servedShare() + 0.05);
    assertThat(ours.truth().withinShare()).isGreaterThanOrEqualTo(0.99);
    assertThat(a.counts().failed()).isZero();
    assertThat(ours.events().get("not_prefix_closed_workers")).isZero();
  }

  /**
   * The anchors' policies on best-of-4 siblings, which arrive together before any event shows the prompt: Dynamo's
   * cost ties the holder (the first sibling's prefill queued there) with an idle worker and scatters the siblings,
   * so none is served from cache; llm-d's scoring reads events only and scatters most of them; kv_aware charges the
   * recomputed copy and keeps each group on one worker, so nearly all of the workload's ideal reuse (three of four
   * prompts) is served (98.7% / 0% / 18% of the ideal for kv_aware / dynamo / llm_d when written). The same
   * ordering as the A/B at rho 0.9 (74.9% / 0% / 27% served, docs/benchmarks/ab.md).
   */
  @Test
  void siblingsMeetUnderKvAwareAndScatterUnderTheAnchorsPolicies() {
    Workload siblings = WorkloadCatalog.create("best-of-n:groups=40,rate=4,n=4,prompt=1024..2048,output=16,seed=5");
    Map<String, Double> served = new java.util.HashMap<>();
    for (String policy : List.of("kv_aware", "dynamo", "llm_d")) {
      VirtualOutcome o = VirtualRun.run(siblings, policy, SETUP, null);
      PolicyResult r = PolicyResult.summarize(o.data(), siblings.idealReuse(16));
      assertThat(r.counts().failed()).as(policy).isZero();
      assertThat(o.ledger().zero()).as(policy).isTrue();
      served.put(policy, r.cache().servedVsIdeal());
    }
    assertThat(served.get("kv_aware")).as(served.toString()).isGreaterThanOrEqualTo(0.95);
    assertThat(served.get("dynamo")).as(served.toString()).isLessThan(0.2);
    assertThat(served.get("llm_d")).as(served.toString()).isLessThan(0.5);
  }

  /**
   * Two router replicas sharing their reservations over a 1 ms link, best-of-4 at the A/B's rho 0.9 rate on 8
   * workers: a group's copies are dealt to both replicas at the same instant and still meet on one worker, since
   * both break ties from what they know alike (the ledger's turns, a hash of the prompt), charge a cold prefill in
   * flight once and record a copied reservation's prediction with it: 99.55% of the ideal (one router 99.92%; with
   * the tie going at random after cost and load, 91.4%).
   */
  @Test
  void twoSyncedReplicasKeepBestOfNSiblingsOnOneWorker() {
    Workload w = WorkloadCatalog.create("best-of-n:groups=1000,rate=4.35,prompt=4096..16384,output=64..256,seed=1");
    VirtualSetup two = VirtualSetup.defaults().withWorkers(8).withSeed(1).withRouterReplicas(2)
        .withReplicaSync(java.time.Duration.ofMillis(1));
    VirtualOutcome o = VirtualRun.run(w, "kv_aware", two, null);
    PolicyResult r = PolicyResult.summarize(o.data(), w.idealReuse(16));
    assertThat(r.counts().failed()).isZero();
    assertThat(r.cache().servedVsIdeal()).isGreaterThanOrEqualTo(0.99);
  }

  /**
   * The eviction term (default {@code new_prefill_eviction_weight} 8) end to end: on a fleet whose memory holds its
   * working set it never acts (the router's eviction share is 0 and the run is the same as with the term off); on
   * one whose memory is short the router sees the fleet recompute what it evicted and charges copies more. Under
   * decode weights that spread a prefix's requests (0.45 per held block and 0.05 per block read, without the
   * hot-prefix relief: the weights it was tuned under) that serves more of the prompt from cache than with the
   * term off (57.4% and 60.2% when written); under the defaults, which make fewer copies to begin with, this small
   * fleet gains less, and the term must not cost it cache (on the A/B's image QA and Mooncake it still adds 4-5
   * points, BENCHMARKS.md).
   */
  @Test
  void theEvictionTermActsOnlyWhereTheFleetsMemoryIsShort() {
    VirtualOutcome on = VirtualRun.run(SHARING, "kv_aware", SETUP, null);
    VirtualOutcome off = VirtualRun.run(SHARING, "kv_aware", SETUP.withWeights("new_prefill_eviction_weight=0"), null);
    assertThat(on.evictionShare()).isZero();
    assertThat(on.data().requests()).isEqualTo(off.data().requests());

    VirtualSetup shortOfMemory = SETUP.withNumGpuBlocks(SHORT_BLOCKS);
    for (String decode : List.of("", "decode_load_scale=0.45,decode_read_weight=0.05,hot_prefix_relief=0,")) {
      // 8 is the default: with no decode override the first run is the defaults exactly
      VirtualOutcome shortOn = VirtualRun.run(EVICTING, "kv_aware",
          shortOfMemory.withWeights(decode + "new_prefill_eviction_weight=8"), null);
      VirtualOutcome shortOff = VirtualRun.run(EVICTING, "kv_aware",
          shortOfMemory.withWeights(decode + "new_prefill_eviction_weight=0"), null);
      assertThat(shortOn.evictionShare()).as(decode).isGreaterThan(0.05);
      PolicyResult a = PolicyResult.summarize(shortOn.data(), EVICTING.idealReuse(16));
      PolicyResult b = PolicyResult.summarize(shortOff.data(), EVICTING.idealReuse(16));
      double gain = decode.isEmpty() ? 0 : 0.02;
      assertThat(a.cache().servedShare()).as(decode).isGreaterThanOrEqualTo(b.cache().servedShare() + gain);
      assertThat(shortOn.ledger().zero()).isTrue();
    }
  }

  /**
   * The index's jump search (on by default) trusts each worker's blocks to be prefix-closed and walks workers whose
   * events show otherwise: engines that free like vLLM (a request's blocks tail first) under cache pressure must
   * never be taken for one.
   */
  @Test
  void evictingLikeVllmNeverMarksAWorkerNotPrefixClosed() {
    VirtualOutcome o = VirtualRun.run(SHARING, "kv_aware", SETUP.withNumGpuBlocks(384), null);
    assertThat(o.events().get("removed_blocks")).isGreaterThan(1000);
    assertThat(o.events().get("not_prefix_closed_workers")).isZero();
    assertThat(o.ledger().zero()).isTrue();
  }

  @Test
  void droppedEventsWithoutReplayMakeViewsStaleAndRoutingSaysSo() {
    VirtualSetup lossy = SETUP.withEvents(WireLayout.VLLM_MAP, 0, new EventFaults(0.5, 0, 0, false));
    VirtualOutcome o = VirtualRun.run(SHARING, "kv_aware", lossy, null);
    assertThat(o.events().get("gaps")).isPositive();
    assertThat(o.events().get("stale_transitions")).isPositive();
    assertThat(o.fallbacks()).containsKey("stale_events");
    assertThat(o.ledger().zero()).isTrue();

    VirtualSetup replayed = SETUP.withEvents(WireLayout.VLLM_MAP, 10_000, new EventFaults(0.5, 0, 0, false));
    VirtualOutcome r = VirtualRun.run(SHARING, "kv_aware", replayed, null);
    assertThat(r.events().get("gaps")).isPositive();
    assertThat(r.events().get("replays")).isPositive();
    assertThat(r.events().get("stale_transitions")).isZero();
    assertThat(r.fallbacks()).doesNotContainKey("stale_events");
  }

  @Test
  void lostBatchesWithoutReplayCostLessCacheWhenUsageConfirmsTheStaleViews() {
    // 200 documents at 20 req/s: most come back after the router's predicted entries (5 s) have gone, so only the
    // event view knows where they are
    Workload slow = WorkloadCatalog.create(
        "rag:count=1200,rate=20,documents=200,document=512..1024,zipf=0.8,output=16,seed=3");
    VirtualSetup lossy = SETUP.withEvents(WireLayout.VLLM_MAP, 0, new EventFaults(0.1, 0, 0, false));
    VirtualOutcome trusted = VirtualRun.run(slow, "kv_aware", lossy, null);
    VirtualOutcome blind = VirtualRun.run(slow, "kv_aware", lossy.withStaleViewTrust(false), null);
    VirtualOutcome onTime = VirtualRun.run(slow, "kv_aware", SETUP, null);
    assertThat(trusted.events().get("stale_transitions")).isPositive();
    assertThat(trusted.fallbacks()).containsKey("stale_events");
    double withTrust = served(slow, trusted);
    double without = served(slow, blind);
    double lost = served(slow, onTime) - without;
    assertThat(lost).as("what stale views cost without trust").isGreaterThan(0.1);
    assertThat(withTrust).as("trust wins back most of it").isGreaterThan(without + lost * 0.8);
    assertThat(trusted.ledger().zero()).isTrue();
  }

  private static double served(Workload w, VirtualOutcome o) {
    return PolicyResult.summarize(o.data(), w.idealReuse(16)).cache().servedShare();
  }

  @Test
  void directApplicationAndEveryWireLayoutIndexTheSameBlocks() {
    List<List<RequestRecord>> runs = new ArrayList<>();
    for (WireLayout l : new WireLayout[] {null, WireLayout.VLLM_MAP, WireLayout.VLLM_ARRAY, WireLayout.SGLANG_ARRAY}) {
      runs.add(VirtualRun.run(SHARING, "kv_aware", SETUP.withEvents(l, 0, EventFaults.NONE), null).data()
          .requests());
    }
    assertThat(runs).allMatch(r -> r.equals(runs.get(0)));
  }

  @Test
  void chatPromptsThroughTheRequestPathMatchTheWorkersTokenization() throws Exception {
    Workload chat = WorkloadCatalog.create("multi-turn:sessions=12,rate=4,turns=2..4,think=2,system=200,"
        + "user=20..60,output=8..16,seed=4");
    VirtualSetup qwen = SETUP.withPreset(Presets.byId("qwen3-8b-h100")).withNumGpuBlocks(4096);
    try (ChatFront front = ChatFront.load(qwen.model(), Fixtures.tokenizer("qwen3"), 16, null)) {
      VirtualOutcome o = VirtualRun.run(chat, "kv_aware", qwen, front);
      assertThat(o.data().requests()).allMatch(RequestRecord::ok);
      // Every later turn repeats the conversation: the worker serves it from cache and the router predicted it.
      assertThat(o.truth().withinShare()).isGreaterThanOrEqualTo(0.99);
      assertThat(o.truth().actualTokens()).isPositive();
      assertThat(o.fallbacks()).doesNotContainKey("no_tokenization");
      assertThat(o.ledger().zero()).isTrue();
    }
  }

  private static void assertCountersMatchRequests(VirtualOutcome o, String policy) {
    long prompt = 0;
    long cached = 0;
    long completion = 0;
    for (RequestRecord r : o.data().requests()) {
      assertThat(r.ok()).as(policy + " " + r).isTrue();
      prompt += r.promptTokens();
      cached += r.cachedTokens();
      completion += r.completionTokens();
    }
    double workerPrompt = 0;
    double workerCached = 0;
    double workerGenerated = 0;
    double computed = 0;
    for (WorkerCounters c : o.data().counters().values()) {
      workerPrompt += c.promptTokens();
      workerCached += c.simPromptTokensCached();
      workerGenerated += c.generationTokens();
      computed += c.simPrefillComputed();
    }
    assertThat(workerPrompt).as(policy).isEqualTo((double) prompt);
    assertThat(workerCached).as(policy).isEqualTo((double) cached);
    assertThat(workerGenerated).as(policy).isEqualTo((double) completion);
    assertThat(computed).as(policy).isGreaterThanOrEqualTo(workerPrompt - workerCached);
    assertThat(o.truth().actualTokens()).as(policy).isEqualTo(cached);
  }

  private static Map<Integer, String> servedBy(VirtualOutcome o) {
    Map<Integer, String> m = new java.util.TreeMap<>();
    for (RequestRecord r : o.data().requests()) {
      m.put(r.index(), r.servedBy());
    }
    return m;
  }
}
