package dev.kvrouter.extproc.pipeline;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvrouter.extproc.model.ModelRegistry;
import dev.kvrouter.extproc.model.ModelSpec;
import dev.kvrouter.extproc.model.MultimodalSpec;
import dev.kvrouter.extproc.model.ResourceState;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.request.MultimodalItem;
import dev.kvrouter.extproc.request.PreparedRequest;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.extproc.tokenize.SegmentCache;
import dev.kvrouter.extproc.tokenize.Tokenizer;
import dev.kvrouter.extproc.tokenize.TokenizerLoader;
import dev.kvrouter.extproc.tokenize.TokenizerOptions;
import dev.kvrouter.index.block.BlockHasher;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.Test;

/** The expansion rules on small, hand-checked prompts (the Gemma 3 reference cases are in MultimodalGoldenTest). */
class MediaExpanderTest {

  static MultimodalItem image(int index) {
    return new MultimodalItem(index, MultimodalItem.Modality.IMAGE, "img-" + index, true, 0, index);
  }

  @Test
  void eachItemTakesThePlaceholderInOrderAndLaterPlaceholdersStayText() throws Exception {
    try (Tokenizer tok = TokenizerLoader.load(PipelineFixtures.dir("gemma3"), TokenizerOptions.defaults())) {
      MediaExpander x = new MediaExpander(MultimodalSpec.gemma3(), tok);
      int boi = tok.encode("<start_of_image>", false)[0];
      int soft = tok.encode("<image_soft_token>", false)[0];
      int[] prompt = tok.encode("a<start_of_image>b<start_of_image>", false);
      assertThat(prompt).hasSize(4);

      MediaExpander.Expanded one = x.expand(prompt, List.of(image(0)));
      // "a", then "\n\n" <boi> 256 x soft <eoi> "\n\n", then "b" and the second placeholder untouched
      assertThat(one.tokens()).hasSize(1 + 260 + 2);
      assertThat(one.tokens()[2]).isEqualTo(boi);
      assertThat(Arrays.stream(one.tokens()).filter(t -> t == soft).count()).isEqualTo(256);
      assertThat(one.tokens()[one.tokens().length - 1]).isEqualTo(boi);
      assertThat(one.placements()).singleElement().satisfies(p -> {
        assertThat(p.offset()).isEqualTo(1);
        assertThat(p.length()).isEqualTo(260);
        assertThat(p.item().identifier()).isEqualTo("img-0");
      });

      MediaExpander.Expanded two = x.expand(prompt, List.of(image(0), image(1)));
      assertThat(two.placements()).extracting(p -> p.offset()).containsExactly(1, 262);

      assertThatThrownBy(() -> x.expand(prompt, List.of(image(0), image(1), image(2))))
          .isInstanceOf(MediaExpander.Mismatch.class).hasMessage("3 image items but 2 placeholders");
    }
  }

  @Test
  void mergedNewlinesKeepThePositionOfTheMergedTokenAndTheFullLength() throws Exception {
    try (Tokenizer tok = TokenizerLoader.load(PipelineFixtures.dir("gemma3"), TokenizerOptions.defaults())) {
      MediaExpander x = new MediaExpander(MultimodalSpec.gemma3(), tok);
      int nl1 = tok.encode("\n", false)[0];
      int nl3 = tok.encode("\n\n\n", false)[0];
      int nl4 = tok.encode("\n\n\n\n", false)[0];
      int[] prompt = tok.encode("x\n<start_of_image><start_of_image>", false);
      assertThat(prompt).hasSize(4).contains(nl1);
      MediaExpander.Expanded e = x.expand(prompt, List.of(image(0), image(1)));
      // "\n" + "\n\n" -> "\n\n\n" before the first image; "\n\n" + "\n\n" -> "\n\n\n\n" between the two
      assertThat(e.tokens()[1]).isEqualTo(nl3);
      assertThat(e.tokens()[1 + 259]).isEqualTo(nl4);
      assertThat(e.tokens()).hasSize(1 + 1 + 258 + 1 + 258 + 1);
      assertThat(e.placements()).extracting(p -> p.offset()).containsExactly(1, 260);
      assertThat(e.placements()).extracting(p -> p.length()).containsExactly(260, 260);
    }
  }

