package dev.kvrouter.examples.sim.media;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.examples.sim.engine.EngineConfig;
import dev.kvrouter.examples.sim.fleet.SimWorker;
import dev.kvrouter.examples.sim.http.PipelinePromptEncoder;
import dev.kvrouter.examples.sim.testing.Fixtures;
import dev.kvrouter.examples.sim.testing.Replayed;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.extproc.model.ModelRegistry;
import dev.kvrouter.extproc.model.ModelSpec;
import dev.kvrouter.extproc.model.MultimodalSpec;
import dev.kvrouter.extproc.model.ResourceState;
import dev.kvrouter.extproc.pipeline.PipelineResources;
import dev.kvrouter.extproc.pipeline.PromptPipeline;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.request.PreparedRequest;
import dev.kvrouter.extproc.request.RequestPreparer;
import dev.kvrouter.extproc.routing.KvIndexOverlapSource;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.extproc.tenancy.TenantIsolation;
import dev.kvrouter.extproc.tokenize.SegmentCache;
import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.PrefixMatches;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.events.EventCounter;
import dev.kvrouter.index.events.EventPlaneHealth;
import dev.kvrouter.index.events.EventSource;
import dev.kvrouter.index.events.InProcessEventFollower;
import dev.kvrouter.index.wire.WireLayout;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * Media requests end to end without Envoy: a simulated Gemma 3 worker serves them over real HTTP and publishes its
 * KV events over real ZMQ (vLLM's map layout); the bytes go through the router's own decoder, sequence follower
 * and {@code EventApplier} into a {@link KvIndex}; the router's own request path ({@code RequestPreparer},
 * {@code PromptPipeline}, over a separately loaded model registry configured with {@code multimodal: {preset:
 * gemma3}}) hashes the same requests. The index must then hold every block of a repeated image request, only the
 * pre-image blocks of the same text with another image, and, for an image sent without a uuid, only the pre-image
 * blocks too (the engine keys it by its own content hash, which the router cannot know), while the worker itself
 * serves that repeat from its cache, until the router has learned the engine's identifier from the store of the
 * worker it sent that image to: then every block matches from events alone.
 */
