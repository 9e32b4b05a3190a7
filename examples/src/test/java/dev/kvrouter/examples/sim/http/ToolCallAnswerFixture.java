package dev.kvrouter.examples.sim.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.examples.workload.ToolCallAnswer;
import java.net.http.HttpResponse;
import java.util.Arrays;

/** What the tool-call answer tests share: the script a body carries, a 200's body, the tokens a cache holds. */
final class ToolCallAnswerFixture {

  private ToolCallAnswerFixture() {}

  /** The tool-call answer a test body scripts, read as the worker reads it. */
  static ToolCallAnswer of(JsonNode body) {
    return ToolCallAnswer.fromXargs(body.get("vllm_xargs"));
  }

  /** The body of a response that must be a 200. */
  static String ok(HttpResponse<String> r) {
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    return r.body();
  }

  /** The body of a response that must be a 200, as JSON. */
  static JsonNode okJson(HttpResponse<String> r) throws Exception {
    return QwenHttpWorker.JSON.readTree(ok(r));
  }

  /** The prompt followed by the generated answer: what the next turn's prompt must open with. */
  static int[] promptAndAnswer(int[] prompt, ToolCallScript script) {
    int[] held = Arrays.copyOf(prompt, prompt.length + script.tokens().length);
    System.arraycopy(script.tokens(), 0, held, prompt.length, script.tokens().length);
    return held;
  }

  /** A Claude Code-like Messages turn with a Read tool and one question, scripting nothing yet. */
  static ObjectNode readTurn(String model, int maxTokens, String question) {
    ObjectNode b = QwenHttpWorker.JSON.createObjectNode().put("model", model).put("max_tokens", maxTokens);
    b.putArray("system").addObject().put("type", "text").put("text", "You are a coding agent. Read before editing.");
    ObjectNode read = b.putArray("tools").addObject().put("name", "Read").put("description", "Reads a file.");
    ObjectNode schema = read.putObject("input_schema").put("type", "object");
    schema.putObject("properties").putObject("file_path").put("type", "string");
    schema.putArray("required").add("file_path");
    ArrayNode ms = b.putArray("messages");
    ms.addObject().put("role", "user").putArray("content").addObject().put("type", "text").put("text", question);
    return b;
  }

  /**
   * The turn after {@code turn}: its answer resent as received ({@code answerContent}), the result of call
   * {@code id} and, unless null, a new question.
   */
  static ObjectNode nextTurn(ObjectNode turn, JsonNode answerContent, String id, String question) {
    ObjectNode b = turn.deepCopy().put("max_tokens", 4);
    b.remove("vllm_xargs");
    ArrayNode ms = b.withArray("messages");
    ms.addObject().put("role", "assistant").set("content", answerContent);
    ArrayNode user = ms.addObject().put("role", "user").putArray("content");
    user.addObject().put("type", "tool_result").put("tool_use_id", id).put("content", "class Parser { }");
    if (question != null) {
      user.addObject().put("type", "text").put("text", question);
    }
    return b;
  }
}
