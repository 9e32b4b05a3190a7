package dev.kvrouter.examples.sim.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.sim.testing.Fixtures;
import java.io.InputStream;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;

/** Completion prompts tokenize exactly as Hugging Face {@code tokenizers} does (golden ids from Python). */
class DjlPromptEncoderTest {

  private static final Map<String, DjlPromptEncoder> ENCODERS = new HashMap<>();

  private static DjlPromptEncoder encoder(String name) {
    return ENCODERS.computeIfAbsent(name, n -> {
      try {
        return DjlPromptEncoder.load(Fixtures.tokenizer(n));
      } catch (java.io.IOException e) {
        throw new AssertionError(e);
      }
    });
  }

  @AfterAll
  static void close() {
    ENCODERS.values().forEach(DjlPromptEncoder::close);
  }

  @Test
  void matchesTheReferenceTokenizerWithSpecialTokensAndNoTruncation() throws Exception {
    JsonNode fixture;
    try (InputStream in = getClass().getResourceAsStream("/fixtures/sim/prompt_tokens.json")) {
      fixture = new ObjectMapper().readTree(in);
    }
    int cases = 0;
    int longest = 0;
    for (JsonNode c : fixture.get("cases")) {
      int[] expected = new int[c.get("ids").size()];
      for (int i = 0; i < expected.length; i++) {
        expected[i] = c.get("ids").get(i).asInt();
      }
      int[] got = encoder(c.get("tokenizer").asText()).encodeCompletion(c.get("prompt").asText());
      assertThat(got).as(c.get("tokenizer").asText() + " case " + cases).containsExactly(expected);
      longest = Math.max(longest, got.length);
      cases++;
    }
    assertThat(cases).isEqualTo(10);
    assertThat(longest).isGreaterThan(1024);
  }

  @Test
  void outputTokensDecodeToText() {
    DjlPromptEncoder e = encoder("llama3_1");
    int[] vocab = e.outputVocabulary();
    assertThat(vocab.length).isGreaterThan(10);
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < 4; i++) {
      b.append(e.tokenText(vocab[i]));
    }
    assertThat(b.toString()).isEqualTo(" The quick brown fox");
  }

  @Test
  void chatIsRefusedUntilTheRoutersRendererIsWiredIn() {
    org.assertj.core.api.Assertions.assertThatThrownBy(() -> encoder("qwen3").encodeChat(null))
        .isInstanceOf(PromptEncoder.Unsupported.class);
  }
}
