package dev.kvrouter.examples.sim.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.examples.workload.AnswerReuse;
import dev.kvrouter.examples.workload.ChatAnswers;
import dev.kvrouter.examples.workload.Prompt;
import dev.kvrouter.examples.workload.PromptIds;
import dev.kvrouter.examples.workload.Segment;
import dev.kvrouter.examples.workload.TokenSpace;
import dev.kvrouter.examples.workload.WorkloadRequest;
import java.io.InputStream;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * What each real chat template keeps of the model's own answer in the next turn, against {@code transformers}'
 * {@code apply_chat_template} and tokenizer ({@code scripts/fixtures/chat_answer_divergence.py}): the worker's
 * prompts, the tokens the model generates for the answer text (which decode to that text in the reference), the
 * end-of-turn token, and where the engine's sequence and the re-rendered next prompt first differ: nowhere for
 * Llama 3.1, DeepSeek V3, Gemma 3 and Qwen3 without reasoning; 4 tokens before the answer for Qwen3 with
 * {@code enable_thinking=false} (the empty think block of the generation prompt, which the history drops); at the
 * answer's first token for Qwen3 when the model reasoned (the reasoning is dropped).
 */
class ChatAnswerDivergenceTest {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final TestEncoders ENCODERS = new TestEncoders();
  private static JsonNode fixture;

  @BeforeAll
  static void load() throws Exception {
    try (InputStream in = ChatAnswerDivergenceTest.class.getResourceAsStream(
        "/fixtures/sim/chat_answer_divergence.json")) {
      fixture = JSON.readTree(in);
    }
  }

  @AfterAll
  static void close() {
    ENCODERS.close();
  }

  @Test
  void promptsGeneratedTokensAndDivergenceMatchTheReference() {
    int block = fixture.get("block_size").asInt();
    Map<String, String> divergence = new TreeMap<>();
    int cases = 0;
    for (JsonNode c : fixture.get("cases")) {
      String model = c.get("tokenizer").asText();
      PipelinePromptEncoder enc = ENCODERS.get(model);
      String label = model + c.get("chat_template_kwargs") + (c.get("reasoning").isNull() ? "" : " reasoning");
      JsonNode messages = c.get("messages");
      ArrayNode first = JSON.createArrayNode().add(messages.get(0)).add(messages.get(1));
      int[] p1 = enc.encodeChat(request(model, first, c.get("chat_template_kwargs")));
      int[] p2 = enc.encodeChat(request(model, messages, c.get("chat_template_kwargs")));
      assertThat(p1).as(label + " turn 1").containsExactly(ids(c.get("prompt1")));
      assertThat(p2).as(label + " turn 2").containsExactly(ids(c.get("prompt2")));
      assertThat(enc.endOfTurnToken()).as(label + " end of turn").isEqualTo(c.get("end_of_turn").asInt());
      int[] generated = ids(c.get("generated"));
      if (c.get("reasoning").isNull()) {
        // the reference decodes these to the answer text, which the client resends
        assertThat(c.get("decoded").asText()).isEqualTo(messages.get(2).get("content").asText());
        ChatAnswers answers = enc.chatAnswers(TokenSpace.DEFAULT);
        assertThat(answers.generated(messages.get(2).get("content").asText())).as(label + " generated")
            .containsExactly(generated);
      }
      AnswerReuse a = reuse(p1, generated, p2, block);
      assertThat(a.turns()).isEqualTo(1);
      if (c.get("divergence").isNull()) {
        assertThat(a.noDivergence()).as(label).isEqualTo(1);
      } else {
        assertThat(a.noDivergence()).as(label).isZero();
        assertThat(a.divergenceMin()).as(label + " divergence").isEqualTo(c.get("divergence").asInt());
      }
      assertThat(a.answerBlocks()).as(label).isEqualTo(c.get("answer_blocks").asLong());
      assertThat(a.keptBlocks()).as(label).isEqualTo(c.get("kept_blocks").asLong());
      divergence.merge(label, c.get("divergence").isNull() ? "none" : c.get("divergence").asText(),
          (x, y) -> x.equals(y) ? x : x + "," + y);
      cases++;
    }
    assertThat(cases).isEqualTo(24);
    assertThat(divergence).containsEntry("qwen3{\"enable_thinking\":false}", "-4")
        .containsEntry("qwen3{} reasoning", "0").containsEntry("llama3_1{}", "none")
        .containsEntry("deepseek_v3{}", "none").containsEntry("gemma3{}", "none").containsEntry("qwen3{}", "none");
  }

  /** Turn 1 (prompt p1, generating {@code generated}) followed by turn 2 (prompt p2), as AnswerReuse sees them. */
  private static AnswerReuse reuse(int[] p1, int[] generated, int[] p2, int block) {
    Prompt any = Prompt.tokens(List.of(new Segment(1, 1)));
    WorkloadRequest t1 = new WorkloadRequest(0, "t1", 0, "s", any, 1, new Segment(9, 1), null);
    WorkloadRequest t2 = new WorkloadRequest(1, "t2", 1, "s", any, 1, null, "t1");
    return AnswerReuse.compute(List.of(t1, t2), r -> PromptIds.text(r == t1 ? p1 : p2),
        r -> r == t1 ? generated : null, block, null);
  }

  private static ObjectNode request(String model, JsonNode messages, JsonNode kwargs) {
    ObjectNode r = JSON.createObjectNode();
    r.put("model", "test/" + model);
    r.set("messages", messages);
    if (kwargs.size() > 0) {
      r.set("chat_template_kwargs", kwargs);
    }
    return r;
  }

  private static int[] ids(JsonNode a) {
    return TestEncoders.ids(a);
  }
}
