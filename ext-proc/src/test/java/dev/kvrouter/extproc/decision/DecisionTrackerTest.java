package dev.kvrouter.extproc.decision;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.protobuf.ByteString;
import dev.kvrouter.extproc.load.FakeClock;
import dev.kvrouter.extproc.load.LoadLedger;
import dev.kvrouter.extproc.load.LoadTracker;
import dev.kvrouter.extproc.load.ScrapedLoadSource;
import dev.kvrouter.extproc.load.WorkerHealth;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.routing.Decision;
import dev.kvrouter.extproc.routing.ModelRouting;
import dev.kvrouter.extproc.routing.Overlap;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.extproc.routing.PromptInfo;
import dev.kvrouter.extproc.routing.RequestTimings;
import dev.kvrouter.extproc.routing.RouteRequest;
import dev.kvrouter.extproc.routing.Router;
import dev.kvrouter.extproc.routing.RoutingConfig;
import dev.kvrouter.extproc.routing.StaleViewTrust;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** A request's life after its decision, as RequestStream drives the listener. */
class DecisionTrackerTest {

  static final ObjectMapper JSON = new ObjectMapper();
  static final int B = 16;

  final FakeClock clock = new FakeClock();
  final WorkerRegistry registry = new WorkerRegistry();
  final LoadLedger ledger = new LoadLedger(clock, TimeUnit.SECONDS.toNanos(300), 1000);
  final WorkerHealth health = new WorkerHealth(clock, 3, 5, TimeUnit.SECONDS.toNanos(30));
  final SimpleMeterRegistry meters = new SimpleMeterRegistry();
  final List<String> lines = new ArrayList<>();
  final Map<WorkerId, Overlap> overlaps = new java.util.HashMap<>();
  DecisionTracker tracker = tracker(16, 100);
  Router router;

  DecisionTrackerTest() {
    registry.replace(List.of(Worker.simple("w1", "10.0.0.1", 8000, "m"), Worker.simple("w2", "10.0.0.2", 8000, "m")));
    router = router(StaleViewTrust.NONE);
  }

  Router router(StaleViewTrust trust) {
    return Router.builder(registry)
        .config(new RoutingConfig(ModelRouting.defaults("kv_aware"), Map.of(), B, 64, 64))
        .overlaps(hashes -> id -> overlaps.getOrDefault(id, Overlap.NONE))
        .load(new LoadTracker(ledger, ScrapedLoadSource.NONE, clock, 1))
        .health(health)
        .staleViewTrust(trust)
        .nanoTime(clock)
        .random(() -> new Random(9))
        .build();
  }

  DecisionTracker tracker(int maxCandidates, int maxTracked) {
    DecisionLog log = new DecisionLog(lines::add, Clock.fixed(Instant.parse("2026-01-02T03:04:05Z"), ZoneOffset.UTC),
        maxCandidates, true);
    return new DecisionTracker(ledger, health, log, new DecisionMetrics(meters), clock, maxTracked,
        TimeUnit.SECONDS.toNanos(300));
  }

  static RouteRequest request(String id, boolean stream, int blocks) {
    return request(id, "m", stream, blocks);
  }

  static RouteRequest request(String id, String model, boolean stream, int blocks) {
    long[] h = new long[blocks];
    for (int i = 0; i < blocks; i++) {
      h[i] = 500 + i;
    }
    return new RouteRequest(id, new InferenceRequest(InferenceRequest.Kind.CHAT, model, stream, null, 32),
        RouteRequest.tenantPseudonym("tenant-7"), null, null, new PromptInfo(blocks * B + 3, B, h), null, 0, new RequestTimings(5000, 0, 0, 0));
  }

  static ByteString bytes(String s) {
    return ByteString.copyFromUtf8(s);
  }

  JsonNode line(int i) throws Exception {
    return JSON.readTree(lines.get(i));
  }

