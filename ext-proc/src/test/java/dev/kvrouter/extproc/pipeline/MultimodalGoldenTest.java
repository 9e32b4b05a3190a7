package dev.kvrouter.extproc.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.extproc.model.ModelRegistry;
import dev.kvrouter.extproc.request.ChatPrompt;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.request.MultimodalItem;
import dev.kvrouter.extproc.request.MultimodalPlacement;
import dev.kvrouter.extproc.request.PreparedRequest;
import dev.kvrouter.extproc.request.RequestPreparer;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.extproc.template.ChatRequestFields;
import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.PrefixMatches;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.WorkerView;
import dev.kvrouter.index.block.BlockHasher;
import dev.kvrouter.index.block.CacheNamespace;
import dev.kvrouter.index.events.EventApplier;
import dev.kvrouter.index.events.EventPlaneHealth;
import dev.kvrouter.index.wire.BlockStored;
import dev.kvrouter.index.wire.EventBatch;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Media requests against the reference: for each Gemma 3 conversation with images in
 * {@code fixtures/multimodal/gemma3.json} (scripts/fixtures/multimodal_gemma3.py: transformers' Gemma3Processor
 * for the prompt and ids, vLLM's placement algorithm for the positions), the router's prompt, ids, item positions
 * and block hashes, and the index's answer once a vLLM worker reports those blocks with its multimodal extra keys.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MultimodalGoldenTest {

  static final int BLOCK = 16;
  static final Path FIXTURE = Path.of(System.getProperty("kvrouter.root", ".."))
      .resolve("ext-proc/src/test/resources/fixtures/multimodal/gemma3.json");
  ModelRegistry registry;
  RequestPreparer preparer;

  @BeforeAll
  void load() throws Exception {
    registry = PipelineFixtures.registry(BLOCK);
    preparer = PipelineFixtures.preparer(registry);
  }

  @AfterAll
  void close() {
    registry.close();
  }

  static Stream<JsonNode> cases() throws Exception {
    JsonNode root = new ObjectMapper().readTree(Files.readString(FIXTURE));
    List<JsonNode> out = new ArrayList<>();
    root.get("cases").forEach(out::add);
    return out.stream();
  }

  PreparedRequest prepare(JsonNode c) throws Exception {
    byte[] b = new ObjectMapper().writeValueAsBytes(c.get("body"));
    return preparer.prepare(InferenceRequest.Kind.CHAT, b, b.length, null);
  }

  PipelineResources resources() {
    return registry.resolve(PipelineFixtures.GEMMA3_VISION).resources(PipelineResources.class).orElseThrow();
  }

  static int[] ints(JsonNode arr) {
    int[] out = new int[arr.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = arr.get(i).asInt();
    }
    return out;
  }

  @Test
  void theFixtureCoversWhatItClaims() throws Exception {
    List<JsonNode> all = cases().toList();
    assertThat(all).hasSizeGreaterThanOrEqualTo(25);
    int multi = 0;
    int merged = 0;
    for (JsonNode c : all) {
      multi += c.get("positions").size() > 1 ? 1 : 0;
      int[] ids = ints(c.get("token_ids"));
      for (JsonNode p : c.get("positions")) {
        merged += ids[p.get(0).asInt()] != 108 ? 1 : 0; // 108 = "\n\n": anything else is a merged newline
      }
    }
    assertThat(multi).as("conversations with several images").isGreaterThanOrEqualTo(8);
    assertThat(merged).as("images whose leading newlines merged with the text before").isGreaterThanOrEqualTo(8);
  }

  @ParameterizedTest(name = "{index}")
  @MethodSource("cases")
  void promptIdsAndPositionsEqualTheReference(JsonNode c) throws Exception {
    PreparedRequest pr = prepare(c);
    ChatPrompt chat = (ChatPrompt) pr.request().prompt();
    PipelineResources res = resources();
    String text = res.chat(false).render(new ChatRequestFields(chat.messages(), chat.tools(), chat.toolChoice(),
        chat.addGenerationPrompt(), chat.continueFinalMessage(), chat.documents(), chat.chatTemplateKwargs(),
        chat.reasoningEffort()));
    assertThat(text).as(c.get("name").asText()).isEqualTo(c.get("prompt").asText());
    MediaExpander.Expanded e = res.media().expand(res.tokenizer().encode(text, false), pr.request().multimodal());
    assertThat(e.tokens()).as(c.get("name").asText()).containsExactly(ints(c.get("token_ids")));
    List<int[]> got = e.placements().stream().map(p -> new int[] {p.offset(), p.length()}).toList();
    List<int[]> want = new ArrayList<>();
    c.get("positions").forEach(p -> want.add(new int[] {p.get(0).asInt(), p.get(1).asInt()}));
    assertThat(got).as(c.get("name").asText()).usingElementComparator(Arrays::compare).containsExactlyElementsOf(want);
    for (int i = 0; i < e.placements().size(); i++) {
      assertThat(e.placements().get(i).item().index()).as("items in order of appearance").isEqualTo(i);
    }
  }

  @ParameterizedTest(name = "{index}")
  @MethodSource("cases")
  void blocksMatchWhatAVllmWorkerReports(JsonNode c) throws Exception {
    PreparedRequest pr = prepare(c);
    PromptPipeline pipeline = new PromptPipeline(PrefixOverlapSource.NONE, Runnable::run, System::nanoTime, true,
        new SimpleMeterRegistry());
    PromptPipeline.Outcome o = pipeline.run(pr);
    assertThat(o.unavailable()).isNull();
    int[] ids = ints(c.get("token_ids"));
    List<MultimodalItem> items = pr.request().multimodal();
    List<MultimodalPlacement> placements = new ArrayList<>();
    for (int i = 0; i < items.size(); i++) {
      JsonNode p = c.get("positions").get(i);
      placements.add(new MultimodalPlacement(items.get(i), p.get(0).asInt(), p.get(1).asInt()));
    }
    assertThat(o.prompt().tokens()).isEqualTo(ids.length);
    assertThat(o.prompt().blockHashes()).hasSize(ids.length / BLOCK);

    // A vLLM worker stores the whole prompt: its identifiers are the client's uuids, or its own hash of the pixels.
    KvIndex index = new KvIndex(IndexConfig.defaults(), Clock.systemUTC());
    WorkerId w = WorkerId.of("w1");
    WorkerView view = index.register(w);
    EventPlaneHealth health = new EventPlaneHealth(new SimpleMeterRegistry(), Clock.systemUTC(), Duration.ZERO);
    assertThat(pr.scope().namespace()).isEqualTo(CacheNamespace.of(PipelineFixtures.GEMMA3_VISION));
    EventApplier applier = new EventApplier(view, PipelineFixtures.GEMMA3_VISION, BLOCK, health.register(view));
    int blocks = ids.length / BLOCK;
    long[] engineHashes = new long[blocks];
    List<List<Object>> extraKeys = new ArrayList<>();
    int firstUnmatchable = blocks;
    for (int b = 0; b < blocks; b++) {
      engineHashes[b] = 1000 + b;
      List<Object> keys = new ArrayList<>();
      for (MultimodalPlacement p : placements) {
        if (p.offset() < (b + 1) * BLOCK && p.end() > b * BLOCK) {
          String id = p.item().clientUuid() ? p.item().identifier() : "blake3-of-pixels-" + p.item().index();
          keys.add(Arrays.asList((Object) id, (long) (p.offset() - b * BLOCK)));
          if (!p.item().clientUuid()) {
            firstUnmatchable = Math.min(firstUnmatchable, b);
          }
        }
      }
      extraKeys.add(keys.isEmpty() ? null : keys);
    }
    BlockStored stored = BlockStored.of(engineHashes, null, Arrays.copyOf(ids, blocks * BLOCK), BLOCK, "GPU")
        .withExtraKeys(extraKeys);
    applier.apply(new EventBatch(1.0, List.of(stored), 0, 0));
    long[] hashes = o.prompt().blockHashes();
    PrefixMatches m = index.lookup(hashes, hashes.length);
    int matched = m.indexOf(w) < 0 ? 0 : m.matchedBlocks(m.indexOf(w));
    assertThat(matched).as(c.get("name").asText() + ": blocks up to the first image without a client uuid")
        .isEqualTo(firstUnmatchable);

    // And the same text without the images shares nothing from the first image's block on.
    int firstImageBlock = placements.get(0).offset() / BLOCK;
    long[] textOnly = BlockHasher.hashFullBlocks(pr.scope().namespace().rootSeed(), ids, ids.length, BLOCK);
    for (int b = 0; b < blocks; b++) {
      if (b < firstImageBlock) {
        assertThat(hashes[b]).isEqualTo(textOnly[b]);
      } else {
        assertThat(hashes[b]).as("block %d carries the image identity", b).isNotEqualTo(textOnly[b]);
      }
    }
  }

  @Test
  void theSameImageAtTheSameOffsetMatchesAndAnotherImageDoesNot() throws Exception {
    PromptPipeline pipeline = new PromptPipeline(PrefixOverlapSource.NONE, Runnable::run, System::nanoTime, true,
        new SimpleMeterRegistry());
    String a = body("https://example.com/a.png", null);
    String a2 = body("https://example.com/a.png", null);
    String b = body("https://example.com/b.png", null);
    String u = body("https://example.com/a.png", "photo-1");
    String u2 = body("https://example.com/other-url-same-uuid.png", "photo-1");
    long[] ha = run(pipeline, a);
    assertThat(run(pipeline, a2)).containsExactly(ha);
    long[] hb = run(pipeline, b);
    int last = ha.length - 1;
    assertThat(hb[0]).as("block 0 holds only text").isEqualTo(ha[0]);
    assertThat(hb[last]).as("the last block holds the image").isNotEqualTo(ha[last]);
    assertThat(run(pipeline, u)).as("a uuid names the item, whatever its URL").containsExactly(run(pipeline, u2));
    assertThat(run(pipeline, u)[last]).isNotEqualTo(ha[last]);
  }

  @Test
  void mediaTheModelCannotExpandRoutesByLoadWithAReason() throws Exception {
    PromptPipeline pipeline = new PromptPipeline(PrefixOverlapSource.NONE, Runnable::run, System::nanoTime, true,
        new SimpleMeterRegistry());
    String audio = "{\"model\":\"gemma3-vision\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
        + "\"input_audio\",\"input_audio\":{\"data\":\"AAAA\",\"format\":\"wav\"}}]}]}";
    assertThat(outcome(pipeline, audio).unavailable()).isEqualTo("multimodal");
    String kwargs = "{\"model\":\"gemma3-vision\",\"mm_processor_kwargs\":{\"do_pan_and_scan\":true},"
        + "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}";
    assertThat(outcome(pipeline, kwargs).unavailable()).isEqualTo("multimodal_processor_kwargs");
    String plain = "{\"model\":\"gemma3\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
        + "\"image_url\":{\"url\":\"x\"}}]}]}";
    assertThat(outcome(pipeline, plain).unavailable()).as("gemma3 without an expansion configured")
        .isEqualTo("multimodal");
  }

  static String body(String url, String uuid) {
    return "{\"model\":\"gemma3-vision\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
        + "\"Please describe the following picture in a lot of detail, starting with the colours, then the shapes,"
        + " then anything written in it.\"},{\"type\":\"image_url\",\"image_url\":"
        + "{\"url\":\"" + url + "\"}" + (uuid == null ? "" : ",\"uuid\":\"" + uuid + "\"") + "}]}]}";
  }

  PromptPipeline.Outcome outcome(PromptPipeline pipeline, String json) throws Exception {
    byte[] b = json.getBytes(StandardCharsets.UTF_8);
    return pipeline.run(preparer.prepare(InferenceRequest.Kind.CHAT, b, b.length, null));
  }

  long[] run(PromptPipeline pipeline, String json) throws Exception {
    PromptPipeline.Outcome o = outcome(pipeline, json);
    assertThat(o.unavailable()).isNull();
    return o.prompt().blockHashes();
  }
}