@Timeout(120)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MediaEventsIndexTest {

  static final String MODEL = "gemma3";
  static final int BS = 16;
  static final HttpClient CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  final ExecutorService writer = Executors.newFixedThreadPool(2);
  final ExecutorService loader = Executors.newFixedThreadPool(1);
  final ZContext ctx = new ZContext(1);
  PipelinePromptEncoder encoder;
  SimWorker worker;
  ModelRegistry router;
  RequestPreparer preparer;
  PromptPipeline pipeline;

  @BeforeAll
  void start() throws Exception {
    Path gemma = Fixtures.tokenizer("gemma3");
    MultimodalSpec vision = new MultimodalSpec("gemma3", null, null, null, null);
    encoder = PipelinePromptEncoder.load(MODEL, gemma, vision,
        SegmentCache.create(SegmentCache.DEFAULT_MAX_TOKENS));
    EngineConfig config = EngineConfig.builder(MODEL).blockSize(BS).numGpuBlocks(512).maxModelLen(4096)
        .maxNumBatchedTokens(2048).seed(9).build();
    worker = SimWorker.start(new SimWorker.Spec("w-mm", config, Presets.DEFAULT.timingModel(), null, "127.0.0.1", 0,
        new SimWorker.Events(0, 0, "", WireLayout.VLLM_MAP), null, null), encoder, writer);

    // The router side loads its own copy of the model, as kvrouter.yaml configures it.
    ModelSpec spec = new ModelSpec(MODEL, gemma.resolve("tokenizer.json").toString(),
        gemma.resolve("tokenizer_config.json").toString(), null, BS, List.of(), null, true, vision);
    router = ModelRegistry.create(List.of(spec), gemma, PipelineResources.loader(
        SegmentCache.create(SegmentCache.DEFAULT_MAX_TOKENS), Clock.systemUTC()), loader, System::nanoTime,
        new SimpleMeterRegistry());
    router.preload();
    assertThat(router.await(MODEL, Duration.ofSeconds(60))).isInstanceOf(ResourceState.Ready.class);
    preparer = new RequestPreparer(router, TenantIsolation.defaults(), System::nanoTime);
    pipeline = new PromptPipeline(PrefixOverlapSource.NONE, Runnable::run, System::nanoTime, false,
        new SimpleMeterRegistry());
  }

  @AfterAll
  void stop() throws Exception {
    if (worker != null) {
      worker.close();
    }
    if (router != null) {
      router.close();
    }
    if (encoder != null) {
      encoder.close();
    }
    ctx.close();
    writer.shutdownNow();
    loader.shutdownNow();
    writer.awaitTermination(5, TimeUnit.SECONDS);
  }

  /** Posts a chat request; returns the response body. */
  JsonNode chat(ObjectNode body, int status) throws Exception {
    HttpResponse<String> r = CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + worker.httpPort()
        + "/v1/chat/completions")).timeout(Duration.ofSeconds(30)).header("content-type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofByteArray(MediaRequests.bytes(body))).build(),
        HttpResponse.BodyHandlers.ofString());
    assertThat(r.statusCode()).as(r.body()).isEqualTo(status);
    return MediaRequests.JSON.readTree(r.body());
  }

  static int cached(JsonNode response) {
    return response.get("usage").get("prompt_tokens_details").get("cached_tokens").asInt();
  }

  /** The router's request-path block hashes of {@code body}. */
  long[] routerHashes(ObjectNode body) throws Exception {
    byte[] b = MediaRequests.bytes(body);
    PromptPipeline.Outcome o = pipeline.run(preparer.prepare(InferenceRequest.Kind.CHAT, b, b.length, null));
    assertThat(o.unavailable()).as("the router reproduces the request").isNull();
    return o.prompt().blockHashes();
  }

  /** Every batch the worker published, fetched over its replay socket and applied through the router's path. */
  KvIndex indexOfEverythingPublished(WorkerId id) {
    Clock wall = Clock.systemUTC();
    KvIndex index = new KvIndex(IndexConfig.defaults(), wall);
    EventPlaneHealth health = new EventPlaneHealth(new SimpleMeterRegistry(), wall, Duration.ofSeconds(60));
    InProcessEventFollower follower = new InProcessEventFollower(index, health,
        EventSource.connect(id, MODEL, BS, "inproc://w-mm", null), null, wall);
    try (ZMQ.Socket dealer = ctx.createSocket(SocketType.DEALER)) {
      dealer.setHandshakeIvl(500);
      dealer.connect(worker.replayEndpoint());
      List<Replayed.Batch> batches = Replayed.from(dealer, 0);
      assertThat(batches).isNotEmpty();
      for (Replayed.Batch batch : batches) {
        follower.onLive(batch.seq(), batch.payload());
      }
    }
    assertThat(follower.health().count(EventCounter.UNKNOWN_PARENT)).isZero();
    assertThat(follower.health().count(EventCounter.STORED_EVENTS)).isPositive();
    return index;
  }

  static int matched(KvIndex index, WorkerId w, long[] hashes) {
    PrefixMatches m = index.lookup(hashes, hashes.length);
    int i = m.indexOf(w);
    return i < 0 ? 0 : m.matchedBlocks(i);
  }

  @Test
  void theIndexHoldsTheBlocksTheRouterComputesForAnImage() throws Exception {
    ObjectNode a = MediaRequests.image(MODEL, "https://example.com/chart.png", "chart-a");
    ObjectNode b = MediaRequests.image(MODEL, "https://example.com/chart.png", "chart-b");
    ObjectNode plain = MediaRequests.image(MODEL, "https://example.com/photo.png", null);

    JsonNode first = chat(a, 200);
    int prompt = first.get("usage").get("prompt_tokens").asInt();
    assertThat(prompt).as("text plus 260 image tokens").isGreaterThan(260);
    assertThat(cached(first)).isZero();
    int cacheable = (prompt - 1) / BS * BS;
    assertThat(cached(chat(a, 200))).as("the same uuid: a cache hit on every block but the last").isEqualTo(cacheable);

    long[] ha = routerHashes(a);
    long[] hb = routerHashes(b);
    long[] hp = routerHashes(plain);
    assertThat(ha).hasSize(prompt / BS);
    int shared = 0;
    while (shared < ha.length && ha[shared] == hb[shared]) {
      shared++;
    }
    assertThat(shared).as("blocks before the image").isPositive().isLessThan(ha.length);

    JsonNode other = chat(b, 200);
    assertThat(cached(other)).as("another image: only the blocks before it").isEqualTo(shared * BS);
    chat(plain, 200);
    assertThat(cached(chat(plain, 200))).as("no uuid: the worker's own content hash still hits")
        .isEqualTo(cacheable);

    WorkerId w = new WorkerId("w-mm", 0);
    KvIndex index = indexOfEverythingPublished(w);
    assertThat(matched(index, w, ha)).as("every block of the repeated image request").isEqualTo(ha.length);
    assertThat(matched(index, w, hb)).as("every block of the other image's request").isEqualTo(hb.length);
    assertThat(matched(index, w, hp)).as("no uuid: the router cannot name the engine's image blocks")
        .isEqualTo(shared);
    long[] unseen = routerHashes(MediaRequests.image(MODEL, "https://example.com/chart.png", "chart-c"));
    assertThat(matched(index, w, unseen)).as("an image the worker never saw").isEqualTo(shared);
  }

  /**
   * Learning: the router routes an image without a uuid to the worker, the worker stores it under its own content
   * hash, and the store teaches the router that identifier; once the router's predicted entries have expired, the
   * same image without a uuid is credited with every block from the worker's events, while another tenant's request
   * for the same URL learns nothing from it.
   */
  @Test
  void anImageWithoutUuidIsCreditedFromEventsOnceItsIdentifierIsLearned() throws Exception {
    WorkerId w = new WorkerId("w-mm", 0);
    Clock wall = Clock.systemUTC();
    KvIndex index = new KvIndex(IndexConfig.defaults().withPredictions(Duration.ofMillis(1), Duration.ofMillis(1),
        1 << 10, 64), wall);
    EventPlaneHealth health = new EventPlaneHealth(new SimpleMeterRegistry(), wall, Duration.ofSeconds(60));
    InProcessEventFollower follower = new InProcessEventFollower(index, health,
        EventSource.connect(w, MODEL, BS, "inproc://w-mm", null), null, wall);
    KvIndexOverlapSource overlaps = new KvIndexOverlapSource(index);
    PromptPipeline learning = new PromptPipeline(overlaps, Runnable::run, System::nanoTime, false,
        new SimpleMeterRegistry());
    long next = applyPublished(follower, 0); // whatever the worker stored before: not awaited, not learned

    ObjectNode body = MediaRequests.image(MODEL, "https://example.com/learned.png", null);
    // its own text, so that the worker's cache of this test's prefix never meets the other tests'
    ((ObjectNode) body.get("messages").get(0).get("content").get(0)).put("text", "Learned identifiers: read the"
        + " figure below and report its title, its axes and the largest value it shows, in one short sentence.");
    PreparedRequest first = prepare(body, null);
    PromptPipeline.Outcome routed = learning.run(first);
    long[] before = routed.prompt().blockHashes();
    routed.complete(w); // the router's decision: this worker will store the image
    overlaps.recordPrediction(w, before);
    int prompt = chat(body, 200).get("usage").get("prompt_tokens").asInt();
    applyPublished(follower, next);

    long namespace = first.scope().namespace().rootSeed();
    String routerId = first.request().multimodal().get(0).identifier();
    String learned = index.media().engineId(namespace, routerId);
    assertThat(learned).as("the engine's identifier, not the router's").startsWith("sim-mm:image:")
        .isNotEqualTo(routerId);
    assertThat(index.media().learnedTotal()).isEqualTo(1);

    Thread.sleep(5);
    index.maintain();
    assertThat(index.predictedEntries()).as("predicted entries expired").isZero();
    long[] after = learning.run(prepare(body, null)).prompt().blockHashes();
    assertThat(after).hasSize(prompt / BS);
    PrefixMatches m = index.lookup(after, after.length);
    int i = m.indexOf(w);
    assertThat(i).isNotNegative();
    assertThat(m.gpuBlocks(i)).as("every block of the image prefix, from events").isEqualTo(after.length);
    assertThat(m.predictedBlocks(i)).isZero();
    int preImage = 0;
    while (before[preImage] == after[preImage]) {
      preImage++;
    }
    assertThat(matched(index, w, before)).as("hashed with the router's own identifier: only the text before it")
        .isEqualTo(preImage).isLessThan(after.length);

    PreparedRequest other = prepare(body, "tenant-b");
    long[] otherTenant = learning.run(other).prompt().blockHashes();
    assertThat(index.media().engineId(other.scope().namespace().rootSeed(), routerId)).isNull();
    assertThat(matched(index, w, otherTenant)).as("another tenant shares nothing").isZero();
  }

  PreparedRequest prepare(ObjectNode body, String tenant) throws Exception {
    byte[] b = MediaRequests.bytes(body);
    return preparer.prepare(InferenceRequest.Kind.CHAT, b, b.length, tenant);
  }

  /** Applies the worker's batches from {@code from} through {@code follower}; returns the next sequence number. */
  long applyPublished(InProcessEventFollower follower, long from) {
    long next = from;
    try (ZMQ.Socket dealer = ctx.createSocket(SocketType.DEALER)) {
      dealer.setHandshakeIvl(500);
      dealer.connect(worker.replayEndpoint());
      for (Replayed.Batch batch : Replayed.from(dealer, from)) {
        follower.onLive(batch.seq(), batch.payload());
        next = batch.seq() + 1;
      }
    }
    assertThat(follower.health().count(EventCounter.UNKNOWN_PARENT)).isZero();
    return next;
  }

  @Test
  void mediaTheModelCannotTakeIsAnOpenAiBadRequest() throws Exception {
    JsonNode r = chat(MediaRequests.audio(MODEL), 400);
    JsonNode error = r.get("error");
    assertThat(error.get("message").asText()).contains("does not support audio input");
    assertThat(error.get("type").asText()).isEqualTo("invalid_request_error");
    assertThat(error.get("param").asText()).isEqualTo("messages");
  }
}
