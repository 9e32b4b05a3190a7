package dev.kvrouter.examples.workload;

import dev.kvrouter.examples.sim.engine.MediaSpan;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.loadgen.RequestBodies;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The image-QA workload and the ideal reuse of prompts with images, keyed as the engine keys them. */
class ImageQaWorkloadTest {

  private static final ObjectMapper JSON = new ObjectMapper();

  @Test
  void everyRequestAsksAboutDistinctImagesOfTheSharedSetBehindOneSystemPrompt() {
    Workload w = WorkloadCatalog.create("image-qa:count=200,images=12,per-request=1..3,system=40,seed=5");
    Set<String> urls = new HashSet<>();
    for (WorkloadRequest r : w.requests()) {
      List<Message> m = r.prompt().messages();
      assertThat(r.prompt().format()).isEqualTo(Prompt.Format.CHAT);
      assertThat(m).extracting(Message::role).containsExactly("system", "user");
      assertThat(m.get(0).segments()).isEqualTo(w.requests().get(0).prompt().messages().get(0).segments());
      List<ImagePart> images = m.get(1).images();
      assertThat(images).hasSizeBetween(1, 3).doesNotHaveDuplicates();
      images.forEach(i -> urls.add(i.url()));
      assertThat(images).allMatch(i -> i.uuid() != null);
    }
    assertThat(urls).hasSizeLessThanOrEqualTo(12).hasSizeGreaterThan(6);
    assertThat(w.params()).containsEntry("uuid", "yes").containsEntry("images", 12);
  }

  @Test
  void uuidModesChangeOnlyWhetherTheUuidIsSent() {
    Workload yes = WorkloadCatalog.create("image-qa:count=100,images=20,uuid=yes,seed=2");
    Workload no = WorkloadCatalog.create("image-qa:count=100,images=20,uuid=no,seed=2");
    Workload mixed = WorkloadCatalog.create("image-qa:count=100,images=20,uuid=mixed,seed=2");
    Set<Boolean> mixedNamed = new HashSet<>();
    for (int i = 0; i < 100; i++) {
      List<ImagePart> a = yes.requests().get(i).prompt().messages().get(1).images();
      List<ImagePart> b = no.requests().get(i).prompt().messages().get(1).images();
      List<ImagePart> c = mixed.requests().get(i).prompt().messages().get(1).images();
      assertThat(b).extracting(ImagePart::url).isEqualTo(a.stream().map(ImagePart::url).toList());
      assertThat(c).extracting(ImagePart::url).isEqualTo(a.stream().map(ImagePart::url).toList());
      assertThat(b).allMatch(p -> p.uuid() == null);
      c.forEach(p -> mixedNamed.add(p.uuid() != null));
    }
    assertThat(mixedNamed).containsExactlyInAnyOrder(true, false);
    // the engine's identities repeat the same way in every mode: the same ideal
    assertThat(no.idealReuse(16)).isEqualTo(yes.idealReuse(16));
    assertThat(mixed.idealReuse(16)).isEqualTo(yes.idealReuse(16));
  }

  @Test
  void optionsAreCheckedLikeEveryWorkloads() {
    assertThatThrownBy(() -> WorkloadCatalog.create("image-qa:format=tokens"))
        .hasMessageContaining("unknown option(s) [format]");
    assertThatThrownBy(() -> WorkloadCatalog.create("image-qa:uuid=sometimes")).hasMessageContaining("yes, no or mixed");
    assertThatThrownBy(() -> WorkloadCatalog.create("image-qa:images=2,per-request=1..3"))
        .hasMessageContaining("per-request");
    assertThat(WorkloadCatalog.loadKnob("image-qa:rate=3")).isEqualTo("rate");
  }

  @Test
  void bodiesSendEachImageAsAnImageUrlPartWithItsUuidThenTheQuestion() throws Exception {
    Workload w = WorkloadCatalog.create("image-qa:count=5,per-request=2,images=4,uuid=yes,seed=7");
    WorkloadRequest r = w.requests().get(0);
    JsonNode body = JSON.readTree(RequestBodies.body(w, r, "gemma3"));
    JsonNode content = body.get("messages").get(1).get("content");
    List<ImagePart> images = r.prompt().messages().get(1).images();
    assertThat(content).hasSize(3);
    for (int i = 0; i < 2; i++) {
      assertThat(content.get(i).get("type").asText()).isEqualTo("image_url");
      assertThat(content.get(i).get("image_url").get("url").asText()).isEqualTo(images.get(i).url());
      assertThat(content.get(i).get("uuid").asText()).isEqualTo(images.get(i).uuid());
    }
    assertThat(content.get(2).get("type").asText()).isEqualTo("text");
    assertThat(body.get("messages").get(0).get("content").isTextual()).isTrue();

    Workload no = WorkloadCatalog.create("image-qa:count=5,per-request=2,images=4,uuid=no,seed=7");
    JsonNode plain = JSON.readTree(RequestBodies.body(no, no.requests().get(0), "gemma3"));
    assertThat(plain.get("messages").get(1).get("content").get(0).has("uuid")).isFalse();
  }

