package dev.kvrouter.examples.ab;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.loadgen.RequestBodies;
import dev.kvrouter.examples.report.PolicyResult;
import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.sim.engine.MediaSpan;
import dev.kvrouter.examples.sim.testing.Fixtures;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import dev.kvrouter.examples.workload.WorkloadRequest;
import dev.kvrouter.extproc.request.InferenceRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * The image-QA workload in virtual time on simulated Gemma 3 workers, the router on its real request path with
 * {@code multimodal: {preset: gemma3}}: with a uuid the router learns each image's blocks from the engines' events
 * and sends repeats to their holder, which serves the image from cache; without one the engines key (and hit) the
 * image by their own content hash, which the router learns from the first store of each image (docs/request-path.md,
 * "Multimodal identity"): an image's first request is credited from events with the blocks before it only, its
 * repeats with the whole image.
 *
 * <p>Requests arrive 25 ms apart on a cache that never evicts, several in flight at once, so kv_aware weighs the
 * overlap it sees against the load, as it does in production.
 */
@Timeout(300)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ImageQaVirtualRunTest {

  static final String MODEL = "google/gemma-3-4b-it";
  static final int BS = 16;
  static final String SPEC = "image-qa:count=120,rate=40,arrival=uniform,images=8,per-request=1,zipf=0.8,"
      + "system=48,question=8..24,output=16..32,seed=3";
  static final VirtualSetup SETUP = VirtualSetup.defaults().withWorkers(4).withNumGpuBlocks(4096).withModel(MODEL)
      .withMultimodal("gemma3");
  static final ObjectMapper JSON = new ObjectMapper();

  ChatFront front;

  @BeforeAll
  void load() throws Exception {
    front = ChatFront.load(MODEL, Fixtures.tokenizer("gemma3"), BS, SETUP.multimodalSpec());
  }

  @AfterAll
  void close() {
    if (front != null) {
      front.close();
    }
  }

  /** The image of a request as the worker places it (one image per request here). */
  MediaSpan image(Workload w, WorkloadRequest r) throws Exception {
    byte[] body = RequestBodies.body(w, r, MODEL);
    InferenceRequest parsed = front.preparer().prepare(InferenceRequest.Kind.CHAT, body, body.length, null).request();
    List<MediaSpan> media = front.encoder().prompt(parsed).media();
    assertThat(media).hasSize(1);
    assertThat(media.get(0).length()).as("the workload's stand-in is Gemma 3's expansion")
        .isEqualTo(dev.kvrouter.examples.workload.ImagePart.STAND_IN_TOKENS);
    return media.get(0);
  }

  static String url(WorkloadRequest r) {
    return r.prompt().messages().get(1).images().get(0).url();
  }

  Run run(String uuid, Duration predictedTtl) {
    Workload w = WorkloadCatalog.create(SPEC + ",uuid=" + uuid);
    List<String> lines = new ArrayList<>();
    VirtualOutcome o = VirtualRun.run(w, "kv_aware", SETUP.withPredictedTtl(predictedTtl), front, lines::add);
    Map<String, JsonNode> decisions = new HashMap<>();
    for (String line : lines) {
      try {
        JsonNode n = JSON.readTree(line);
        if (n.path("event").asText().equals("decision")) {
          decisions.put(n.get("id").asText(), n);
        }
      } catch (Exception e) {
        throw new AssertionError(line, e);
      }
    }
    assertThat(o.data().requests()).allMatch(RequestRecord::ok);
    assertThat(o.ledger().zero()).isTrue();
    assertThat(o.fallbacks()).as("the router reproduces every image request").isEmpty();
    return new Run(w, o, decisions);
  }

  record Run(Workload workload, VirtualOutcome outcome, Map<String, JsonNode> decisions) {
    RequestRecord record(int i) {
      return outcome.data().requests().get(i);
    }

    JsonNode decision(int i) {
      return decisions.get(record(i).decisionId());
    }

    double served() {
      return PolicyResult.summarize(outcome.data(), workload.idealReuse(BS)).cache().servedShare();
    }
  }

  /** Per request: the workers that finished an earlier request with its image before it was sent. */
  static List<Set<String>> holders(Run run) {
    Map<String, Map<String, Long>> finished = new HashMap<>();
    List<Set<String>> out = new ArrayList<>();
    for (WorkloadRequest r : run.workload().requests()) {
      RequestRecord rec = run.record(r.index());
      Map<String, Long> byWorker = finished.computeIfAbsent(url(r), k -> new HashMap<>());
      Set<String> held = new HashSet<>();
      byWorker.forEach((w, end) -> {
        if (end <= rec.sentMicros()) {
          held.add(w);
        }
      });
      out.add(held);
      byWorker.merge(rec.servedBy(), rec.sentMicros() + rec.e2eMicros(), Math::min);
    }
    return out;
  }

  /** Share of the requests with a holder that were sent to one. */
  static double toHolders(Run run, List<Set<String>> holders) {
    int repeats = 0;
    int toHolder = 0;
    for (WorkloadRequest r : run.workload().requests()) {
      if (!holders.get(r.index()).isEmpty()) {
        repeats++;
        toHolder += holders.get(r.index()).contains(run.record(r.index()).servedBy()) ? 1 : 0;
      }
    }
    return toHolder / (double) repeats;
  }

  @Test
  void withAUuidRepeatsGoToTheHolderWhichServesTheImageFromCache() throws Exception {
    Run run = run("yes", Duration.ofMillis(1));
    List<Set<String>> holders = holders(run);
    int repeats = 0;
    Set<String> servers = new HashSet<>();
    for (WorkloadRequest r : run.workload().requests()) {
      RequestRecord rec = run.record(r.index());
      servers.add(rec.servedBy());
      MediaSpan image = image(run.workload(), r);
      assertThat(image.identifier()).as("the client's uuid keys the engine's blocks")
          .isEqualTo(r.prompt().messages().get(1).images().get(0).uuid());
      if (holders.get(r.index()).contains(rec.servedBy())) {
        repeats++;
        assertThat(rec.cachedTokens()).as("%s: the image's blocks come from cache", r.id())
            .isGreaterThanOrEqualTo(image.end() / BS * BS);
        assertThat(candidate(run.decision(r.index()), rec.servedBy()).get("overlap").get("gpu").asInt())
            .as("%s: the router learned the image's blocks from events", r.id())
            .isGreaterThanOrEqualTo(image.end() / BS);
      }
    }
    assertThat(servers).as("the load spreads the images").hasSizeGreaterThan(1);
    assertThat(repeats).isGreaterThan(20);
    assertThat(toHolders(run, holders)).as("repeats go to a worker holding the image").isGreaterThan(0.9);
  }

  @Test
  void withoutAUuidTheRouterLearnsEachImagesEngineIdentifierAndCreditsItsRepeatsFromEvents() throws Exception {
    Run run = run("no", Duration.ofMillis(1));
    List<Set<String>> holders = holders(run);
    Set<String> seen = new HashSet<>();
    int hitsOnHolders = 0;
    int creditedPastTheImage = 0;
    for (WorkloadRequest r : run.workload().requests()) {
      RequestRecord rec = run.record(r.index());
      MediaSpan image = image(run.workload(), r);
      assertThat(image.identifier()).as("the engine's own content hash").startsWith("sim-mm:");
      boolean first = seen.add(url(r));
      for (JsonNode c : run.decision(r.index()).get("candidates")) {
        int gpu = c.get("overlap").get("gpu").asInt();
        if (first) {
          assertThat(gpu).as("%s on %s: an image no worker stored yet", r.id(), c.get("worker"))
              .isLessThanOrEqualTo(image.offset() / BS);
        } else if (gpu >= image.end() / BS) {
          creditedPastTheImage++;
        }
      }
      if (holders.get(r.index()).contains(rec.servedBy())) {
        hitsOnHolders++;
        assertThat(rec.cachedTokens()).as("%s: the engine hits the image it hashed before", r.id())
            .isGreaterThanOrEqualTo(image.end() / BS * BS);
      }
    }
    assertThat(creditedPastTheImage).as("repeats credited with the whole image from events").isPositive();
    assertThat(hitsOnHolders).isPositive();
    // the run's report counts what the router learned: every image it routed without a uuid was expected, and
    // each distinct one it saw stored was learned once and used by the repeats
    Map<String, Long> events = run.outcome().events();
    assertThat(events.get("media_expected")).isPositive();
    assertThat(events.get("media_learned")).isPositive().isLessThanOrEqualTo(seen.size());
    assertThat(events.get("media_used")).isPositive();
    assertThat(events.get("media_conflicts")).isZero();
    Run named = run("yes", Duration.ofMillis(1));
    assertThat(named.outcome().events()).doesNotContainKey("media_expected"); // uuids: nothing to learn
    assertThat(toHolders(run, holders)).as("learned: repeats go to a holder about as often as with a uuid")
        .isGreaterThan(toHolders(named, holders(named)) - 0.1);
    assertThat(run.served()).as("learned: about the uuid's cache hits").isGreaterThan(named.served() - 0.03);
  }

  @Test
  void withinThePredictedLifetimeTheRoutersOwnEntriesCoverARepeatWithoutAUuid() throws Exception {
    Run run = run("no", Duration.ofSeconds(5));
    int predictedPastTheImage = 0;
    for (WorkloadRequest r : run.workload().requests()) {
      MediaSpan image = image(run.workload(), r);
      for (JsonNode c : run.decision(r.index()).get("candidates")) {
        if (c.get("overlap").get("predicted").asInt() >= image.end() / BS) {
          predictedPastTheImage++;
        }
      }
    }
    assertThat(predictedPastTheImage).as("repeats within 5 s, matched by the router's own predicted entries")
        .isPositive();
  }

  @Test
  void theSaturationSearchProbesThroughTheRequestPath() {
    String spec = "image-qa:count=300,rate=50,images=20,per-request=1..2,system=48,question=8..24,output=16..32,"
        + "uuid=yes,seed=4";
    java.io.PrintStream quiet = new java.io.PrintStream(java.io.OutputStream.nullOutputStream());
    SaturationSearch.Result r = SaturationSearch.find(spec, SETUP, List.of(0.9), List.of(), front, quiet);
    assertThat(r.capacityRps()).isPositive();
    assertThat(r.overload()).allMatch(p -> p.failed() == 0).anyMatch(p -> !p.keepsUp());
    assertThat(r.points()).singleElement().satisfies(p -> assertThat(p.offeredRps() / r.capacityRps())
        .isCloseTo(0.9, org.assertj.core.data.Offset.offset(0.02)));
    assertThatThrownBy(() -> SaturationSearch.find(spec, SETUP, List.of(0.9), List.of(), null, quiet))
        .as("token stand-ins cannot carry images").hasMessageContaining("multimodal");
  }

  @Test
  void anImageWorkloadNeedsAMultimodalRequestPath() {
    Workload w = WorkloadCatalog.create(SPEC);
    assertThatThrownBy(() -> VirtualRun.run(w, "kv_aware", SETUP, null)).hasMessageContaining("multimodal");
    assertThatThrownBy(() -> VirtualRun.run(w, "kv_aware", SETUP.withMultimodal(null), front))
        .hasMessageContaining("multimodal");
  }

  static JsonNode candidate(JsonNode decision, String worker) {
    for (JsonNode c : decision.get("candidates")) {
      if (c.get("worker").asText().equals(worker)) {
        return c;
      }
    }
    throw new AssertionError(worker + " not among the candidates of " + decision);
  }
}