  @Test
  void aStreamedRequestIsReleasedInTwoStepsAndRecordedTwice() throws Exception {
    overlaps.put(WorkerId.of("w2"), new Overlap(6, 0, 0, 0, false));
    Decision d = router.route(request("req-1", true, 8));
    assertThat(d.chosen().name()).isEqualTo("w2");
    tracker.onDecision(d);
    assertThat(lines).as("the decision line waits until the request has left").isEmpty();
    // reserved: 8 full blocks + 1 partial (131 tokens) - 6 cached = 35 prefill tokens; 9 prompt + 2 output blocks
    assertThat(ledger.local(WorkerId.of("w2")).prefillTokens()).isEqualTo(131 - 6 * B);
    assertThat(ledger.local(WorkerId.of("w2")).decodeBlocks()).isEqualTo(11);

    assertThat(d.detail().candidates()).hasSize(2);
    clock.advance(15, TimeUnit.MILLISECONDS); // the upstream's headers come after the decision
    tracker.onResponseHeaders(d, 200);
    assertThat(lines).hasSize(1);
    // written: the in-flight decision no longer keeps its candidates alive
    assertThat(d.detail().candidates()).isEmpty();
    assertThat(d.detail().chosen().worker().name()).isEqualTo("w2");
    clock.advance(25, TimeUnit.MILLISECONDS);
    tracker.onResponseBody(d, bytes("data: {\"choices\":[{\"delta\":{\"content\":\"cached_tokens\"}}]}\n\n"), true,
        false);
    assertThat(ledger.local(WorkerId.of("w2")).prefillTokens()).isZero();
    assertThat(ledger.local(WorkerId.of("w2")).decodeBlocks()).isEqualTo(11);
    clock.advance(60, TimeUnit.MILLISECONDS);
    tracker.onResponseBody(d, bytes("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":131,\"prompt_tokens"), false,
        false);
    tracker.onResponseBody(d, bytes("_details\":{\"cached_tokens\":96}}}\n\ndata: [DONE]\n\n"), false, true);
    tracker.onEnd(d, false);
    assertThat(ledger.totals()).containsExactly(0, 0, 0, 0, 0);

    JsonNode dec = line(0);
    assertThat(dec.path("event").asText()).isEqualTo("decision");
    assertThat(dec.path("id").asText()).isEqualTo("req-1");
    assertThat(dec.path("ts").asText()).as("when it was routed, though written when the headers came")
        .isEqualTo("2026-01-02T03:04:04.985Z");
    assertThat(dec.path("model").asText()).isEqualTo("m");
    assertThat(dec.path("tenant_hash").asText()).hasSize(16);
    assertThat(dec.path("policy").asText()).isEqualTo("kv_aware");
    assertThat(dec.path("chosen").asText()).isEqualTo("w2");
    assertThat(dec.path("reason").asText()).isEqualTo("lowest_cost");
    assertThat(dec.path("fallback").isNull()).isTrue();
    assertThat(dec.path("prompt_tokens").asLong()).isEqualTo(131);
    assertThat(dec.path("prompt_blocks").asInt()).isEqualTo(9);
    assertThat(dec.path("predicted_cached_tokens").asLong()).isEqualTo(96);
    JsonNode w2 = dec.path("candidates").get(1);
    assertThat(w2.path("worker").asText()).isEqualTo("w2");
    assertThat(w2.path("overlap").path("gpu").asInt()).isEqualTo(6);
    // w2: prefill 9 - 6 = 3 blocks, + 3 new (new_prefill_weight 1), + 0.1 x held (9 + 2) + 0.1 x read (9 + 2)
    // -> 8.2; w1: 9 + 9 + 2.2 = 20.2
    assertThat(w2.path("cost").asDouble()).isCloseTo(8.2, within(1e-9));
    assertThat(dec.path("candidates").get(0).path("cost").asDouble()).isCloseTo(20.2, within(1e-9));
    assertThat(w2.path("eligible").asBoolean()).isTrue();
    assertThat(w2.has("read_steps")).as("no step budget, no factor").isFalse();
    assertThat(dec.path("timings_us").path("parse").asDouble()).isEqualTo(5.0);
    assertThat(lines.get(0)).doesNotContain("tenant-7");

    JsonNode out = line(1);
    assertThat(out.path("event").asText()).isEqualTo("outcome");
    assertThat(out.path("worker").asText()).isEqualTo("w2");
    assertThat(out.path("status").asInt()).isEqualTo(200);
    assertThat(out.path("aborted").asBoolean()).isFalse();
    assertThat(out.path("predicted_cached_tokens").asLong()).isEqualTo(96);
    assertThat(out.path("actual_cached_tokens").asLong()).isEqualTo(96);
    assertThat(out.path("reported_prompt_tokens").asLong()).isEqualTo(131);
    assertThat(out.path("truth").asText()).isEqualTo("within_block");
    assertThat(out.path("ttft_ms").asDouble()).isEqualTo(40.0);
    assertThat(out.path("duration_ms").asDouble()).isEqualTo(100.0);

    assertThat(meters.get("kvrouter.routing.decisions").tags("policy", "kv_aware", "reason", "lowest_cost",
        "fallback", "none").counter().count()).isEqualTo(1);
    assertThat(meters.get("kvrouter.truth.checks").tags("worker", "w2", "outcome", "within_block").counter().count())
        .isEqualTo(1);
    assertThat(meters.get("kvrouter.truth.actual.cached.tokens").counter().count()).isEqualTo(96);
    assertThat(meters.get("kvrouter.request.ttft").timer().totalTime(TimeUnit.MILLISECONDS)).isEqualTo(40.0);
    assertThat(meters.get("kvrouter.routing.chosen.overlap.blocks").summary().totalAmount()).isEqualTo(6);
    assertThat(tracker.tracking()).isZero();
  }