  /**
   * Hand-built: five 12-token prompts of one repeated token id, block 4; only their media differ. Counted by hand:
   * the repeat of (a at 4) reuses all 3 blocks (2 cacheable, the last token is computed); another image (b), the
   * same image one token later, and no image at all each share block 0 only.
   */
  @Test
  void imageBlocksAreEqualOnlyForTheSameIdentityAtTheSameOffset() {
    int[] same = new int[12];
    Arrays.fill(same, 7);
    List<PromptIds> prompts = List.of(
        new PromptIds(same, List.of(new MediaSpan("a", 4, 4))),
        new PromptIds(same, List.of(new MediaSpan("a", 4, 4))),
        new PromptIds(same, List.of(new MediaSpan("b", 4, 4))),
        new PromptIds(same, List.of(new MediaSpan("a", 5, 4))),
        PromptIds.text(same));
    List<WorkloadRequest> requests = new java.util.ArrayList<>();
    for (int i = 0; i < prompts.size(); i++) {
      requests.add(new WorkloadRequest(i, "r" + i, i, null, Prompt.tokens(List.of(new Segment(i, 1))), 1));
    }
    IdealReuse ideal = IdealReuse.compute(requests, r -> prompts.get(r.index()), null, 4, Long.MAX_VALUE);
    assertThat(ideal.fullBlocks()).isEqualTo(15);
    assertThat(ideal.reusedBlocks()).isEqualTo(3 + 1 + 1 + 1);
    assertThat(ideal.cacheableHitTokens()).isEqualTo(8 + 4 + 4 + 4);
    // blocks 0-2 of "a at 4", blocks 1-2 of b, of a at 5 and of the text prompt
    assertThat(ideal.uniqueBlocks()).isEqualTo(3 + 2 + 2 + 2);

    IdealReuse blind = IdealReuse.compute(requests, r -> PromptIds.text(prompts.get(r.index()).tokens()), null, 4,
        Long.MAX_VALUE);
    assertThat(blind.reusedBlocks()).as("token ids alone would take every image for the same").isEqualTo(12);
  }

  /**
   * The stand-in prompts of a hand-built workload: the same image at the same place repeats with or without a uuid
   * (the engine's content hash), but the uuid and no-uuid forms of one image are two identities.
   */
  @Test
  void theStandInIdealKeysImagesByTheEnginesIdentity() {
    Segment system = new Segment(11, 30);
    ImagePart named = new ImagePart("https://images.example.com/x.png", "x");
    ImagePart anonymous = new ImagePart("https://images.example.com/x.png", null);
    ImagePart other = new ImagePart("https://images.example.com/y.png", null);
    List<ImagePart> order = List.of(anonymous, anonymous, named, other);
    List<WorkloadRequest> requests = new java.util.ArrayList<>();
    for (int i = 0; i < order.size(); i++) {
      Prompt p = Prompt.chat(List.of(Message.of("system", system),
          new Message("user", List.of(order.get(i)), List.of(new Segment(100 + i, 5)))));
      requests.add(new WorkloadRequest(i, "q" + i, i, null, p, 1));
    }
    Workload w = new Workload("hand", java.util.Map.of(), TokenSpace.DEFAULT, requests);
    PromptIds first = w.promptIds(requests.get(0));
    // system: marker + 30 + end = 32 tokens, user marker at 32, the image at 33..292, question 5, end, then the
    // assistant marker (the generation prompt): 300 tokens
    assertThat(first.tokens()).hasSize(300);
    assertThat(first.media()).containsExactly(new MediaSpan("content:https://images.example.com/x.png", 33, 260));
    IdealReuse ideal = w.idealReuse(16);
    int preImage = 33 / 16; // blocks before the image's first block: 2
    int imageEnd = (33 + 260) / 16; // full blocks up to the end of the image: 18
    // q1 repeats q0 up to its question (block 18 holds q0's question tokens); q2 and q3 only the 2 pre-image blocks
    assertThat(ideal.reusedBlocks()).isEqualTo(imageEnd + preImage + preImage);
    assertThat(ideal.fullBlocks()).isEqualTo(4L * (300 / 16));
  }
}
