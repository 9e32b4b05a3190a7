package dev.kvrouter.examples.sim.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.InputStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The simulated worker tokenizes with the router's own resources: completion prompts as Hugging Face
 * {@code tokenizers} does with special tokens, chat requests as {@code transformers}' {@code apply_chat_template}
 * followed by tokenization without special tokens (vLLM's way); golden ids from
 * {@code scripts/fixtures/sim_prompt_tokens.py}.
 */
class PipelinePromptEncoderTest {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final TestEncoders ENCODERS = new TestEncoders();
  private static JsonNode fixture;

  @BeforeAll
  static void load() throws Exception {
    try (InputStream in = PipelinePromptEncoderTest.class.getResourceAsStream("/fixtures/sim/prompt_tokens.json")) {
      fixture = JSON.readTree(in);
    }
  }

  private static PipelinePromptEncoder encoder(String name) {
    return ENCODERS.get(name);
  }

  @AfterAll
  static void close() {
    ENCODERS.close();
  }

  @Test
  void completionPromptsMatchTheReferenceTokenizerWithSpecialTokensAndNoTruncation() {
    int cases = 0;
    int longest = 0;
    for (JsonNode c : fixture.get("cases")) {
      int[] got = encoder(c.get("tokenizer").asText()).encodeCompletion(c.get("prompt").asText());
      assertThat(got).as(c.get("tokenizer").asText() + " case " + cases).containsExactly(ids(c));
      longest = Math.max(longest, got.length);
      cases++;
    }
    assertThat(cases).isEqualTo(10);
    assertThat(longest).isGreaterThan(1024);
  }

  @Test
  void chatRequestsMatchTransformersTemplateThenTokenizer() {
    int cases = 0;
    for (JsonNode c : fixture.get("chat_cases")) {
      ObjectNode request = JSON.createObjectNode();
      request.put("model", "test/" + c.get("tokenizer").asText());
      request.set("messages", c.get("messages"));
      request.put("max_tokens", 8);
      int[] got = encoder(c.get("tokenizer").asText()).encodeChat(request);
      assertThat(got).as(c.get("tokenizer").asText() + " chat case " + cases).containsExactly(ids(c));
      cases++;
    }
    assertThat(cases).isEqualTo(4);
  }

  @Test
  void outputTokensAreSingleTokenWordsOfThePassage() {
    for (String model : new String[] {"llama3_1", "qwen3"}) {
      PipelinePromptEncoder e = encoder(model);
      int[] vocab = e.outputVocabulary();
      assertThat(vocab.length).isGreaterThan(10);
      StringBuilder b = new StringBuilder();
      for (int i = 0; i < 4; i++) {
        b.append(e.tokenText(vocab[i]));
      }
      assertThat(b.toString()).isEqualTo(" The quick brown fox");
      // each word re-encodes to its own id: the text a client reads tokenizes back to what was generated
      for (int id : vocab) {
        assertThat(e.encodeCompletion(e.tokenText(id))).as(model).endsWith(id);
      }
    }
  }

  @Test
  void requestsTheRouterCannotReproduceAreRefused() {
    ObjectNode own = JSON.createObjectNode();
    own.put("model", "m");
    own.putArray("messages").addObject().put("role", "user").put("content", "hi");
    own.put("chat_template", "{{ messages }}");
    assertThatThrownBy(() -> encoder("qwen3").encodeChat(own)).isInstanceOf(PromptEncoder.Unsupported.class)
        .hasMessageContaining("chat template");
    ObjectNode broken = JSON.createObjectNode();
    broken.put("model", "m");
    broken.put("messages", "not a list");
    assertThatThrownBy(() -> encoder("qwen3").encodeChat(broken)).isInstanceOf(PromptEncoder.Unsupported.class);
  }

  private static int[] ids(JsonNode c) {
    return TestEncoders.ids(c.get("ids"));
  }
}