  /**
   * The truth meters are per worker: kept for every worker that ever served a request, they grew without bound as
   * workers came and went (the ledger's per-worker gauges are removed when a worker leaves; these were not).
   */
  @Test
  void aDepartedWorkersTruthMetersAreRemoved() {
    DecisionMetrics metrics = new DecisionMetrics(meters);
    overlaps.put(WorkerId.of("w1"), new Overlap(8, 0, 0, 0, false));
    Decision d1 = router.route(request("r1", false, 8));
    overlaps.clear();
    overlaps.put(WorkerId.of("w2"), new Overlap(8, 0, 0, 0, false));
    Decision d2 = router.route(request("r2", false, 8));
    assertThat(List.of(d1.chosen().name(), d2.chosen().name())).containsExactly("w1", "w2");
    metrics.outcome(d1, new TruthCheck(128, 16, B), -1, -1);
    metrics.outcome(d2, new TruthCheck(128, 128, B), -1, -1);
    assertThat(meters.find("kvrouter.truth.checks").tag("worker", "w1").meters()).hasSize(1);

    registry.replace(List.of(Worker.simple("w2", "10.0.0.2", 8000, "m"))); // w1 left the fleet
    metrics.retain(registry.current().all());
    for (String name : List.of("kvrouter.truth.checks", "kvrouter.truth.error.blocks",
        "kvrouter.truth.predicted.cached.tokens", "kvrouter.truth.actual.cached.tokens")) {
      assertThat(meters.find(name).tag("worker", "w1").meters()).as(name).isEmpty();
      assertThat(meters.find(name).tag("worker", "w2").meters()).as(name).hasSize(1);
    }
  }

  /**
   * A request sent to a worker just before it left ends after the fleet change (its stream outlives the worker's
   * cluster): its outcome registered the departed worker's truth meters again, kept until the next fleet change, and
   * for good when no change came.
   */
  @Test
  void aRequestEndingAfterItsWorkerLeftRegistersNoMetersForIt() {
    DecisionMetrics metrics = new DecisionMetrics(meters);
    overlaps.put(WorkerId.of("w1"), new Overlap(8, 0, 0, 0, false));
    Decision d = router.route(request("r1", false, 8));
    assertThat(d.chosen().name()).isEqualTo("w1");
    metrics.retain(registry.current().all());
    registry.replace(List.of(Worker.simple("w2", "10.0.0.2", 8000, "m"))); // w1 leaves while r1 is in flight
    metrics.retain(registry.current().all());
    metrics.outcome(d, new TruthCheck(128, 128, B), 1_000_000, 2_000_000);
    for (String name : List.of("kvrouter.truth.checks", "kvrouter.truth.error.blocks",
        "kvrouter.truth.predicted.cached.tokens", "kvrouter.truth.actual.cached.tokens")) {
      assertThat(meters.find(name).tag("worker", "w1").meters()).as(name).isEmpty();
    }
    assertThat(meters.get("kvrouter.request.duration").timer().count()).as("the policy's own meters").isEqualTo(1);
  }

