package dev.kvrouter.examples.sim.http;

import static dev.kvrouter.examples.sim.http.ToolCallAnswerFixture.ok;
import static dev.kvrouter.examples.sim.http.ToolCallAnswerFixture.okJson;
import static dev.kvrouter.examples.sim.http.ToolCallAnswerFixture.promptAndAnswer;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.examples.workload.TokenSpace;
import dev.kvrouter.extproc.request.InferenceRequest;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A scripted worker's tool-call answers on {@code /v1/messages} (Qwen3's template and tokenizer over real HTTP): the
 * answer a request scripts in {@code vllm_xargs} comes back as vLLM's tool parser and Anthropic converter shape it,
 * and the model generated the template's own rendering of it, so the next turn, resending the text and
 * {@code tool_use} blocks, is served from the cache through the end of the answer.
 */
@Timeout(90)
class MessagesToolCallTest {

  private static final ObjectMapper JSON = QwenHttpWorker.JSON;
  private static final int BS = QwenHttpWorker.BS;
  private static final String TEXT = "I will read the parser before I change anything in it.";
  private static final String ID = "toolu_01a1b2c3d4e5f60718";
  @RegisterExtension
  static final QwenHttpWorker worker = new QwenHttpWorker("w-tool", 11, new ScriptedOutput(TokenSpace.DEFAULT));

  /** Turn 1: a Claude Code-like request with one tool, scripting a text and a Read call. */
  private static ObjectNode turn1(int maxTokens, String question) {
    ObjectNode b = ToolCallAnswerFixture.readTurn(worker.model(), maxTokens, question);
    ObjectNode x = b.putObject("vllm_xargs").put("answer_text", TEXT);
    x.putArray("answer_tool_calls").add("{\"id\": \"" + ID + "\", \"name\": \"Read\", \"input\": "
        + "{\"file_path\": \"src/main/java/Parser.java\"}}");
    return b;
  }

  /** Turn 2: turn 1 with the answer resent as the client received it, the tool's result and a new question. */
  private static ObjectNode turn2(ObjectNode turn1, JsonNode answerContent) {
    return ToolCallAnswerFixture.nextTurn(turn1, answerContent, ID, "Now make it parse numbers.");
  }

  @Test
  void theAnswerIsVllmsToolUseAndTheResentTurnHitsTheCacheThroughIt() throws Exception {
    ObjectNode first = turn1(32000, "Where are numbers parsed?");
    int[] prompt = worker.encoder().encodeMessagesPrompt(first).tokens();
    ToolCallScript script = worker.encoder().toolCallScript(InferenceRequest.Kind.MESSAGES, first,
        ToolCallAnswerFixture.of(first));
    JsonNode m = okJson(worker.post("/v1/messages", first));
    assertThat(m.path("stop_reason").asText()).isEqualTo("tool_use");
    JsonNode content = m.path("content");
    assertThat(content).hasSize(2);
    assertThat(content.get(0).path("type").asText()).isEqualTo("text");
    assertThat(content.get(0).path("text").asText()).as("the text block is all before <tool_call>, as vLLM's hermes "
        + "parser leaves content and its converter makes the text block: Qwen3's separator included")
        .isEqualTo(TEXT + "\n");
    JsonNode use = content.get(1);
    assertThat(use.path("type").asText()).isEqualTo("tool_use");
    assertThat(use.path("id").asText()).isEqualTo(ID);
    assertThat(use.path("name").asText()).isEqualTo("Read");
    assertThat(use.path("input").path("file_path").asText()).isEqualTo("src/main/java/Parser.java");
    // the model generated the template's rendering: text, then Qwen3's <tool_call> JSON, then <|im_end|>
    assertThat(m.path("usage").path("output_tokens").asInt()).isEqualTo(script.tokens().length);
    assertThat(script.textTokens()).isBetween(5, script.tokens().length - 10);
    assertThat(script.tokens()[script.tokens().length - 1]).isEqualTo(worker.encoder().endOfTurnToken());

    int[] held = promptAndAnswer(prompt, script);
    int parted = Arrays.mismatch(Arrays.copyOf(encodeMessages(turn2(first, content)), held.length), held);
    assertThat(parted).as("resent verbatim, the separator renders before the template's own: parted at the text's end")
        .isBetween(prompt.length + script.textTokens() - 1, prompt.length + script.textTokens());
    // the load generator resends the text without the separator (ClosedLoopToolCallAnswersTest)
    JsonNode trimmed = content.deepCopy();
    ((ObjectNode) trimmed.get(0)).put("text", TEXT);
    ObjectNode second = turn2(first, trimmed);
    assertThat(Arrays.mismatch(Arrays.copyOf(encodeMessages(second), held.length), held))
        .as("the resent history renders to the prompt plus the generated answer").isEqualTo(-1);
    JsonNode m2 = okJson(worker.post("/v1/messages", second));
    // the KV cache holds every generated token but the last (the end of turn is sampled, never fed back)
    int computed = prompt.length + script.tokens().length - 1;
    assertThat(m2.path("usage").path("cache_read_input_tokens").asInt())
        .as("cached through the end of turn 1's answer, to block granularity").isEqualTo(computed / BS * BS);
    assertThat(m2.path("stop_reason").asText()).as("no script: the model runs to max_tokens").isEqualTo("max_tokens");
  }

