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
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A scripted answer with reasoning on Qwen3 (its template and tokenizer over real HTTP): with thinking on, the model
 * writes the think block before the answer, returned as vLLM's qwen3 reasoning parser splits it off (a
 * {@code thinking} block first on {@code /v1/messages}, {@code reasoning} on chat). Qwen3's template keeps the think
 * block only in assistant turns after the last user query: a next turn with a new question renders the answer
 * without it, so the cache hit ends where the think block began, while a tool loop (only tool results since the
 * question) keeps it and reuses the whole answer. With thinking off, no think block is generated.
 */
@Timeout(90)
class ThinkingAnswerTest {

  private static final ObjectMapper JSON = QwenHttpWorker.JSON;
  private static final int BS = QwenHttpWorker.BS;
  private static final String REASONING = "The numbers are read by the lexer so I should open the lexer first.";
  private static final String TEXT = "I will read the lexer before I change anything.";
  private static final String ID = "toolu_01f0e1d2c3b4a59687";
  @RegisterExtension
  static final QwenHttpWorker worker = new QwenHttpWorker("w-think", 17, new ScriptedOutput(TokenSpace.DEFAULT));

  /** A Messages turn with one tool, scripting reasoning, a text and a Read call. */
  private static ObjectNode turn1(String question) {
    ObjectNode b = ToolCallAnswerFixture.readTurn(worker.model(), 32000, question);
    ObjectNode x = b.putObject("vllm_xargs").put("answer_reasoning", REASONING).put("answer_text", TEXT);
    x.putArray("answer_tool_calls").add("{\"id\": \"" + ID + "\", \"name\": \"Read\", \"input\": "
        + "{\"file_path\": \"src/Lexer.java\"}}");
    return b;
  }

  /** The next turn: the answer resent as received, the tool's result and, when given, a new question. */
  private static ObjectNode next(ObjectNode turn1, JsonNode answerContent, String question) {
    return ToolCallAnswerFixture.nextTurn(turn1, answerContent, ID, question);
  }

  private static ToolCallScript script(InferenceRequest.Kind kind, ObjectNode body) {
    return worker.encoder().toolCallScript(kind, body, ToolCallAnswerFixture.of(body));
  }

  private static int thinkToken() {
    return worker.encoder().resources().tokenizer().encode("<think>", false)[0];
  }

  @Test
  void aThinkingAnswerIsAThinkingBlockFirstAndANewQuestionReusesTheCacheOnlyToWhereItBegan() throws Exception {
    ObjectNode first = turn1("Where are numbers parsed?");
    int[] prompt = worker.encoder().encodeMessagesPrompt(first).tokens();
    ToolCallScript script = script(InferenceRequest.Kind.MESSAGES, first);
    assertThat(script.tokens()[0]).as("the model opens its think block").isEqualTo(thinkToken());
    assertThat(script.reasoningTokens()).isBetween(10, script.textTokens() - 5);
    JsonNode m = okJson(worker.post("/v1/messages", first));
    assertThat(m.path("stop_reason").asText()).isEqualTo("tool_use");
    JsonNode content = m.path("content");
    assertThat(content).hasSize(3);
    assertThat(content.get(0).path("type").asText()).isEqualTo("thinking");
    assertThat(content.get(0).path("thinking").asText()).isEqualTo(REASONING);
    assertThat(content.get(0).path("signature").asText()).isNotEmpty();
    assertThat(content.get(1).path("text").asText()).isEqualTo(TEXT + "\n"); // hermes keeps Qwen3's separator
    assertThat(content.get(2).path("type").asText()).isEqualTo("tool_use");
    assertThat(m.path("usage").path("output_tokens").asInt()).isEqualTo(script.tokens().length);

    ObjectNode second = next(first, content, "Now make it parse hex.");
    int[] again = worker.encoder().encodeMessagesPrompt(second).tokens();
    assertThat(Arrays.mismatch(again, promptAndAnswer(prompt, script)))
        .as("the history drops the think block: the prompts part where it began").isEqualTo(prompt.length);
    JsonNode m2 = okJson(worker.post("/v1/messages", second));
    assertThat(m2.path("usage").path("cache_read_input_tokens").asInt())
        .as("cached to where the think block began, not through the answer").isEqualTo(prompt.length / BS * BS)
        .isLessThan((prompt.length + script.tokens().length - 1) / BS * BS);
  }