  /**
   * Every decision and every outcome found its meters by name: Micrometer builds and hashes a meter id (sorted tags)
   * for each lookup, eight per request, on the routing threads and the gRPC event loops.
   */
  @Test
  void aRequestsMetersAreFoundWithoutBuildingTheirIds() {
    DecisionMetrics metrics = new DecisionMetrics(meters);
    metrics.retain(registry.current().all());
    overlaps.put(WorkerId.of("w1"), new Overlap(8, 0, 0, 0, false));
    Decision d = router.route(request("r1", true, 8));
    TruthCheck truth = new TruthCheck(128, 112, B);
    for (int i = 0; i < 2000; i++) { // registered, compiled
      metrics.decision(d);
      metrics.outcome(d, truth, 1_000_000, 2_000_000);
    }
    com.sun.management.ThreadMXBean threads =
        (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
    int rounds = 1000;
    long before = threads.getCurrentThreadAllocatedBytes();
    for (int i = 0; i < rounds; i++) {
      metrics.decision(d);
      metrics.outcome(d, truth, 1_000_000, 2_000_000);
    }
    long perRequest = (threads.getCurrentThreadAllocatedBytes() - before) / rounds;
    assertThat(perRequest).isLessThan(256);
    assertThat(meters.get("kvrouter.routing.decisions").tag("policy", "kv_aware").counter().count()).isEqualTo(3000);
    assertThat(meters.get("kvrouter.truth.checks").tag("worker", "w1").tag("outcome", "over").counter().count())
        .isEqualTo(3000);
    assertThat(meters.get("kvrouter.truth.error.blocks").tag("worker", "w1").summary().totalAmount())
        .isEqualTo(3000);
    assertThat(meters.get("kvrouter.request.ttft").tag("policy", "kv_aware").timer().count()).isEqualTo(3000);
    assertThat(meters.get("kvrouter.routing.chosen.overlap.blocks").summary().count()).isEqualTo(3000);
  }

  /**
   * The eviction share is a gauge per model or adapter name routed to: a name the fleet no longer serves (an
   * adapter unloaded, a model retired) loses it at the next fleet change, or LoRA churn would add gauges for ever.
   */
  @Test
  void namesTheFleetNoLongerServesLoseTheirEvictionShareGauge() {
    DecisionMetrics metrics = new DecisionMetrics(meters);
    List<String> adapters = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      adapters.add("lora-" + i);
    }
    Worker plain = Worker.simple("w1", "10.0.0.1", 8000, "m");
    registry.replace(List.of(new Worker("w1", "10.0.0.1", 8000, "m", adapters, null, null, 1, B, 1, null, false,
        null)));
    for (String a : adapters) {
      metrics.decision(router.route(request("r-" + a, a, false, 8)));
    }
    assertThat(meters.find("kvrouter.routing.eviction.share").gauges()).hasSize(20);

    registry.replace(List.of(plain)); // the adapters were unloaded
    metrics.retain(registry.current().all());
    assertThat(meters.find("kvrouter.routing.eviction.share").gauges()).isEmpty();

    metrics.decision(router.route(request("r-m", "m", false, 8)));
    assertThat(meters.find("kvrouter.routing.eviction.share").tag("model", "m").gauges()).hasSize(1);
    registry.replace(List.of(new Worker("w1", "10.0.0.1", 8000, "m", List.of("lora-0"), null, null, 1, B, 1, null,
        false, null)));
    metrics.retain(registry.current().all());
    metrics.decision(router.route(request("r-lora-0", "lora-0", false, 8)));
    assertThat(meters.find("kvrouter.routing.eviction.share").gauges()).as("a name served again is measured again")
        .hasSize(2);
  }

