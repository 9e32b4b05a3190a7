package dev.kvrouter.examples.ab;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.sim.engine.MediaSpan;
import dev.kvrouter.examples.sim.fleet.MultimodalModels;
import dev.kvrouter.examples.sim.testing.Fixtures;
import dev.kvrouter.examples.workload.ImagePart;
import dev.kvrouter.examples.workload.PromptIds;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import dev.kvrouter.examples.workload.WorkloadRequest;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The Envoy A/B's ideal over the prompts as Gemma 3 workers prefill them: media keyed by the engine's identifiers,
 * so a repeated image counts with or without the client's uuid.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class EngineIdealsTest {

  static final String MODEL = "google/gemma-3-4b-it";

  ChatFront chat;

  @BeforeAll
  void load() throws Exception {
    chat = ChatFront.load(MODEL, Fixtures.tokenizer("gemma3"), 16, MultimodalModels.preset("gemma3"));
  }

  @AfterAll
  void close() {
    chat.close();
  }

  @Test
  void imageBlocksAreKeyedAsTheEngineKeysThemWithOrWithoutAUuid() {
    String spec = "image-qa:count=40,rate=10,images=4,per-request=1..2,system=64,question=8..16,seed=2,uuid=";
    Workload named = WorkloadCatalog.create(spec + "yes");
    Workload anonymous = WorkloadCatalog.create(spec + "no");
    EngineIdeals ideals = new EngineIdeals(chat, MODEL, 16, 1_000_000);
    for (int i = 0; i < named.size(); i++) {
      WorkloadRequest a = named.requests().get(i);
      WorkloadRequest b = anonymous.requests().get(i);
      PromptIds withUuid = ideals.prompts(named).apply(a);
      PromptIds without = ideals.prompts(anonymous).apply(b);
      List<ImagePart> images = a.prompt().messages().get(1).images();
      assertThat(withUuid.media()).extracting(MediaSpan::identifier)
          .containsExactlyElementsOf(images.stream().map(ImagePart::uuid).toList());
      // the same tokens at the same places; only the identity differs, and never the uuid or the URL
      assertThat(without.tokens()).isEqualTo(withUuid.tokens());
      assertThat(without.media()).extracting(MediaSpan::offset)
          .containsExactlyElementsOf(withUuid.media().stream().map(MediaSpan::offset).toList());
      assertThat(without.media()).extracting(MediaSpan::identifier)
          .doesNotContainAnyElementsOf(images.stream().map(ImagePart::uuid).toList())
          .doesNotContainAnyElementsOf(images.stream().map(ImagePart::url).toList());
      // the model's own expansion, not the stand-in's token count
      assertThat(withUuid.tokens().length).isNotEqualTo(named.promptIds(a).tokens().length);
    }
    double ideal = ideals.infinite(named).tokenShare();
    assertThat(ideal).as("4 images over 40 requests repeat").isGreaterThan(0.5);
    assertThat(ideals.infinite(anonymous).tokenShare()).as("the engine hits a repeat by its content hash")
        .isEqualTo(ideal);
    // computed once per workload instance
    assertThat(ideals.infinite(named)).isSameAs(ideals.infinite(named));
  }

  @Test
  void aFleetSmallerThanTheContentServesLessAndTokenPromptsAreTheWorkloadsOwn() {
    Workload w = WorkloadCatalog.create("image-qa:count=60,rate=10,images=30,per-request=1..2,seed=4");
    EngineIdeals small = new EngineIdeals(chat, MODEL, 16, 64);
    assertThat(small.fleetCache(w).tokenShare()).isLessThan(small.infinite(w).tokenShare());
    Workload tokens = WorkloadCatalog.create("system-prompt:format=tokens,count=50,seed=3");
    assertThat(small.infinite(tokens)).isEqualTo(tokens.idealReuse(16));
  }
}
