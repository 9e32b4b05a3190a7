package dev.kvrouter.examples.sim.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.extproc.decision.UsageScanner;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@code POST /v1/responses} on one simulated worker over real HTTP (Qwen3's tokenizer and chat template): the
 * prompt is the chat prompt the router renders for it, the answer is vLLM's response object or event stream, the
 * usage is the engine's truth in the Responses names, which the router's {@link UsageScanner} reads.
 */
@Timeout(90)
class ResponsesEndpointTest {

  private static final ObjectMapper JSON = QwenHttpWorker.JSON;
  private static final int BS = QwenHttpWorker.BS;
  private static final String INSTRUCTIONS = "You are a careful assistant who answers questions about prefix caching "
      + "in large language model serving systems, briefly and precisely.";
  @RegisterExtension
  static final QwenHttpWorker worker = new QwenHttpWorker("w-resp", 3);

  private static HttpResponse<String> post(String path, JsonNode body) throws Exception {
    return worker.post(path, body);
  }

  private static ObjectNode request(String requestId, int maxOutput, JsonNode input) {
    ObjectNode b = JSON.createObjectNode().put("model", worker.model()).put("instructions", INSTRUCTIONS)
        .put("max_output_tokens", maxOutput);
    if (requestId != null) {
      b.put("request_id", requestId);
    }
    b.set("input", input);
    return b;
  }

  private static ObjectNode user(String text) {
    ObjectNode m = JSON.createObjectNode().put("type", "message").put("role", "user");
    m.putArray("content").addObject().put("type", "input_text").put("text", text);
    return m;
  }

  private static ObjectNode assistant(String text) {
    ObjectNode m = JSON.createObjectNode().put("type", "message").put("role", "assistant").put("status",
        "completed");
    m.putArray("content").addObject().put("type", "output_text").put("text", text);
    return m;
  }

  private static String text(JsonNode response) {
    return response.path("output").path(0).path("content").path(0).path("text").asText();
  }

  @Test
  void notStreamedAnswerIsVllmsResponseObjectWithTheRequestsIdAndTheChatPromptsTokens() throws Exception {
    ArrayNode input = JSON.createArrayNode().add(user("What does a prefix cache keep between requests?"));
    long promptBefore = worker.metric("vllm:prompt_tokens_total");
    HttpResponse<String> r = post("/v1/responses", request("resp_unit-1", 5, input));
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.headers().firstValue("content-type")).hasValue("application/json");
    assertThat(r.headers().firstValue(SimHttpServer.SERVED_BY)).hasValue("w-resp");
    JsonNode resp = JSON.readTree(r.body());
    assertThat(resp.path("id").asText()).isEqualTo("resp_unit-1");
    assertThat(resp.path("object").asText()).isEqualTo("response");
    assertThat(resp.path("model").asText()).isEqualTo(worker.model());
    assertThat(resp.path("created_at").asLong()).isPositive();
    assertThat(resp.path("instructions").asText()).isEqualTo(INSTRUCTIONS);
    assertThat(resp.path("max_output_tokens").asInt()).isEqualTo(5);
    // the simulated model has no EOS: every answer runs to max_output_tokens, which vLLM reports as incomplete
    assertThat(resp.path("status").asText()).isEqualTo("incomplete");
    assertThat(resp.path("incomplete_details").path("reason").asText()).isEqualTo("max_output_tokens");
    assertThat(resp.path("output")).hasSize(1);
    JsonNode item = resp.path("output").path(0);
    assertThat(item.path("type").asText()).isEqualTo("message");
    assertThat(item.path("role").asText()).isEqualTo("assistant");
    assertThat(item.path("id").asText()).startsWith("msg_");
    assertThat(item.path("content").path(0).path("type").asText()).isEqualTo("output_text");
    assertThat(text(resp)).isNotBlank();

    // the prompt is the chat one: instructions as the system message, the input item as the user's
    ObjectNode chat = JSON.createObjectNode().put("model", worker.model()).put("max_tokens", 1);
    chat.putArray("messages").add(JSON.createObjectNode().put("role", "system").put("content", INSTRUCTIONS))
        .add(JSON.createObjectNode().put("role", "user").put("content",
            "What does a prefix cache keep between requests?"));
    int chatPrompt = JSON.readTree(post("/v1/chat/completions", chat).body()).path("usage").path("prompt_tokens")
        .asInt();
    JsonNode usage = resp.path("usage");
    assertThat(usage.path("input_tokens").asInt()).isEqualTo(chatPrompt).isGreaterThan(30);
    assertThat(usage.path("output_tokens").asInt()).isEqualTo(5);
    assertThat(usage.path("total_tokens").asInt()).isEqualTo(chatPrompt + 5);
    assertThat(usage.path("output_tokens_details").path("reasoning_tokens").asInt()).isZero();
    assertThat(usage.path("input_tokens_details").has("cached_tokens")).isTrue();
    // vLLM's counters count it as they count chat (this request and the chat one)
    assertThat(worker.metric("vllm:prompt_tokens_total") - promptBefore).isEqualTo(2L * chatPrompt);

    UsageScanner scanner = new UsageScanner();
    byte[] bytes = r.body().getBytes(StandardCharsets.UTF_8);
    scanner.feed(bytes, 0, bytes.length);
    assertThat(scanner.promptTokens()).isEqualTo(chatPrompt);
    assertThat(scanner.cachedTokens()).isEqualTo(usage.path("input_tokens_details").path("cached_tokens").asLong());
  }

  @Test
  void aSecondTurnResendingTheFirstIsServedFromThePrefixCache() throws Exception {
    PipelinePromptEncoder encoder = worker.encoder();
    ArrayNode input1 = JSON.createArrayNode().add(user("Explain block hashing for a paged KV cache, turn one."));
    ObjectNode turn1 = request(null, 12, input1);
    JsonNode r1 = JSON.readTree(post("/v1/responses", turn1).body());
    assertThat(r1.path("id").asText()).matches("resp_[0-9a-f]{32}"); // vLLM's own shape when none is given
    ArrayNode input2 = input1.deepCopy().add(assistant(text(r1)))
        .add(user("And what happens to those blocks when the cache is full?"));
    ObjectNode turn2 = request("resp_unit-turn-2", 4, input2);
    long hitsBefore = worker.metric("vllm:prefix_cache_hits_total");
    JsonNode r2 = JSON.readTree(post("/v1/responses", turn2).body());
    assertThat(r2.path("id").asText()).isEqualTo("resp_unit-turn-2");

    int[] p1 = encoder.encodeResponsesPrompt(turn1).tokens();
    int[] p2 = encoder.encodeResponsesPrompt(turn2).tokens();
    assertThat(r1.path("usage").path("input_tokens").asInt()).isEqualTo(p1.length);
    assertThat(r2.path("usage").path("input_tokens").asInt()).isEqualTo(p2.length);
    int common = 0;
    while (common < p1.length && common < p2.length && p1[common] == p2[common]) {
      common++;
    }
    long cached = r2.path("usage").path("input_tokens_details").path("cached_tokens").asLong();
    // at least every full block of the first turn's prompt the second repeats (the answer's blocks may add more)
    assertThat(common / BS * BS).isGreaterThanOrEqualTo(3 * BS);
    assertThat(cached).isGreaterThanOrEqualTo(common / BS * BS).isLessThan(p2.length);
    assertThat(cached % BS).isZero();
    assertThat(worker.metric("vllm:prefix_cache_hits_total") - hitsBefore).isEqualTo(cached);
  }

  @Test
  void streamedAnswerIsVllmsEventSequenceEndingInResponseCompletedWithUsage() throws Exception {
    ArrayNode input = JSON.createArrayNode().add(user("Stream a short answer about cache eviction, please."));
    ObjectNode body = request("resp_unit-stream", 6, input).put("stream", true);
    HttpResponse<String> r = post("/v1/responses", body);
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.headers().firstValue("content-type").orElse("")).startsWith("text/event-stream");
    List<JsonNode> events = QwenHttpWorker.events(r.body());
    for (int i = 0; i < events.size(); i++) {
      assertThat(events.get(i).path("sequence_number").asInt()).isEqualTo(i);
    }
    List<String> expected = new ArrayList<>(List.of("response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added"));
    for (int i = 0; i < 6; i++) {
      expected.add("response.output_text.delta");
    }
    expected.addAll(List.of("response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed"));
    assertThat(QwenHttpWorker.types(events)).isEqualTo(expected);
    assertThat(events.get(0).path("response").path("status").asText()).isEqualTo("in_progress");
    assertThat(events.get(0).path("response").path("id").asText()).isEqualTo("resp_unit-stream");
    assertThat(events.get(0).path("response").path("usage").isNull()).isTrue();
    StringBuilder deltas = new StringBuilder();
    String itemId = events.get(2).path("item").path("id").asText();
    for (JsonNode e : events.subList(4, 10)) {
      deltas.append(e.path("delta").asText());
      assertThat(e.path("item_id").asText()).isEqualTo(itemId);
    }
    assertThat(events.get(10).path("text").asText()).isEqualTo(deltas.toString());
    JsonNode done = events.get(13).path("response");
    assertThat(done.path("id").asText()).isEqualTo("resp_unit-stream");
    assertThat(text(done)).isEqualTo(deltas.toString());
    assertThat(done.path("usage").path("output_tokens").asInt()).isEqualTo(6);
    int prompt = worker.encoder().encodeResponsesPrompt(body).tokens().length;
    assertThat(done.path("usage").path("input_tokens").asInt()).isEqualTo(prompt);

    // the router's truth check reads the usage of response.completed
    UsageScanner scanner = new UsageScanner();
    byte[] bytes = r.body().getBytes(StandardCharsets.UTF_8);
    scanner.feed(bytes, 0, bytes.length);
    assertThat(scanner.promptTokens()).isEqualTo(prompt);
    assertThat(scanner.cachedTokens()).isEqualTo(done.path("usage").path("input_tokens_details")
        .path("cached_tokens").asLong());
  }

  @Test
  void whatTheWorkerCannotServeIsRefusedAsVllmRefusesIt() throws Exception {
    ArrayNode input = JSON.createArrayNode().add(user("hello"));
    // no response store (vLLM's default): every previous response is unknown
    HttpResponse<String> prev = post("/v1/responses", request(null, 2, input).put("previous_response_id",
        "resp_0123456789abcdef0123456789abcdef"));
    assertThat(prev.statusCode()).isEqualTo(404);
    assertThat(JSON.readTree(prev.body()).path("error").path("param").asText()).isEqualTo("response_id");
    assertThat(post("/v1/responses", request(null, 2, input).put("background", true)).statusCode())
        .isEqualTo(400);
    assertThat(post("/v1/responses", request(null, 0, input)).statusCode()).isEqualTo(400);
    ObjectNode template = request(null, 2, input);
    template.putObject("prompt").put("id", "pmpt_1");
    assertThat(post("/v1/responses", template).statusCode()).isEqualTo(400);
    // an item vLLM hands to the template raw: its prompt is not known from the body
    ArrayNode raw = input.deepCopy();
    raw.addObject().put("type", "item_reference").put("id", "msg_1");
    HttpResponse<String> item = post("/v1/responses", request(null, 2, raw));
    assertThat(item.statusCode()).isEqualTo(501);
    assertThat(JSON.readTree(item.body()).path("error").path("message").asText())
        .contains("responses_input_item");
    ObjectNode unknownModel = request(null, 2, input).put("model", "nope");
    assertThat(post("/v1/responses", unknownModel).statusCode()).isEqualTo(404);
  }
}
