package dev.kvrouter.examples.sim.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
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
}
