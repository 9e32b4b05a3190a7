package dev.kvrouter.examples.sim.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.extproc.decision.UsageScanner;
import dev.kvrouter.extproc.model.InlineSystemMode;
import dev.kvrouter.extproc.model.MessagesDialect;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.request.RequestBodyParser;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@code POST /v1/messages} on one simulated worker over real HTTP (Qwen3's tokenizer and chat template): the
 * prompt is the chat prompt the router converts the request into, the answer is vLLM's Anthropic message or event
 * stream, and the usage splits the engine's prompt into uncached {@code input_tokens} and
 * {@code cache_read_input_tokens}, which the router's {@link UsageScanner} adds back up.
 */
@Timeout(90)
class MessagesEndpointTest {

  private static final ObjectMapper JSON = QwenHttpWorker.JSON;
  private static final int BS = QwenHttpWorker.BS;
  private static final String SYSTEM = "You are a coding agent working in a Java repository. Read files before you "
      + "edit them, keep changes small and run the tests you touched.";
  @RegisterExtension
  static final QwenHttpWorker worker = new QwenHttpWorker("w-msg", 5);

  private static HttpResponse<String> post(String path, JsonNode body) throws Exception {
    return worker.post(path, body);
  }

  /** A request with Claude Code's system blocks: the per-request billing header, which vLLM drops, then the prompt. */
  private static ObjectNode request(int maxTokens, ArrayNode messages) {
    ObjectNode b = JSON.createObjectNode().put("model", worker.model()).put("max_tokens", maxTokens);
    ArrayNode system = b.putArray("system");
    system.addObject().put("type", "text").put("text", "x-anthropic-billing-header: cc_version=2.1.3; cch=91ac2;");
    system.addObject().put("type", "text").put("text", SYSTEM);
    b.set("messages", messages);
    return b;
  }

  private static ObjectNode text(String role, String text) {
    ObjectNode m = JSON.createObjectNode().put("role", role);
    m.putArray("content").addObject().put("type", "text").put("text", text);
    return m;
  }

  @Test
  void notStreamedAnswerIsVllmsMessageWithTheConvertedChatPromptsTokens() throws Exception {
    String question = "Where is the request body parsed in this project?";
    HttpResponse<String> r = post("/v1/messages", request(5, JSON.createArrayNode().add(text("user", question))));
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    assertThat(r.headers().firstValue("content-type")).hasValue("application/json");
    assertThat(r.headers().firstValue(SimHttpServer.SERVED_BY)).hasValue("w-msg");
    JsonNode m = JSON.readTree(r.body());
    List<String> fields = new ArrayList<>();
    m.fieldNames().forEachRemaining(fields::add);
    // model_dump(exclude_none=True): no stop_sequence
    assertThat(fields).containsExactly("id", "type", "role", "content", "model", "stop_reason", "usage");
    assertThat(m.path("id").asText()).startsWith("chatcmpl-");
    assertThat(m.path("type").asText()).isEqualTo("message");
    assertThat(m.path("role").asText()).isEqualTo("assistant");
    assertThat(m.path("model").asText()).isEqualTo(worker.model());
    // the simulated model has no EOS: every answer runs to max_tokens
    assertThat(m.path("stop_reason").asText()).isEqualTo("max_tokens");
    assertThat(m.path("content")).hasSize(1);
    assertThat(m.path("content").path(0).path("type").asText()).isEqualTo("text");
    assertThat(m.path("content").path(0).path("text").asText()).isNotBlank();

    // the prompt is the converted chat one: the billing header dropped, the system text as the system message
    ObjectNode chat = JSON.createObjectNode().put("model", worker.model()).put("max_tokens", 1);
    chat.putArray("messages").add(JSON.createObjectNode().put("role", "system").put("content", SYSTEM))
        .add(JSON.createObjectNode().put("role", "user").put("content", question));
    int chatPrompt = JSON.readTree(post("/v1/chat/completions", chat).body()).path("usage").path("prompt_tokens")
        .asInt();
    JsonNode usage = m.path("usage");
    List<String> usageFields = new ArrayList<>();
    usage.fieldNames().forEachRemaining(usageFields::add);
    assertThat(usageFields).containsExactly("input_tokens", "output_tokens", "cache_read_input_tokens");
    long cached = usage.path("cache_read_input_tokens").asLong();
    assertThat(usage.path("input_tokens").asLong() + cached).isEqualTo(chatPrompt).isGreaterThan(30);
    assertThat(usage.path("output_tokens").asInt()).isEqualTo(5);

    UsageScanner scanner = QwenHttpWorker.scanned(r.body());
    assertThat(scanner.promptTokens()).isEqualTo(chatPrompt);
    assertThat(scanner.cachedTokens()).isEqualTo(cached);
  }

  @Test
  void aToolTurnResendingTheFirstIsServedFromThePrefixCacheAndReportedAsCacheRead() throws Exception {
    PipelinePromptEncoder encoder = worker.encoder();
    ArrayNode messages = JSON.createArrayNode().add(text("user", "List the modules of this build, turn one."));
    ObjectNode turn1 = request(8, messages);
    turn1.putArray("tools").addObject().put("name", "Bash").put("description", "Runs a shell command.")
        .putObject("input_schema").put("type", "object").putObject("properties").putObject("command")
        .put("type", "string");
    JsonNode r1 = JSON.readTree(post("/v1/messages", turn1).body());
    ArrayNode messages2 = messages.deepCopy();
    ObjectNode use = messages2.addObject().put("role", "assistant");
    use.putArray("content").add(JSON.createObjectNode().put("type", "text")
        .put("text", r1.path("content").path(0).path("text").asText()))
        .addObject().put("type", "tool_use").put("id", "toolu_01").put("name", "Bash").putObject("input")
        .put("command", "ls");
    ObjectNode result = messages2.addObject().put("role", "user");
    result.putArray("content").addObject().put("type", "tool_result").put("tool_use_id", "toolu_01")
        .put("content", "api\next-proc\nexamples\ne2e");
    messages2.add(text("system", "<system-reminder>Keep answers short.</system-reminder>"));
    ObjectNode turn2 = request(4, messages2);
    turn2.set("tools", turn1.get("tools"));
    long hitsBefore = worker.metric("vllm:prefix_cache_hits_total");
    JsonNode r2 = JSON.readTree(post("/v1/messages", turn2).body());

    int[] p1 = encoder.encodeMessagesPrompt(turn1).tokens();
    int[] p2 = encoder.encodeMessagesPrompt(turn2).tokens();
    JsonNode u1 = r1.path("usage");
    JsonNode u2 = r2.path("usage");
    assertThat(u1.path("input_tokens").asInt() + u1.path("cache_read_input_tokens").asInt()).isEqualTo(p1.length);
    long cached = u2.path("cache_read_input_tokens").asLong();
    assertThat(u2.path("input_tokens").asLong()).isEqualTo(p2.length - cached);
    int common = 0;
    while (common < p1.length && common < p2.length && p1[common] == p2[common]) {
      common++;
    }
    assertThat(common / BS * BS).isGreaterThanOrEqualTo(3 * BS);
    assertThat(cached).isGreaterThanOrEqualTo(common / BS * BS).isLessThan(p2.length);
    assertThat(cached % BS).isZero();
    assertThat(worker.metric("vllm:prefix_cache_hits_total") - hitsBefore).isEqualTo(cached);
  }

  @Test
  void streamedAnswerIsVllmsEventSequenceWithTheFinalUsageInMessageDelta() throws Exception {
    ObjectNode body = request(6, JSON.createArrayNode().add(text("user", "Stream a short plan for the fix.")))
        .put("stream", true);
    HttpResponse<String> r = post("/v1/messages", body);
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.headers().firstValue("content-type").orElse("")).startsWith("text/event-stream");
    List<JsonNode> events = QwenHttpWorker.events(r.body());
    List<String> expected = new ArrayList<>(List.of("message_start", "content_block_start"));
    for (int i = 0; i < 6; i++) {
      expected.add("content_block_delta");
    }
    expected.addAll(List.of("content_block_stop", "message_delta", "message_stop"));
    assertThat(QwenHttpWorker.types(events)).isEqualTo(expected);
    assertThat(r.body()).doesNotContain("[DONE]");

    int prompt = worker.encoder().encodeMessagesPrompt(body).tokens().length;
    JsonNode start = events.get(0).path("message");
    assertThat(start.path("id").asText()).startsWith("chatcmpl-");
    assertThat(start.path("type").asText()).isEqualTo("message");
    assertThat(start.path("role").asText()).isEqualTo("assistant");
    assertThat(start.path("content")).isEmpty();
    assertThat(start.path("stop_reason").isNull()).isTrue();
    // the chat stream's first chunk: the whole prompt as input, nothing generated, no cache fields yet
    assertThat(start.path("usage").path("input_tokens").asInt()).isEqualTo(prompt);
    assertThat(start.path("usage").path("output_tokens").asInt()).isZero();
    assertThat(start.path("usage").has("cache_read_input_tokens")).isFalse();
    assertThat(events.get(1).path("index").asInt()).isZero();
    assertThat(events.get(1).path("content_block").path("type").asText()).isEqualTo("text");
    StringBuilder deltas = new StringBuilder();
    for (JsonNode e : events.subList(2, 8)) {
      assertThat(e.path("delta").path("type").asText()).isEqualTo("text_delta");
      deltas.append(e.path("delta").path("text").asText());
    }
    assertThat(deltas.toString()).isNotBlank();
    JsonNode delta = events.get(9);
    assertThat(delta.path("delta").path("stop_reason").asText()).isEqualTo("max_tokens");
    assertThat(delta.path("delta").has("stop_sequence")).isTrue();
    JsonNode usage = delta.path("usage");
    long cached = usage.path("cache_read_input_tokens").asLong(-1);
    assertThat(cached).isGreaterThanOrEqualTo(0);
    assertThat(usage.path("input_tokens").asLong() + cached).isEqualTo(prompt);
    assertThat(usage.path("output_tokens").asInt()).isEqualTo(6);

    // the router's truth check: message_start first, then message_delta's usage wins
    UsageScanner scanner = QwenHttpWorker.scanned(r.body());
    assertThat(scanner.promptTokens()).isEqualTo(prompt);
    assertThat(scanner.cachedTokens()).isEqualTo(cached);
  }

  /** vLLM's {@code --anthropic-inline-system auto}: the sim places inline system messages as the router's probe says. */
  @Test
  void inlineSystemMessagesArePlacedByTheModelsProbedMode() throws Exception {
    ObjectNode body = request(2, JSON.createArrayNode().add(text("user", "Fix the failing test."))
        .add(text("assistant", "Which one?"))
        .add(text("system", "<system-reminder>The user's test is FooTest.</system-reminder>"))
        .add(text("user", "FooTest.")));
    byte[] bytes = JSON.writeValueAsBytes(body);
    RequestBodyParser parser = new RequestBodyParser();
    for (String name : List.of("qwen3", "deepseek_v3")) {
      PipelinePromptEncoder encoder = worker.encoders.get(name);
      MessagesDialect mode = encoder.resources().messagesDialect();
      MessagesDialect other = mode.withInlineSystem(
          mode.inlineSystem() == InlineSystemMode.FOLD ? InlineSystemMode.PRESERVE : InlineSystemMode.FOLD);
      int[] served = encoder.encodeMessagesPrompt(body).tokens();
      assertThat(served).as(name).isEqualTo(encoder.tokens(
          parser.parse(InferenceRequest.Kind.MESSAGES, bytes, bytes.length, m -> mode)));
      assertThat(served).as(name + ": the mode matters for this body").isNotEqualTo(encoder.tokens(
          parser.parse(InferenceRequest.Kind.MESSAGES, bytes, bytes.length, m -> other)));
    }
    assertThat(worker.encoders.get("deepseek_v3").resources().messagesDialect().inlineSystem())
        .isEqualTo(InlineSystemMode.FOLD);
  }

  @Test
  void whatTheWorkerCannotServeIsRefused() throws Exception {
    ArrayNode hello = JSON.createArrayNode().add(text("user", "hello"));
    // the router's 400s, as vLLM's request model refuses them
    ObjectNode noMessages = request(2, hello);
    noMessages.remove("messages");
    assertThat(post("/v1/messages", noMessages).statusCode()).isEqualTo(400);
    ObjectNode badRole = request(2, JSON.createArrayNode().add(text("robot", "hello")));
    assertThat(post("/v1/messages", badRole).statusCode()).isEqualTo(400);
    assertThat(post("/v1/messages", request(0, hello)).statusCode()).isEqualTo(400);
    // an image: the router does not reproduce its prompt, so the worker does not guess one
    ArrayNode image = JSON.createArrayNode();
    ObjectNode user = image.addObject().put("role", "user");
    user.putArray("content").addObject().put("type", "image").putObject("source").put("type", "url")
        .put("url", "https://example.com/a.png");
    HttpResponse<String> media = post("/v1/messages", request(2, image));
    assertThat(media.statusCode()).isEqualTo(501);
    assertThat(JSON.readTree(media.body()).path("error").path("message").asText()).contains("messages_media");
    // vLLM's handler errors are Anthropic-shaped, its validation errors OpenAI-shaped
    HttpResponse<String> unknown = post("/v1/messages", request(2, hello).put("model", "nope"));
    assertThat(unknown.statusCode()).isEqualTo(404);
    assertThat(JSON.readTree(unknown.body()).path("type").asText()).isEqualTo("error");
    assertThat(JSON.readTree(unknown.body()).path("error").path("message").asText()).contains("nope");
    assertThat(JSON.readTree(unknown.body()).path("error").path("type").asText()).isEqualTo("NotFoundError");
    JsonNode invalid = JSON.readTree(post("/v1/messages", noMessages).body());
    assertThat(invalid.has("type")).isFalse();
    assertThat(invalid.path("error").has("param")).isTrue();
  }

  /**
   * An engine failure is Anthropic-shaped: before the headers vLLM's handler translates the chat handler's error, and
   * once streaming its converter reports an {@code error} event.
   */
  @Test
  void anEngineFailureIsAnAnthropicError() throws Exception {
    ArrayNode hello = JSON.createArrayNode().add(text("user", "Write a long essay about caches."));
    // long enough (4000 decode steps) to be running whatever the machine's load when the engine dies
    CompletableFuture<HttpResponse<String>> plain = worker.postAsync("/v1/messages", request(4000, hello),
        HttpResponse.BodyHandlers.ofString());
    HttpResponse<InputStream> streamed = worker.postAsync("/v1/messages",
        request(4000, hello).put("stream", true), HttpResponse.BodyHandlers.ofInputStream()).get(30, TimeUnit.SECONDS);
    try (BufferedReader in = new BufferedReader(new InputStreamReader(streamed.body(), StandardCharsets.UTF_8))) {
      assertThat(in.readLine()).isEqualTo("event: message_start");
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (worker.metric("vllm:num_requests_running") < 2 && System.nanoTime() < deadline) {
        Thread.sleep(10);
      }
      assertThat(worker.metric("vllm:num_requests_running")).as("both requests run").isEqualTo(2);
      worker.worker().engine().crash(TimeUnit.MILLISECONDS.toNanos(200));
      String last = null;
      String line;
      int lines = 0;
      while ((line = in.readLine()) != null && lines++ < 100_000) {
        if (!line.isEmpty()) {
          last = line;
        }
      }
      assertThat(last).startsWith("data: ");
      JsonNode error = JSON.readTree(last.substring(6));
      assertThat(error.path("type").asText()).isEqualTo("error");
      assertThat(error.path("error").path("type").asText()).isEqualTo("internal_error");
      assertThat(error.path("error").path("message").asText()).isNotBlank();
    }
    HttpResponse<String> r = plain.get(30, TimeUnit.SECONDS);
    assertThat(r.statusCode()).isEqualTo(500);
    JsonNode body = JSON.readTree(r.body());
    assertThat(body.path("type").asText()).isEqualTo("error");
    assertThat(body.path("error").path("message").asText()).isEqualTo("The engine process died.");
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!worker.worker().engine().isUp() && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertThat(worker.worker().engine().isUp()).as("the engine restarted for the other tests").isTrue();
    // checked once the engine is back, so a failure here does not fail the other tests
    assertThat(body.path("error").path("type").asText()).as("vLLM's type for a 500").isEqualTo("internal_error");
  }
}
