package dev.kvrouter.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.ab.EngineIdeals;
import dev.kvrouter.examples.loadgen.PolicyPreparer;
import dev.kvrouter.examples.report.AbReport;
import dev.kvrouter.examples.report.PolicyResult;
import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.report.WorkloadResult;
import dev.kvrouter.examples.sim.http.ScriptedOutput;
import dev.kvrouter.examples.workload.ImagePart;
import dev.kvrouter.examples.workload.PromptIds;
import dev.kvrouter.examples.workload.TokenSpace;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import dev.kvrouter.examples.workload.WorkloadRequest;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The A/B runner on the {@code image-qa} workload through real Envoy, shortened for CI: four simulated Gemma 3
 * multimodal workers ({@code kvrouter-sim --multimodal gemma3}: the model's real tokenizer and template, images
 * expanded as the router expands them, KV events with vLLM's {@code [identifier, offset]} extra keys over ZMQ), the
 * router with the gemma3 model entry and its {@code multimodal: {preset: gemma3}}, Envoy with the benchmark variant
 * of the shipped config, and the load generator sending each image as an {@code image_url} part with and without
 * its {@code uuid}.
 *
 * <ul>
 *   <li>every request succeeds, the router's predicted cached tokens match the workers' {@code cached_tokens},
 *       kv_aware serves more image blocks from cache than round-robin could on this workload whatever its rotation,
 *       and the report's ideal (the prompts as the workers prefill them) bounds what both served;
 *   <li>a closed-loop multi-turn run carries its {@code sessions} figures in report.json.
 * </ul>
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class ImageQaAbE2eTest {

  static final String MODEL = "google/gemma-3-4b-it";
  static final int BS = AbRuns.BS;
  static final int WORKERS = AbRuns.WORKERS;

  @AutoClose
  AbRuns.Fleet fleet;

  @BeforeAll
  void start() throws Exception {
    // scripted output for the multi-turn run; image requests carry no seed and keep the worker's own output
    fleet = AbRuns.Fleet.start(MODEL, "gemma3", "gemma3", 13, new ScriptedOutput(TokenSpace.DEFAULT));
  }

  @Test
  void kvAwareServesRepeatedImagesFromCacheWithAndWithoutUuids(@TempDir Path out) throws Exception {
    // 3 images, one per request, 24 requests evenly spaced (uniform arrivals 100 ms apart: they reach the router in
    // order). Round-robin sends request i to worker (i + c) mod 4 for some c (one counter, one step per request,
    // workers in a fixed order), so request i can find its image cached only if an earlier request j = i (mod 4)
    // sent the same image, whatever c: that count bounds round-robin's image hits from the workload alone. kv_aware,
    // at this light load, computes each image once and sends its repeats to the holder: 24 - 3 hits. The workload
    // is checked to leave a margin between the two, so kv_aware cannot pass by round-robin's luck.
    String spec = "image-qa:count=24,rate=10,arrival=uniform,images=3,per-request=1,zipf=0,system=64,question=8..16,"
        + "output=4..8,seed=3,uuid=yes|no";
    Map<String, List<RequestRecord>> records = new LinkedHashMap<>();
    PolicyPreparer keep = (policy, w, ctx) -> ctx.routingOverhead(r -> {
      records.put(w.params().get("uuid") + "/" + policy, r);
      return null;
    }).build();
    String before = fleet.stack().routerMetrics();
    EngineIdeals ideals = fleet.ideals();
    ByteArrayOutputStream progress = new ByteArrayOutputStream();
    AbReport report = fleet.run(List.of(spec), List.of("kv_aware", "round_robin"), keep, ideals, out, progress);
    String log = progress.toString(StandardCharsets.UTF_8);
    String after = fleet.stack().routerMetrics();

    assertThat(report.workloads()).hasSize(2);
    for (WorkloadResult section : report.workloads()) {
      Workload w = WorkloadCatalog.create(section.spec());
      String uuid = String.valueOf(w.params().get("uuid"));
      assertThat(w.hasImages()).isTrue();
      assertThat(w.requests()).allSatisfy(r -> assertThat(r.prompt().messages().get(1).images())
          .allSatisfy(i -> assertThat(i.uuid() != null).isEqualTo(uuid.equals("yes"))));
      List<String> images = new ArrayList<>();
      List<Integer> preImage = new ArrayList<>();
      Function<WorkloadRequest, PromptIds> prompts = ideals.prompts(w);
      for (WorkloadRequest r : w.requests()) {
        images.add(r.prompt().messages().get(1).images().stream().map(ImagePart::url).findFirst().orElseThrow());
        // the full blocks before the image: the shared system prompt, which every policy finds cached
        preImage.add(prompts.apply(r).media().get(0).offset() / BS * BS);
      }
      int distinct = new HashSet<>(images).size();
      int rrBound = roundRobinImageHitBound(images, WORKERS);
      assertThat(rrBound).as("the workload leaves kv_aware a margin over round-robin's best")
          .isLessThanOrEqualTo(images.size() - distinct - 6);

      PolicyResult ours = section.result("kv_aware");
      PolicyResult rr = section.result("round_robin");
      double ideal = section.idealTokenShare();
      for (PolicyResult r : List.of(ours, rr)) {
        assertThat(r.counts().failed()).as(uuid + " " + r.policy() + " " + r.errors() + "\n" + log).isZero();
        assertThat(r.counts().completed()).isEqualTo(24);
        assertThat(r.cache().source()).isEqualTo("sim");
        assertThat(r.cache().idealShare()).isEqualTo(ideal);
        assertThat(r.cache().servedShare()).as(uuid + " " + r.policy() + ": no policy beats the ideal")
            .isLessThanOrEqualTo(ideal + 1e-9);
        assertThat(r.sessions()).as("open loop").isNull();
      }
      int[] kv = imageHits(records.get(uuid + "/kv_aware"), preImage);
      int[] roundRobin = imageHits(records.get(uuid + "/round_robin"), preImage);
      // the bound above assumes the router sees the requests in arrival order; on a loaded box one can overtake the
      // one 100 ms before it and round-robin deals the rest differently (15 hits against a bound of 14 once in CI).
      // What holds whatever the order: a request finds its image cached only on a worker an earlier one carried the
      // same image to
      assertThat(roundRobin[0]).as(uuid + ": round-robin's image hits within its workers' repeats")
          .isLessThanOrEqualTo(sameWorkerRepeats(records.get(uuid + "/round_robin"), images));
      // and it dealt them round-robin, in whatever order it saw them: one counter, so each worker an equal share
      Map<String, Integer> dealt = new HashMap<>();
      records.get(uuid + "/round_robin").forEach(r -> dealt.merge(r.servedBy(), 1, Integer::sum));
      assertThat(dealt).as(uuid + ": round-robin's deal").hasSize(WORKERS)
          .allSatisfy((worker, n) -> assertThat(n).isEqualTo(images.size() / WORKERS));
      assertThat(kv[0]).as(uuid + ": kv_aware's image hits (round-robin at most %d)\n%s", rrBound, log)
          .isGreaterThan(rrBound);
      assertThat(kv[1]).as(uuid + ": image tokens served from cache").isGreaterThan(roundRobin[1]);
      assertThat(ours.cache().servedShare()).as(uuid + ": kv_aware's share of the ideal\n" + log)
          .isGreaterThan(0.85 * ideal);
    }
    // the router's predicted cached tokens against the workers' own cached_tokens, on all 96 requests. Without a
    // uuid the router names an image by its own predictions (5 s), which cover this 2.4 s run; a longer run shows
    // misses there (docs/benchmarks/ab.md). Not 100%: a repeat that reaches the holder while the image's first
    // request is still in prefill finds less than the router expected.
    double within = AbSmokeE2eTest.delta(before, after, "kvrouter_truth_checks_total", "outcome=\"within_block\"");
    double all = AbSmokeE2eTest.delta(before, after, "kvrouter_truth_checks_total", "");
    assertThat(all).isGreaterThanOrEqualTo(96);
    assertThat(within / all).as("predicted vs actual cached tokens within one block\n" + after.lines()
        .filter(l -> l.startsWith("kvrouter_truth_checks_total")).toList()).isGreaterThanOrEqualTo(0.97);
  }

  @Test
  void aClosedLoopRunReportsItsSessions(@TempDir Path out) throws Exception {
    String spec = "multi-turn:format=tokens,sessions=8,rate=4,turns=3,think=0.05,system=64,user=30..60,"
        + "output=20..40,seed=9";
    AbReport report = fleet.run(List.of(spec), List.of("kv_aware"), (p, w, ctx) -> ctx.build(), null, out,
        new ByteArrayOutputStream());
    PolicyResult r = report.workloads().get(0).result("kv_aware");
    assertThat(r.counts().failed()).as(r.errors().toString()).isZero();
    JsonNode s = new ObjectMapper().readTree(out.resolve("report.json").toFile()).path("workloads").get(0)
        .path("results").get(0).path("sessions");
    assertThat(s.isObject()).as("report.json sessions: %s", s).isTrue();
    assertThat(s.path("modelAnswers").asBoolean()).isTrue();
    assertThat(s.path("dependentTurns").asLong()).isEqualTo(16);
    // think 50 ms against answers of 20-40 decode steps: nearly every later turn waits for its previous answer
    long held = s.path("heldBack").asLong();
    assertThat(held).isBetween(1L, 16L);
    assertThat(s.path("meanHeldBackSeconds").asDouble() * held)
        .isCloseTo(s.path("heldBackSeconds").asDouble(), org.assertj.core.data.Offset.offset(1e-4 * held));
    assertThat(s.path("maxHeldBackSeconds").asDouble()).isPositive()
        .isLessThanOrEqualTo(s.path("heldBackSeconds").asDouble());
    assertThat(s.path("answersResentShort").asLong()).isZero();
    assertThat(s.path("answersResentEmpty").asLong()).isZero();
    assertThat(s.path("streamedAnswers").path("asScripted").asLong()).isEqualTo(24);
    // and the notes keep the line
    assertThat(r.notes()).contains("model answers: all 24 streamed answers were the scripted tokens")
        .anySatisfy(n -> assertThat(n).startsWith("closed loop: " + held + " of 16 dependent turns held back"));
  }

  /**
   * Requests whose image was sent earlier by a request of the same residue mod {@code workers}: the most
   * round-robin can find cached, whatever worker it starts with.
   */
  /**
   * Requests whose worker (as it served them) had been sent their image before: for each worker and image, all but
   * one.
   */
  static int sameWorkerRepeats(List<RequestRecord> records, List<String> images) {
    Map<String, Integer> perWorkerImage = new HashMap<>();
    for (RequestRecord r : records) {
      perWorkerImage.merge(r.servedBy() + "\u0000" + images.get(r.index()), 1, Integer::sum);
    }
    return perWorkerImage.values().stream().mapToInt(n -> n - 1).sum();
  }

  static int roundRobinImageHitBound(List<String> images, int workers) {
    List<Set<String>> seen = new ArrayList<>();
    for (int k = 0; k < workers; k++) {
      seen.add(new HashSet<>());
    }
    int hits = 0;
    for (int i = 0; i < images.size(); i++) {
      if (!seen.get(i % workers).add(images.get(i))) {
        hits++;
      }
    }
    return hits;
  }

  /** Requests served at least one image block from cache, and the image tokens served (beyond the blocks before). */
  static int[] imageHits(List<RequestRecord> records, List<Integer> preImage) {
    assertThat(records).hasSize(preImage.size());
    int hits = 0;
    int tokens = 0;
    for (RequestRecord r : records) {
      int beyond = r.cachedTokens() - preImage.get(r.index());
      if (beyond > 0) {
        hits++;
        tokens += beyond;
      }
    }
    return new int[] {hits, tokens};
  }
}