  @Test
  void inAToolLoopTheThinkBlockStaysInTheHistoryAndTheWholeAnswerIsReused() throws Exception {
    ObjectNode first = turn1("Which file lexes identifiers?");
    int[] prompt = worker.encoder().encodeMessagesPrompt(first).tokens();
    ToolCallScript script = script(InferenceRequest.Kind.MESSAGES, first);
    JsonNode content = okJson(worker.post("/v1/messages", first)).path("content").deepCopy();
    ((ObjectNode) content.get(1)).put("text", TEXT); // resent without the separator, as the load generator does
    ObjectNode second = next(first, content, null);
    int[] held = promptAndAnswer(prompt, script);
    int[] again = worker.encoder().encodeMessagesPrompt(second).tokens();
    assertThat(Arrays.mismatch(Arrays.copyOf(again, held.length), held))
        .as("only tool results since the question: Qwen3 keeps the think block").isEqualTo(-1);
    JsonNode m2 = okJson(worker.post("/v1/messages", second));
    assertThat(m2.path("usage").path("cache_read_input_tokens").asInt())
        .isEqualTo((prompt.length + script.tokens().length - 1) / BS * BS);
  }

  @Test
  void streamedTheThinkingBlockComesFirstWithThinkingDeltasAndASignature() throws Exception {
    ObjectNode body = turn1("What does the lexer return?").put("stream", true);
    List<JsonNode> events = QwenHttpWorker.events(ok(worker.post("/v1/messages", body)));
    assertThat(events.get(1).path("type").asText()).isEqualTo("content_block_start");
    assertThat(events.get(1).path("index").asInt()).isZero();
    assertThat(events.get(1).path("content_block").path("type").asText()).isEqualTo("thinking");
    StringBuilder thinking = new StringBuilder();
    StringBuilder text = new StringBuilder();
    List<String> order = new ArrayList<>();
    for (JsonNode e : events) {
      JsonNode d = e.path("delta");
      switch (d.path("type").asText()) {
        case "thinking_delta" -> thinking.append(d.path("thinking").asText());
        case "text_delta" -> text.append(d.path("text").asText());
        default -> { }
      }
      if (e.path("type").asText().startsWith("content_block")) {
        order.add(e.path("type").asText().substring(14) + ":" + e.path("index").asInt() + ":"
            + (d.isMissingNode() ? e.path("content_block").path("type").asText() : d.path("type").asText()));
      }
    }
    assertThat(thinking.toString()).isEqualTo(REASONING);
    assertThat(text.toString()).isEqualTo(TEXT + "\n");
    assertThat(order).containsSubsequence("start:0:thinking", "delta:0:thinking_delta", "delta:0:signature_delta",
        "stop:0:", "start:1:text", "delta:1:text_delta", "stop:1:", "start:2:tool_use", "stop:2:");
  }

  @Test
  void withThinkingDisabledNoThinkBlockIsGenerated() throws Exception {
    ObjectNode body = turn1("Where do tokens end?");
    body.putObject("thinking").put("type", "disabled");
    ToolCallScript script = script(InferenceRequest.Kind.MESSAGES, body);
    assertThat(script.reasoningTokens()).isZero();
    assertThat(script.tokens()).doesNotContain(thinkToken());
    JsonNode m = okJson(worker.post("/v1/messages", body));
    assertThat(m.path("content").get(0).path("type").asText()).isEqualTo("text");
    assertThat(m.path("content").get(0).path("text").asText()).isEqualTo(TEXT + "\n");
    assertThat(m.path("usage").path("output_tokens").asInt()).isEqualTo(script.tokens().length);
  }

  /** A chat turn with one tool, scripting reasoning, a text and a Read call. */
  private static ObjectNode chatTurn() {
    ObjectNode b = JSON.createObjectNode().put("model", worker.model()).put("max_tokens", 1000);
    ObjectNode fn = b.putArray("tools").addObject().put("type", "function").putObject("function")
        .put("name", "Read").put("description", "Reads a file.");
    fn.putObject("parameters").put("type", "object").putObject("properties").putObject("file_path")
        .put("type", "string");
    b.putArray("messages").addObject().put("role", "user").put("content", "How are floats lexed?");
    ObjectNode x = b.putObject("vllm_xargs").put("answer_reasoning", REASONING).put("answer_text", TEXT);
    x.putArray("answer_tool_calls").add("{\"id\": \"call_9\", \"name\": \"Read\", \"input\": "
        + "{\"file_path\": \"src/Lexer.java\"}}");
    return b;
  }