  @Test
  void streamedTheCallIsAToolUseBlockWithOneInputJsonDelta() throws Exception {
    ObjectNode body = turn1(32000, "Which file holds the lexer?").put("stream", true);
    List<JsonNode> events = QwenHttpWorker.events(ok(worker.post("/v1/messages", body)));
    List<String> types = QwenHttpWorker.types(events);
    assertThat(types.get(0)).isEqualTo("message_start");
    assertThat(types.get(1)).isEqualTo("content_block_start");
    assertThat(types.subList(types.size() - 6, types.size())).containsExactly("content_block_stop",
        "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop");
    StringBuilder text = new StringBuilder();
    for (JsonNode e : events.subList(2, events.size() - 6)) {
      assertThat(e.path("type").asText()).isEqualTo("content_block_delta");
      assertThat(e.path("index").asInt()).isZero();
      assertThat(e.path("delta").path("type").asText()).isEqualTo("text_delta");
      text.append(e.path("delta").path("text").asText());
    }
    assertThat(text.toString()).as("the separator streams as text, as the hermes parser sends it before <tool_call>")
        .isEqualTo(TEXT + "\n");
    JsonNode start = events.get(events.size() - 5);
    assertThat(start.path("index").asInt()).isOne();
    assertThat(start.path("content_block").path("type").asText()).isEqualTo("tool_use");
    assertThat(start.path("content_block").path("id").asText()).isEqualTo(ID);
    assertThat(start.path("content_block").path("name").asText()).isEqualTo("Read");
    assertThat(start.path("content_block").path("input").isEmpty()).isTrue();
    JsonNode delta = events.get(events.size() - 4).path("delta");
    assertThat(delta.path("type").asText()).isEqualTo("input_json_delta");
    assertThat(JSON.readTree(delta.path("partial_json").asText()).path("file_path").asText())
        .isEqualTo("src/main/java/Parser.java");
    assertThat(events.get(events.size() - 2).path("delta").path("stop_reason").asText()).isEqualTo("tool_use");
  }

  @Test
  void cutByMaxTokensInsideTheCallTheAnswerIsItsTextAlone() throws Exception {
    ObjectNode probe = turn1(32000, "What does the tokenizer return?");
    ToolCallScript script = worker.encoder().toolCallScript(InferenceRequest.Kind.MESSAGES, probe,
        ToolCallAnswerFixture.of(probe));
    int max = script.textTokens() + 3; // inside the <tool_call> JSON
    JsonNode m = okJson(worker.post("/v1/messages", probe.deepCopy().put("max_tokens", max)));
    assertThat(m.path("stop_reason").asText()).isEqualTo("max_tokens");
    assertThat(m.path("content")).hasSize(1);
    assertThat(m.path("content").get(0).path("text").asText()).as("the separator was generated").isEqualTo(TEXT + "\n");
    assertThat(m.path("usage").path("output_tokens").asInt()).isEqualTo(max);

    List<String> types = QwenHttpWorker.types(QwenHttpWorker.events(ok(worker.post("/v1/messages",
        probe.deepCopy().put("max_tokens", max).put("stream", true)))));
    assertThat(types).doesNotContainSequence("content_block_stop", "content_block_start");
    assertThat(types.subList(types.size() - 3, types.size()))
        .containsExactly("content_block_stop", "message_delta", "message_stop");
  }

  private static int[] encodeMessages(ObjectNode body) {
    return worker.encoder().encodeMessagesPrompt(body).tokens();
  }

  @Test
  void aBadScriptIsA400() throws Exception {
    ObjectNode body = turn1(32000, "Anything?");
    ((ObjectNode) body.get("vllm_xargs")).putArray("answer_tool_calls").add("{\"name\": \"Read\"}");
    assertThat(worker.post("/v1/messages", body).statusCode()).isEqualTo(400);
  }
}
