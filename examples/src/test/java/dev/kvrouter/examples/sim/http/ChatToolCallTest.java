package dev.kvrouter.examples.sim.http;

import static dev.kvrouter.examples.sim.http.ToolCallAnswerFixture.ok;
import static dev.kvrouter.examples.sim.http.ToolCallAnswerFixture.okJson;
import static dev.kvrouter.examples.sim.http.ToolCallAnswerFixture.promptAndAnswer;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
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
 * A scripted worker's tool-call answers on {@code /v1/chat/completions} (Qwen3 over real HTTP): the answer
 * {@code vllm_xargs} scripts comes back as vLLM's tool parser returns it ({@code tool_calls}, {@code finish_reason:
 * "tool_calls"}, the arguments as Python's {@code json.dumps} writes them, the content everything before
 * {@code <tool_call>}: the text and the {@code \n} Qwen3 writes before the calls, as vLLM's hermes parser keeps it).
 * The next turn, resending the message received and the tool's result, renders that {@code \n} again before the
 * calls, so its history leaves the generated tokens at the end of the text and the hit ends there.
 */
@Timeout(90)
class ChatToolCallTest {

  private static final ObjectMapper JSON = QwenHttpWorker.JSON;
  private static final int BS = QwenHttpWorker.BS;
  private static final String TEXT = "Let me look at the tokenizer's lexer first.";
  private static final String ID = "call_0a1b2c3d";
  private static final String ARGS = "{\"file_path\": \"src/main/java/Lexer.java\"}";
  @RegisterExtension
  static final QwenHttpWorker worker = new QwenHttpWorker("w-chat-tool", 13, new ScriptedOutput(TokenSpace.DEFAULT));

  private static ObjectNode turn1(int maxTokens) {
    ObjectNode b = JSON.createObjectNode().put("model", worker.model()).put("max_tokens", maxTokens);
    ObjectNode fn = b.putArray("tools").addObject().put("type", "function").putObject("function")
        .put("name", "Read").put("description", "Reads a file.");
    ObjectNode params = fn.putObject("parameters").put("type", "object");
    params.putObject("properties").putObject("file_path").put("type", "string");
    ArrayNode ms = b.putArray("messages");
    ms.addObject().put("role", "system").put("content", "You are a coding agent.");
    ms.addObject().put("role", "user").put("content", "How are identifiers lexed?");
    ObjectNode x = b.putObject("vllm_xargs").put("answer_text", TEXT);
    x.putArray("answer_tool_calls").add("{\"id\": \"" + ID + "\", \"name\": \"Read\", \"input\": "
        + "{\"file_path\": \"src/main/java/Lexer.java\"}}");
    return b;
  }

  @Test
  void theAnswerIsToolCallsAndTheResentTurnHitsTheCacheThroughItsText() throws Exception {
    ObjectNode first = turn1(1000);
    int[] prompt = worker.encoder().encodeChat(first);
    ToolCallScript script = worker.encoder().toolCallScript(InferenceRequest.Kind.CHAT, first,
        ToolCallAnswerFixture.of(first));
    JsonNode choice = okJson(worker.post("/v1/chat/completions", first)).path("choices").get(0);
    assertThat(choice.path("finish_reason").asText()).isEqualTo("tool_calls");
    JsonNode message = choice.path("message");
    assertThat(message.path("content").asText()).isEqualTo(TEXT + "\n");
    assertThat(script.separator()).isEqualTo("\n");
    JsonNode call = message.path("tool_calls").get(0);
    assertThat(call.path("id").asText()).isEqualTo(ID);
    assertThat(call.path("type").asText()).isEqualTo("function");
    assertThat(call.path("function").path("name").asText()).isEqualTo("Read");
    assertThat(call.path("function").path("arguments").asText()).isEqualTo(ARGS);

    ObjectNode second = first.deepCopy().put("max_tokens", 4);
    second.remove("vllm_xargs");
    ArrayNode ms = second.withArray("messages");
    ms.add(message);
    ms.addObject().put("role", "tool").put("tool_call_id", ID).put("content", "final class Lexer { }");
    ms.addObject().put("role", "user").put("content", "Now add hex literals.");
    int[] next = worker.encoder().encodeChat(second);
    int[] held = promptAndAnswer(prompt, script);
    int parted = Arrays.mismatch(Arrays.copyOf(next, held.length), held);
    assertThat(parted).as("the resent content's \\n plus the template's own: the history parts at the text's end")
        .isBetween(prompt.length + script.textTokens() - 1, prompt.length + script.textTokens());
    // the content without the separator (what the simulator returned before) renders as generated
    ObjectNode stripped = second.deepCopy();
    ((ObjectNode) stripped.withArray("messages").get(2)).put("content", TEXT);
    assertThat(Arrays.mismatch(Arrays.copyOf(worker.encoder().encodeChat(stripped), held.length), held))
        .isEqualTo(-1);
    JsonNode usage = okJson(worker.post("/v1/chat/completions", second)).path("usage");
    assertThat(usage.path("prompt_tokens_details").path("cached_tokens").asInt()).isEqualTo(parted / BS * BS);
  }