  @Test
  void onChatTheReasoningIsVllmsReasoningFieldAndResentKeepsTheToolLoopCached() throws Exception {
    ObjectNode first = chatTurn();
    int[] prompt = worker.encoder().encodeChat(first);
    ToolCallScript script = script(InferenceRequest.Kind.CHAT, first);
    JsonNode choice = okJson(worker.post("/v1/chat/completions", first)).path("choices").get(0);
    JsonNode message = choice.path("message");
    assertThat(choice.path("finish_reason").asText()).isEqualTo("tool_calls");
    assertThat(message.path("reasoning").asText()).isEqualTo(REASONING);
    assertThat(message.path("content").asText()).isEqualTo(TEXT + "\n"); // hermes keeps Qwen3's separator
    assertThat(message.path("tool_calls")).hasSize(1);

    ObjectNode second = first.deepCopy().put("max_tokens", 4);
    second.remove("vllm_xargs");
    second.withArray("messages").add(message);
    second.withArray("messages").addObject().put("role", "tool").put("tool_call_id", "call_9").put("content", "x");
    int[] held = promptAndAnswer(prompt, script);
    // the think block and the text stay (a tool loop); the resent separator renders twice, parting at the text's end
    assertThat(Arrays.mismatch(Arrays.copyOf(worker.encoder().encodeChat(second), held.length), held))
        .isBetween(prompt.length + script.textTokens() - 1, prompt.length + script.textTokens());

    StringBuilder reasoning = new StringBuilder();
    StringBuilder text = new StringBuilder();
    for (String line : ok(worker.post("/v1/chat/completions", first.deepCopy().put("stream", true))).split("\n")) {
      if (line.startsWith("data: {")) {
        JsonNode chunk = JSON.readTree(line.substring(6)).path("choices").path(0);
        JsonNode delta = chunk.path("delta");
        reasoning.append(delta.path("reasoning").asText(""));
        text.append(delta.path("content").asText(""));
        if (!delta.has("role") && chunk.path("finish_reason").isNull()) {
          // vLLM's reasoning and tool parsers return no delta for <think>, </think> or a token without text
          assertThat(delta.path("reasoning").asText("") + delta.path("content").asText("")).as(line).isNotEmpty();
        }
      }
    }
    assertThat(reasoning.toString()).isEqualTo(REASONING);
    assertThat(text.toString()).isEqualTo(TEXT + "\n");
  }

  @Test
  void onChatWithEnableThinkingFalseTheAnswerIsWhatFollowsThePromptsEmptyThinkBlock() throws Exception {
    ObjectNode body = chatTurn();
    body.putObject("chat_template_kwargs").put("enable_thinking", false);
    ToolCallScript script = script(InferenceRequest.Kind.CHAT, body);
    assertThat(script.reasoningTokens()).isZero();
    assertThat(script.tokens()).doesNotContain(thinkToken());
    JsonNode message = okJson(worker.post("/v1/chat/completions", body)).path("choices").get(0).path("message");
    assertThat(message.has("reasoning")).isFalse();
    assertThat(message.path("content").asText()).isEqualTo(TEXT + "\n");
  }

  @Test
  void withEnableThinkingFalseTheNextTurnHitsTheCacheToWhereThePromptsEmptyThinkBlockBegan() throws Exception {
    ObjectNode first = chatTurn();
    first.putObject("chat_template_kwargs").put("enable_thinking", false);
    int[] prompt = worker.encoder().encodeChat(first);
    int[] empty = worker.encoder().resources().tokenizer().encode("<think>\n\n</think>\n\n", false);
    assertThat(Arrays.copyOfRange(prompt, prompt.length - empty.length, prompt.length))
        .as("Qwen3's generation prompt with thinking off ends in an empty think block").isEqualTo(empty);
    ToolCallScript script = script(InferenceRequest.Kind.CHAT, first);
    JsonNode message = okJson(worker.post("/v1/chat/completions", first)).path("choices").get(0).path("message");

    ObjectNode second = first.deepCopy().put("max_tokens", 4);
    second.remove("vllm_xargs");
    second.withArray("messages").add(message);
    second.withArray("messages").addObject().put("role", "tool").put("tool_call_id", "call_9").put("content", "x");
    int[] next = worker.encoder().encodeChat(second);
    int parted = Arrays.mismatch(next, promptAndAnswer(prompt, script));
    assertThat(parted).as("the history renders the answer without the prompt's empty think block")
        .isEqualTo(prompt.length - empty.length);
    JsonNode usage = okJson(worker.post("/v1/chat/completions", second)).path("usage");
    assertThat(usage.path("prompt_tokens_details").path("cached_tokens").asInt()).isEqualTo(parted / BS * BS);
  }
}