  @Test
  void mergeTokensMustBeSingleTokens() throws Exception {
    try (Tokenizer tok = TokenizerLoader.load(PipelineFixtures.dir("gemma3"), TokenizerOptions.defaults())) {
      MultimodalSpec bad = new MultimodalSpec(null, MultimodalSpec.gemma3().image(), null, null,
          List.of(List.of("\n", "hello world", "\n\n")));
      assertThatThrownBy(() -> new MediaExpander(bad, tok)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("\"hello world\" is 2 tokens, not one");
    }
  }

  /**
   * A string-content template (Llama 3.1's): vLLM puts one placeholder per item before the message text, joined by
   * a newline, and the template renders it as text. Configured here with reserved tokens as a LLaVA-style model
   * would use its own.
   */
  @Test
  void stringContentTemplatesGetThePlaceholderBeforeTheText() throws Exception {
    Path d = PipelineFixtures.dir("llama3_1");
    MultimodalSpec spec = new MultimodalSpec(null, new MultimodalSpec.Expansion("<|reserved_special_token_5|>",
        "<|reserved_special_token_7|>", "<|reserved_special_token_6|>", 5, null), null, null, null);
    ModelRegistry registry = ModelRegistry.create(List.of(new ModelSpec("llava-ish", d.resolve("tokenizer.json")
            .toString(), d.resolve("tokenizer_config.json").toString(), null, 4, List.of(), null, true, spec)),
        PipelineFixtures.TOKENIZERS, PipelineResources.loader(SegmentCache.create(100_000), Clock.systemUTC()),
        Executors.newSingleThreadExecutor(), System::nanoTime, new SimpleMeterRegistry());
    try {
      registry.preload();
      assertThat(registry.await("llava-ish", Duration.ofSeconds(60))).isInstanceOf(ResourceState.Ready.class);
      byte[] body = ("{\"model\":\"llava-ish\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
          + "\"text\":\"What is this?\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"u\"},\"uuid\":\"p1\"}]}]}")
          .getBytes(StandardCharsets.UTF_8);
      PreparedRequest pr = PipelineFixtures.preparer(registry).prepare(InferenceRequest.Kind.CHAT, body, body.length,
          null);
      PipelineResources res = registry.resolve("llava-ish").resources(PipelineResources.class).orElseThrow();
      Tokenizer tok = res.tokenizer();
      PromptPipeline.Outcome o = new PromptPipeline(PrefixOverlapSource.NONE, Runnable::run, System::nanoTime, true,
          new SimpleMeterRegistry()).run(pr);
      assertThat(o.unavailable()).isNull();

      // By hand: the rendered text holds "<|reserved_special_token_5|>\nWhat is this?" as the user message.
      String text = res.chat(false).render(new dev.kvrouter.extproc.template.ChatRequestFields(
          ((dev.kvrouter.extproc.request.ChatPrompt) pr.request().prompt()).messages(), null, null, true, false,
          null, java.util.Map.of(), null));
      assertThat(text).contains("<|reserved_special_token_5|>\nWhat is this?");
      int[] plain = tok.encode(text, false);
      int placeholder = tok.encode("<|reserved_special_token_5|>", false)[0];
      int at = -1;
      for (int i = 0; i < plain.length; i++) {
        if (plain[i] == placeholder) {
          at = i;
        }
      }
      int[] want = new int[plain.length + 5];
      System.arraycopy(plain, 0, want, 0, at);
      want[at] = tok.encode("<|reserved_special_token_7|>", false)[0];
      Arrays.fill(want, at + 1, at + 6, tok.encode("<|reserved_special_token_6|>", false)[0]);
      System.arraycopy(plain, at + 1, want, at + 6, plain.length - at - 1);
      assertThat(o.prompt().tokens()).isEqualTo(want.length);
      long[] extras = new long[want.length / 4];
      for (int b = 0; b < extras.length; b++) {
        int start = b * 4;
        if (at < start + 4 && at + 6 > start) {
          extras[b] = BlockHasher.multimodalExtra(new String[] {"p1"}, new int[] {at - start}, 0, 1);
        }
      }
      long parent = pr.scope().namespace().rootSeed();
      long[] hashes = new long[extras.length];
      for (int b = 0; b < extras.length; b++) {
        parent = BlockHasher.blockHash(parent, want, b * 4, 4, extras[b]);
        hashes[b] = parent;
      }
      assertThat(o.prompt().blockHashes()).containsExactly(hashes);
    } finally {
      registry.close();
    }
  }
}