  @Test
  void aWrongPictureShowsAsOverOrUnder() throws Exception {
    overlaps.put(WorkerId.of("w1"), new Overlap(8, 0, 0, 0, false));
    Decision d = router.route(request("r", false, 8));
    tracker.onDecision(d);
    tracker.onResponseHeaders(d, 200);
    tracker.onResponseBody(d, bytes("{\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":16}}}"), true, true);
    tracker.onEnd(d, false);
    JsonNode out = line(1);
    assertThat(out.path("truth").asText()).isEqualTo("over"); // expected 128, got 16
    assertThat(out.path("ttft_ms").isNull()).as("not streamed: no TTFT").isTrue();
    assertThat(meters.get("kvrouter.truth.error.blocks").summary().max()).isEqualTo(7.0);
    assertThat(new TruthCheck(0, 64, 16).outcome()).isEqualTo("under");
    assertThat(new TruthCheck(32, 47, 16).outcome()).isEqualTo("within_block");
    assertThat(new TruthCheck(32, 48, 16).outcome()).isEqualTo("under");
  }

  @Test
  void aCandidateWhoseFirstTokenWaitsSeveralStepsRecordsTheFactorItsReadsWereCountedBy() throws Exception {
    overlaps.put(WorkerId.of("w2"), new Overlap(6, 0, 0, 0, false));
    // 64-token steps. w1 computes all 9 blocks (144 tokens): 2.25 steps, so 9 + 9 + 0.1 x 11 + 0.1 x 11 x 2.25 =
    // 21.575. w2 computes 3 (48 tokens), inside one step: 8.2 as without a budget, and no factor recorded
    Decision d = router.route(request("steps", false, 8).withWeightsOverride("step_tokens=64"));
    tracker.onDecision(d);
    tracker.onResponseHeaders(d, 200);
    JsonNode w1 = line(0).path("candidates").get(0);
    JsonNode w2 = line(0).path("candidates").get(1);
    assertThat(w1.path("read_steps").asDouble()).isEqualTo(2.25);
    assertThat(w1.path("read_blocks").asDouble()).isEqualTo(11.0);
    assertThat(w1.path("cost").asDouble()).isCloseTo(21.575, within(1e-9));
    assertThat(w2.has("read_steps")).isFalse();
    assertThat(w2.path("cost").asDouble()).isCloseTo(8.2, within(1e-9));
    tracker.onEnd(d, false);
  }

  @Test
  void theUsageOfARequestSentToAStaleViewTestsThatView() throws Exception {
    StaleViewTrust trust = new StaleViewTrust();
    tracker = new DecisionTracker(ledger, health, trust, new DecisionLog(lines::add, Clock.systemUTC(), 16, true),
        new DecisionMetrics(meters), clock, 100, TimeUnit.SECONDS.toNanos(300));
    router = router(trust);
    trust.staleChanged(WorkerId.of("w1"), true, "gap");
    overlaps.put(WorkerId.of("w1"), new Overlap(8, 0, 0, 0, true));
    overlaps.put(WorkerId.of("w2"), new Overlap(0, 0, 0, 0, false));
    Decision d = router.route(request("s", false, 8));
    assertThat(d.chosen().name()).isEqualTo("w1");
    tracker.onDecision(d);
    tracker.onResponseHeaders(d, 200);
    // the engine had none of the 8 blocks the stale view claimed
    tracker.onResponseBody(d, bytes("{\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":0}}}"), true, true);
    tracker.onEnd(d, false);
    assertThat(trust.trust(WorkerId.of("w1"))).isEqualTo(32 * 0.9 / (64 * 0.9 + 8), within(1e-9));
    assertThat(line(0).path("candidates").get(0).path("view_trust").asDouble()).isEqualTo(0.5);
    // an error response says nothing about the cache
    Decision failed = router.route(request("f", false, 8));
    tracker.onDecision(failed);
    tracker.onResponseHeaders(failed, 503);
    tracker.onResponseBody(failed, bytes("{\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":0}}}"), true,
        true);
    tracker.onEnd(failed, false);
    assertThat(trust.trust(WorkerId.of("w1"))).isEqualTo(32 * 0.9 / (64 * 0.9 + 8), within(1e-9));
  }

  @Test
  void aResponseLeftAfterItsFirstChunkKeepsItsTtftAndRecordsItsTruthAsSkipped() throws Exception {
    Decision d = router.route(request("left", true, 4));
    tracker.onDecision(d);
    tracker.onResponseHeaders(d, 200);
    clock.advance(40, TimeUnit.MILLISECONDS);
    tracker.onResponseBody(d, bytes("data: {\"choices\":[{\"text\":\"a\"}]}\n\n"), true, false);
    clock.advance(900, TimeUnit.MILLISECONDS);
    tracker.onObserverLeft(d); // the routing stream reports, right before the end
    tracker.onEnd(d, false);
    assertThat(ledger.totals()).containsExactly(0, 0, 0, 0, 0);
    JsonNode out = line(1);
    assertThat(out.path("truth").asText()).isEqualTo("skipped");
    assertThat(out.path("actual_cached_tokens").isNull()).isTrue();
    assertThat(out.path("ttft_ms").asDouble()).isEqualTo(40.0);
    assertThat(out.path("duration_ms").asDouble()).isEqualTo(940.0);
    assertThat(meters.get("kvrouter.truth.checks").tag("outcome", "skipped").counter().count()).isEqualTo(1.0);
    assertThat(meters.find("kvrouter.truth.error.blocks").summary()).as("no error without a reading").isNull();
  }

  @Test
  void aCancelBeforeTheFirstByteReleasesEverythingAndIsMarkedAborted() throws Exception {
    Decision d = router.route(request("gone", true, 4));
    tracker.onDecision(d);
    assertThat(ledger.liveReservations()).isEqualTo(1);
    tracker.onEnd(d, true);
    assertThat(ledger.totals()).containsExactly(0, 0, 0, 0, 0);
    assertThat(lines).hasSize(2);
    JsonNode out = line(1);
    assertThat(out.path("aborted").asBoolean()).isTrue();
    assertThat(out.path("status").isNull()).isTrue();
    assertThat(out.path("truth").asText()).isEqualTo("unknown");
  }

  @Test
  void errorResponsesAreNotScannedAndFeedOutlierDetection() throws Exception {
    registry.replace(List.of(Worker.simple("w1", "10.0.0.1", 8000, "m")));
    for (int i = 0; i < 5; i++) {
      assertThat(health.unhealthyReason("w1")).isNull();
      Decision d = router.route(request("e" + i, false, 2));
      assertThat(d.fallback()).isNull();
      tracker.onDecision(d);
      tracker.onResponseHeaders(d, 503);
      tracker.onResponseBody(d, bytes("{\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":16}}}"), true, true);
      tracker.onEnd(d, false);
      assertThat(line(lines.size() - 1).path("truth").asText()).isEqualTo("unknown");
    }
    assertThat(health.unhealthyReason("w1")).isEqualTo(WorkerHealth.EJECTED);
    // the only worker is ejected: still served, visibly
    assertThat(router.route(request("after", false, 2)).fallback()).isEqualTo("all_unhealthy");
  }

  @Test
  void rejectionsAreRecordedAtOnceAndNeedNoRelease() throws Exception {
    Decision d = router.route(new RouteRequest("nope", new InferenceRequest(InferenceRequest.Kind.CHAT, "other",
        false, null, -1), null, null));
    tracker.onDecision(d);
    tracker.onEnd(d, false);
    assertThat(lines).hasSize(1);
    JsonNode dec = line(0);
    assertThat(dec.path("chosen").isNull()).isTrue();
    assertThat(dec.path("status").asInt()).isEqualTo(404);
    assertThat(dec.path("reason").asText()).isEqualTo("model_not_served");
    assertThat(dec.path("fallback").asText()).isEqualTo("no_tokenization");
    assertThat(meters.get("kvrouter.routing.fallbacks").tags("fallback", "no_tokenization").counter().count())
        .isEqualTo(1);
  }

  /**
   * A model no worker serves is whatever the client wrote in {@code model} (any text, up to the body limit): the
   * 404 answer echoes it to the client as vLLM does, but the record, which ops keep, must not carry it.
   */
  @Test
  void aRejectedModelNameIsTheClientsTextAndNeverRecorded() throws Exception {
    String marker = "summarise this confidential memo zqx";
    Decision d = router.route(new RouteRequest("nope", new InferenceRequest(InferenceRequest.Kind.CHAT, marker,
        false, null, -1), null, null));
    tracker.onDecision(d);
    tracker.onEnd(d, false);
    assertThat(lines).singleElement().asString().doesNotContain("zqx");
    assertThat(line(0).path("model").isNull()).isTrue();
    assertThat(line(0).path("reason").asText()).isEqualTo("model_not_served");
  }

  @Test
  void longFleetsListTheChosenAndTheCheapestCandidates() throws Exception {
    List<Worker> many = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      many.add(Worker.simple("w" + i, "10.0.1." + i, 8000, "m"));
    }
    registry.replace(many);
    overlaps.put(WorkerId.of("w13"), new Overlap(3, 0, 0, 0, false));
    tracker = tracker(4, 100);
    Decision d = router.route(request("big", false, 4));
    tracker.onDecision(d);
    tracker.onEnd(d, false);
    JsonNode dec = line(0);
    assertThat(dec.path("candidates")).hasSize(4);
    assertThat(dec.path("candidates").get(0).path("worker").asText()).isEqualTo("w13");
    assertThat(dec.path("candidates_omitted").asInt()).isEqualTo(16);
  }

  @Test
  void trackingIsBoundedAndSweptButReleaseNeverDependsOnIt() {
    tracker = tracker(16, 2);
    List<Decision> ds = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      Decision d = router.route(request("t" + i, true, 2));
      tracker.onDecision(d);
      ds.add(d);
    }
    assertThat(tracker.tracking()).isEqualTo(2);
    assertThat(tracker.untracked()).isEqualTo(2);
    clock.advance(301, TimeUnit.SECONDS);
    assertThat(lines).hasSize(2); // the two untracked ones were written at once
    assertThat(tracker.sweep()).isEqualTo(2);
    assertThat(lines).hasSize(4); // the swept ones get their decision line too
    for (Decision d : ds) {
      tracker.onResponseBody(d, bytes("x"), true, false);
      tracker.onEnd(d, false);
    }
    assertThat(ledger.totals()).containsExactly(0, 0, 0, 0, 0);
  }
}
