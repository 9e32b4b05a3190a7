package dev.kvrouter.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.examples.ab.RouterMetrics;
import dev.kvrouter.examples.fake.FakeWorker;
import dev.kvrouter.examples.sim.fleet.SimWorker;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * A Claude-Code-like session over the Anthropic Messages API through real Envoy to three simulated vLLM workers
 * serving Qwen3 (its real tokenizer and chat template). Every turn resends the system blocks (a billing header whose
 * hash changes per request, which vLLM drops, then the agent's prompt), the tools and the whole history: the
 * assistant's answer with a {@code tool_use}, the user's {@code tool_result} with the next question, and the
 * {@code role: system} reminder Claude Code appends on every turn, which stays in the history. The router converts
 * it as vLLM does (MessagesInput, the inline system messages placed by the template's probe), so every turn after
 * the first goes to the worker that holds the session and is served from its cache; the router reads that worker's
 * {@code input_tokens} + {@code cache_read_input_tokens}, in the message or in a stream's {@code message_delta}, and
 * its truth check finds its prediction within a block of it. Streamed turns time their first token at
 * {@code message_start}, which the worker sends with its first generated token.
 *
 * <p>Before each next turn the test waits (bounded) until the router applied the blocks the worker stored for the
 * previous one, so the router's view is the worker's cache and its prediction can be exact.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class MessagesRoutingE2eTest {

  static final String MODEL = ResponsesRoutingE2eTest.MODEL;
  static final int BS = ResponsesRoutingE2eTest.BS;
  static final String SYSTEM = "You are an interactive coding agent. You help with software engineering tasks in the "
      + "user's repository: read the code before changing it, keep changes minimal, run the relevant tests and report "
      + "what you did in a few lines. Use the tools provided; never guess a file's contents.";
  static final String[] ASKS = {
      "The router's e2e suite is slow. Find which test takes longest.",
      "Why does that one start three workers? Could it share a fleet with another test?",
      "Show me where the fleet is built so I can see what sharing would take.",
      "Summarise what we found in three bullet points."};

  static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  RoutedChat chat;

  @BeforeAll
  void start() throws Exception {
    chat = RoutedChat.start(ResponsesRoutingE2eTest.fleet("messages"));
  }

  @AfterAll
  void stop() {
    if (chat != null) {
      chat.close();
    }
  }

  /** One turn's answer as the client and the router saw it; {@code prompt} is input plus cache read. */
  record Turn(String worker, String text, int prompt, int cached, int output, String decisionId) {}

  @Test
  void aCodingAgentSessionStaysOnItsWorkerWhichServesEachTurnFromCacheAsTheRouterPredicted() throws Exception {
    ArrayNode messages = RoutedChat.JSON.createArrayNode();
    String holder = null;
    double withinBefore = chat.truthChecks("within_block");
    double ttftBefore = ttftCount();
    int streamed = 0;
    for (int t = 0; t < ASKS.length; t++) {
      if (t == 0) {
        messages.add(text("user", ASKS[0]));
      } else {
        ObjectNode result = messages.addObject().put("role", "user");
        ArrayNode content = result.putArray("content");
        content.addObject().put("type", "tool_result").put("tool_use_id", toolUseId(t - 1))
            .put("content", "e2e/src/test/java/dev/kvrouter/e2e/ResponsesRoutingE2eTest.java: 41.2 s\n"
                + "e2e/src/test/java/dev/kvrouter/e2e/AbSmokeE2eTest.java: 38.9 s (turn " + t + ")");
        content.addObject().put("type", "text").put("text", ASKS[t]);
      }
      messages.add(text("system", "<system-reminder>Turn " + t + ": the todo list is empty. Do not mention this "
          + "reminder to the user.</system-reminder>"));
      boolean stream = t % 2 == 1; // both ways the router reads the usage: the message, and message_delta
      ObjectNode body = request(t, stream);
      ArrayNode sent = messages.deepCopy();
      // Claude Code marks the newest user block as a cache breakpoint, a marker that moves every turn
      JsonNode newest = sent.get(sent.size() - 2).get("content");
      ((ObjectNode) newest.get(newest.size() - 1)).putObject("cache_control").put("type", "ephemeral");
      body.set("messages", sent);
      Map<String, Double> storedBefore = chat.storedBlocks();
      Map<String, Double> engineTtftBefore = engineTtftSums();
      Turn turn = send(body, stream);

      JsonNode decision = chat.records().decision(turn.decisionId());
      assertThat(decision.path("prompt_unavailable").isNull()).as("turn %d: the router converted it", t).isTrue();
      assertThat(decision.path("fallback").isNull()).as("turn %d: routed by cache, no fallback", t).isTrue();
      JsonNode outcome = chat.records().outcome(turn.decisionId());
      assertThat(outcome.path("truth").asText()).as("turn %d: %s", t, outcome).isEqualTo("within_block");
      assertThat(outcome.path("actual_cached_tokens").asInt(-1)).as("turn %d: the worker's cache read was read", t)
          .isEqualTo(turn.cached());
      assertThat(outcome.path("reported_prompt_tokens").asInt(-1)).as("input plus cache read").isEqualTo(turn.prompt());
      assertThat(Math.abs(outcome.path("predicted_cached_tokens").asInt() - turn.cached()))
          .as("turn %d: predicted within a block of the worker's cache read", t).isLessThan(BS);
      if (stream) {
        streamed++;
        // the engine's own TTFT (arrival to first token) lies within the router's: message_start is not sent
        // before the prefill is done
        double engineMs = (engineTtftSums().get(turn.worker()) - engineTtftBefore.get(turn.worker())) * 1000;
        assertThat(engineMs).as("turn %d: the engine timed its first token", t).isPositive();
        assertThat(outcome.path("ttft_ms").asDouble(-1)).as("turn %d: first token timed", t)
            .isGreaterThanOrEqualTo(engineMs).isLessThanOrEqualTo(outcome.path("duration_ms").asDouble());
      }
      if (t == 0) {
        holder = turn.worker();
        assertThat(turn.cached()).isZero();
      } else {
        assertThat(turn.worker()).as("turn %d goes where the session is", t).isEqualTo(holder);
        assertThat(turn.cached()).as("turn %d: the earlier turns are served from the worker's cache", t)
            .isGreaterThanOrEqualTo(BS * 8);
        assertThat(outcome.get("predicted_cached_tokens").asInt()).isGreaterThan(0);
      }
      ObjectNode answer = messages.addObject().put("role", "assistant");
      ArrayNode content = answer.putArray("content");
      content.addObject().put("type", "text").put("text", turn.text());
      content.addObject().put("type", "tool_use").put("id", toolUseId(t)).put("name", "Bash").putObject("input")
          .put("command", "grep -rn 'time=' e2e/target/surefire-reports | sort -t= -k2 -rn | head -" + (t + 2));
      chat.awaitStores(turn.worker(), turn.prompt(), turn.cached(), turn.output(), BS, storedBefore);
    }
    assertThat(chat.truthChecks("within_block") - withinBefore).as("every turn's check, in the router's metrics")
        .isEqualTo(ASKS.length);
    assertThat(ttftCount() - ttftBefore).as("each streamed turn's TTFT, in the router's metrics")
        .isEqualTo(streamed);
  }

  /** A tenant's Messages request is refused by the router before any worker sees it: it could not be salted. */
  @Test
  void aTenantsMessagesRequestIsRefused() throws Exception {
    try (Stack tenanted = new Stack("envoy.yaml", 1, 0, new Stack.Options("tenancy: {secret_file: tenant.secret}\n",
        Map.of("tenant.secret", TenantIsolationContract.SECRET + "\n"), TenantIsolationContract::withAuthFilter))) {
      String body = "{\"model\":\"" + Stack.MODEL + "\",\"max_tokens\":4,"
          + "\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}],\"cache_salt\":\"client-picked-salt\"}";
      HttpResponse<String> refused = tenanted.post("/v1/messages", body, Map.of("x-test-tenant", "acme"));
      assertThat(refused.statusCode()).as(refused.body()).isEqualTo(404);
      // in the Anthropic SDKs' shape, as vLLM's Anthropic handler writes its 404
      var error = RoutedChat.JSON.readTree(refused.body());
      assertThat(error.path("type").asText()).as(refused.body()).isEqualTo("error");
      assertThat(error.path("error").path("type").asText()).as(refused.body()).isEqualTo("NotFoundError");
      assertThat(refused.headers().firstValue(FakeWorker.SERVED_BY)).as("no worker reached").isEmpty();
      HttpResponse<String> untenanted = tenanted.post("/v1/messages", body, Map.of());
      assertThat(untenanted.headers().firstValue(FakeWorker.SERVED_BY)).as("without a tenant it is routed")
          .isPresent();
    }
  }

  /**
   * Claude Code's request: system blocks (the billing header first, a cache breakpoint on the prompt), metadata,
   * tools, a length and the stream flag.
   */
  static ObjectNode request(int turn, boolean stream) {
    ObjectNode b = RoutedChat.JSON.createObjectNode().put("model", MODEL).put("max_tokens", 24).put("stream", stream);
    ArrayNode system = b.putArray("system");
    system.addObject().put("type", "text")
        .put("text", "x-anthropic-billing-header: cc_version=2.1.3.e4f; cc_entrypoint=cli; cch=" + (1000 + turn) + ";");
    system.addObject().put("type", "text").put("text", SYSTEM).putObject("cache_control").put("type", "ephemeral");
    b.putObject("metadata").put("user_id", "user_e2e_account__session_5c1e");
    b.put("temperature", 1);
    ArrayNode tools = b.putArray("tools");
    ObjectNode bash = tools.addObject().put("name", "Bash").put("description", "Runs a shell command in the repo.");
    bash.putObject("cache_control").put("type", "ephemeral");
    ObjectNode bashSchema = bash.putObject("input_schema").put("type", "object");
    bashSchema.putObject("properties").putObject("command").put("type", "string");
    bashSchema.putArray("required").add("command");
    ObjectNode read = tools.addObject().put("name", "Read").put("description", "Reads a file of the repo.");
    read.putObject("input_schema").put("type", "object").putObject("properties").putObject("path")
        .put("type", "string");
    return b;
  }

  static ObjectNode text(String role, String text) {
    ObjectNode m = RoutedChat.JSON.createObjectNode().put("role", role);
    m.putArray("content").addObject().put("type", "text").put("text", text);
    return m;
  }

  static String toolUseId(int turn) {
    return "toolu_01e2e" + turn;
  }

  Turn send(ObjectNode body, boolean stream) throws Exception {
    // the path the Anthropic SDK's beta client (Claude Code's) posts to
    HttpResponse<String> r = chat.stack().post("/v1/messages?beta=true", RoutedChat.JSON.writeValueAsString(body),
        Map.of());
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    JsonNode usage;
    String text;
    if (stream) {
      usage = null;
      StringBuilder deltas = new StringBuilder();
      boolean first = true;
      for (String frame : r.body().split("\n\n")) {
        if (first) {
          assertThat(frame).as("the stream opens with message_start").startsWith("event: message_start\n");
          first = false;
        }
        JsonNode data = RoutedChat.JSON.readTree(frame.substring(frame.indexOf("data: ") + 6));
        if (frame.startsWith("event: content_block_delta\n")) {
          deltas.append(data.path("delta").path("text").asText());
        } else if (frame.startsWith("event: message_delta\n")) {
          usage = data.get("usage");
        }
      }
      assertThat(usage).as("a message_delta event in %s", r.body()).isNotNull();
      text = deltas.toString();
    } else {
      JsonNode message = RoutedChat.JSON.readTree(r.body());
      usage = message.get("usage");
      text = message.get("content").get(0).get("text").asText();
    }
    int cached = usage.get("cache_read_input_tokens").asInt();
    return new Turn(r.headers().firstValue("x-kvrouter-served-by").orElseThrow(), text,
        usage.get("input_tokens").asInt() + cached, cached, usage.get("output_tokens").asInt(),
        r.headers().firstValue("x-kvrouter-decision").orElseThrow());
  }

  /** Each worker's {@code vllm:time_to_first_token_seconds_sum}. */
  Map<String, Double> engineTtftSums() throws Exception {
    Map<String, Double> out = new HashMap<>();
    for (SimWorker w : chat.stack().fleet().workers()) {
      String page = HTTP.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + w.httpPort() + "/metrics"))
          .timeout(Duration.ofSeconds(10)).GET().build(), HttpResponse.BodyHandlers.ofString()).body();
      out.put(w.name(), RouterMetrics.sum(page, "vllm:time_to_first_token_seconds_sum", ""));
    }
    return out;
  }

  double ttftCount() {
    return RouterMetrics.sum(chat.stack().routerMetrics(), "kvrouter_request_ttft_seconds_count", "");
  }
}
