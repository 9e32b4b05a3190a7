package dev.kvrouter.examples.sim.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.examples.loadgen.RequestBodies;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import dev.kvrouter.examples.workload.WorkloadRequest;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@code POST /v1/messages/count_tokens} on one simulated worker over real HTTP (Qwen3's tokenizer and template), as
 * vLLM's {@code AnthropicServingMessages.count_tokens} answers it: the Messages request rendered through the chat
 * template and tokenized, {@code {"input_tokens": N, "context_management": {"original_input_tokens": N}}}, N the
 * prompt tokens the worker reports in the usage of the same body on {@code /v1/messages}; nothing reaches the engine.
 */
@Timeout(60)
class MessagesCountTokensTest {

  private static final ObjectMapper JSON = QwenHttpWorker.JSON;

  @RegisterExtension
  static final QwenHttpWorker worker = new QwenHttpWorker("w-count", 7);

  /** A Claude Code turn of the load generator's coding-agent workload: system blocks, tools, tool_use/tool_result. */
  private static ObjectNode claudeCodeTurn() throws Exception {
    Workload w = WorkloadCatalog.create("multi-turn:format=messages,sessions=1,turns=3,system=64,user=20..30,"
        + "output=16..24,tools=4,tool_text=20,result=16..32,reminder=12,seed=3,answers=fresh");
    WorkloadRequest third = w.requests().get(2);
    return (ObjectNode) JSON.readTree(RequestBodies.body(w, third, worker.model()));
  }

  @Test
  void theCountIsThePromptTheWorkerReportsForTheSameMessagesBody() throws Exception {
    ObjectNode body = claudeCodeTurn();
    assertThat(body.toString()).contains("\"tool_use\"", "\"tool_result\"", "\"tools\"");
    long promptBefore = worker.metric("vllm:prompt_tokens_total");

    // the count request: the same body without what only generation reads
    ObjectNode count = body.deepCopy();
    count.remove("max_tokens");
    count.remove("stream");
    JsonNode counted = JSON.readTree(ok(worker.post("/v1/messages/count_tokens", count)));
    int n = counted.path("input_tokens").asInt();
    assertThat(n).isEqualTo(worker.encoder().encodeMessagesPrompt(body).tokens().length).isGreaterThan(100);
    assertThat(counted.path("context_management").path("original_input_tokens").asInt()).isEqualTo(n);
    assertThat(counted.size()).isEqualTo(2);
    // the generation fields are ignored, as vLLM's count request does not declare them
    JsonNode whole = JSON.readTree(ok(worker.post("/v1/messages/count_tokens", body)));
    assertThat(whole.path("input_tokens").asInt()).isEqualTo(n);
    // counting never reaches the engine
    assertThat(worker.metric("vllm:prompt_tokens_total")).isEqualTo(promptBefore);

    ObjectNode generate = body.deepCopy().put("stream", false);
    JsonNode usage = JSON.readTree(ok(worker.post("/v1/messages", generate))).path("usage");
    assertThat(usage.path("input_tokens").asInt() + usage.path("cache_read_input_tokens").asInt()).isEqualTo(n);
    assertThat(worker.metric("vllm:prompt_tokens_total")).isEqualTo(promptBefore + n);
  }

  @Test
  void fieldsVllmsCountRequestDoesNotDeclareDoNotChangeTheCount() throws Exception {
    ObjectNode body = claudeCodeTurn();
    int plain = JSON.readTree(ok(worker.post("/v1/messages/count_tokens", body))).path("input_tokens").asInt();
    // thinking disabled renders Qwen3's empty think block on /v1/messages; count_tokens never reads it
    ObjectNode disabled = body.deepCopy();
    disabled.putObject("thinking").put("type", "disabled");
    assertThat(worker.encoder().encodeMessagesPrompt(disabled).tokens().length).isNotEqualTo(plain);
    assertThat(JSON.readTree(ok(worker.post("/v1/messages/count_tokens", disabled))).path("input_tokens").asInt())
        .isEqualTo(plain);
  }

  @Test
  void errorsAreVllmsAnthropicOnesOrItsValidationErrors() throws Exception {
    ObjectNode unknown = claudeCodeTurn().put("model", "no-such-model");
    HttpResponse<String> r = worker.post("/v1/messages/count_tokens", unknown);
    assertThat(r.statusCode()).isEqualTo(404);
    JsonNode e = JSON.readTree(r.body());
    assertThat(e.path("type").asText()).isEqualTo("error");
    assertThat(e.path("error").path("message").asText()).contains("no-such-model");

    ObjectNode malformed = JSON.createObjectNode().put("model", worker.model()).put("messages", "not a list");
    HttpResponse<String> bad = worker.post("/v1/messages/count_tokens", malformed);
    assertThat(bad.statusCode()).isEqualTo(400);
    assertThat(JSON.readTree(bad.body()).path("error").path("code").asInt(400)).isEqualTo(400);
  }

  private static String ok(HttpResponse<String> r) {
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    return r.body();
  }
}