  @Test
  void streamedTheCallsComeWithTheFinishReasonAndNoTextOfTheirOwn() throws Exception {
    ObjectNode body = turn1(1000).put("stream", true);
    String raw = ok(worker.post("/v1/chat/completions", body));
    List<JsonNode> chunks = new ArrayList<>();
    for (String line : raw.split("\n")) {
      if (line.startsWith("data: ") && !line.equals("data: [DONE]")) {
        chunks.add(JSON.readTree(line.substring(6)));
      }
    }
    StringBuilder text = new StringBuilder();
    JsonNode last = null;
    for (JsonNode c : chunks) {
      JsonNode choice = c.path("choices").get(0);
      text.append(choice.path("delta").path("content").asText(""));
      if (!choice.path("finish_reason").isNull()) {
        last = choice;
      }
    }
    assertThat(text.toString()).isEqualTo(TEXT + "\n");
    ToolCallScript script = worker.encoder().toolCallScript(InferenceRequest.Kind.CHAT, body,
        ToolCallAnswerFixture.of(body));
    // the role chunk, one chunk per text token that completes a word (vLLM's parsers return no delta for a token
    // with no text, and the serving layer then sends no chunk), the separator's, then the calls with the finish reason
    int worded = 0;
    for (int i = 0; i < script.textTokens(); i++) {
      worded += script.deltas()[i].isEmpty() ? 0 : 1;
    }
    assertThat(worded).as("some word of the text spans two tokens").isLessThan(script.textTokens());
    assertThat(chunks).hasSize(1 + worded + 1 + 1);
    for (JsonNode c : chunks.subList(1, chunks.size() - 1)) {
      assertThat(c.path("choices").get(0).path("delta").path("content").asText("")).as("no empty delta").isNotEmpty();
    }
    assertThat(last.path("finish_reason").asText()).isEqualTo("tool_calls");
    assertThat(last.path("delta").has("content")).isFalse();
    JsonNode call = last.path("delta").path("tool_calls").get(0);
    assertThat(call.path("index").asInt()).isZero();
    assertThat(call.path("id").asText()).isEqualTo(ID);
    assertThat(call.path("function").path("arguments").asText()).isEqualTo(ARGS);
  }

  @Test
  void cutInsideTheCallItIsTextWithLength() throws Exception {
    ObjectNode probe = turn1(1000);
    ToolCallScript script = worker.encoder().toolCallScript(InferenceRequest.Kind.CHAT, probe,
        ToolCallAnswerFixture.of(probe));
    JsonNode choice = okJson(worker.post("/v1/chat/completions", probe.deepCopy().put("max_tokens",
        script.textTokens() + 2))).path("choices").get(0);
    assertThat(choice.path("finish_reason").asText()).isEqualTo("length");
    assertThat(choice.path("message").path("content").asText()).as("the separator was generated")
        .isEqualTo(TEXT + "\n");
    assertThat(choice.path("message").has("tool_calls")).isFalse();
  }
}
