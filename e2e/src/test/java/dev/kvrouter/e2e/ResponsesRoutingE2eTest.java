package dev.kvrouter.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.examples.ab.EnvoyAbStack;
import dev.kvrouter.examples.sim.timing.Presets;
import dev.kvrouter.extproc.request.ResponseIds;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * A Responses API conversation through real Envoy to three simulated vLLM workers serving Qwen3 (its real tokenizer
 * and chat template): each turn resends the instructions, every earlier item (the assistant's answers as output
 * messages) and a new user item, without {@code previous_response_id}, as a stateless agent does. The router
 * templates the items as vLLM does (ResponsesInput), so every turn after the first goes to the worker that served
 * the conversation, which serves the earlier turns from its prefix cache; the router reads that worker's
 * {@code usage.input_tokens_details.cached_tokens}, in the response object or in the {@code response.completed}
 * event of a stream, and its truth check finds its prediction within a block of it.
 *
 * <p>Before each next turn the test waits (bounded) until the router applied the blocks the worker stored for the
 * previous one, so the router's view is the worker's cache and its prediction can be exact.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class ResponsesRoutingE2eTest {

  static final String MODEL = "Qwen/Qwen3-8B";
  static final int BS = 16;
  static final String INSTRUCTIONS = "You are the on-call assistant of an inference platform team. Answer questions "
      + "about the serving fleet, its KV cache, routing and capacity, briefly and with concrete numbers where you "
      + "can; say so when you do not know.";
  static final String[] QUESTIONS = {
      "Our p50 time to first token doubled overnight on the chat fleet. Where should I look first?",
      "The prefix cache hit rate on two of the eight workers fell from sixty to ten percent. What could cause that?",
      "Would routing by cache overlap make the hot workers' queues longer? How do we bound it?",
      "Summarise the three checks you would add to the runbook, one line each."};

  RoutedChat chat;

  /**
   * Three Qwen3 workers; truth_check_every 1 (the stack's default), so the streamed turns' usage is read too.
   *
   * @param name names the stack's temporary directory
   */
  static EnvoyAbStack.Options fleet(String name) throws java.io.IOException {
    return new EnvoyAbStack.Options(Stack.ROOT, 3, Presets.byId("qwen3-8b-h100"), MODEL, Stack.tokenizer("qwen3"), BS,
        4096, 13, null, false, "routing: {policy: kv_aware, scrape: {interval_ms: 100}}",
        Files.createTempDirectory("kvrouter-e2e-" + name), 0, null, "", null, null);
  }

  @BeforeAll
  void start() throws Exception {
    chat = RoutedChat.start(fleet("responses"));
  }

  @AfterAll
  void stop() {
    if (chat != null) {
      chat.close();
    }
  }

  /** One turn's answer as the client and the router saw it. */
  record Turn(String worker, String id, String text, int input, int cached, int output, String decisionId) {}

  @Test
  void aStatelessConversationStaysOnItsWorkerWhichServesEachTurnFromCacheAsTheRouterPredicted() throws Exception {
    ArrayNode items = RoutedChat.JSON.createArrayNode();
    String holder = null;
    double withinBefore = chat.truthChecks("within_block");
    for (int t = 0; t < QUESTIONS.length; t++) {
      items.add(user(QUESTIONS[t]));
      boolean stream = t % 2 == 1; // both ways the router reads the usage: the object, and response.completed
      ObjectNode body = RoutedChat.JSON.createObjectNode().put("model", MODEL).put("instructions", INSTRUCTIONS)
          .put("max_output_tokens", 24).put("stream", stream);
      body.set("input", items.deepCopy());
      Map<String, Double> storedBefore = chat.storedBlocks();
      Turn turn = send(body, stream);

      JsonNode decision = chat.records().decision(turn.decisionId());
      // prompt_tokens is not compared: the router stops hashing where no worker holds the prefix and estimates the
      // rest; the truth check below compares what it did hash with the worker's cache
      assertThat(decision.path("prompt_unavailable").isNull()).as("turn %d: the router templated it", t).isTrue();
      assertThat(decision.path("fallback").isNull()).as("turn %d: routed by cache, no fallback", t).isTrue();
      assertThat(ResponseIds.tagOf(turn.id())).as("turn %d: the response id the router minted names its worker", t)
          .isEqualTo(ResponseIds.tag(turn.worker()));
      JsonNode outcome = chat.records().outcome(turn.decisionId());
      assertThat(outcome.path("truth").asText()).as("turn %d: %s", t, outcome).isEqualTo("within_block");
      assertThat(outcome.path("actual_cached_tokens").asInt(-1)).as("turn %d: the worker's usage was read", t)
          .isEqualTo(turn.cached());
      assertThat(outcome.path("reported_prompt_tokens").asInt(-1)).isEqualTo(turn.input());
      if (t == 0) {
        holder = turn.worker();
        assertThat(turn.cached()).isZero();
      } else {
        assertThat(turn.worker()).as("turn %d goes where the conversation is", t).isEqualTo(holder);
        assertThat(turn.cached()).as("turn %d: the earlier turns are served from the worker's cache", t)
            .isGreaterThanOrEqualTo(BS * 4);
        assertThat(outcome.get("predicted_cached_tokens").asInt()).isGreaterThan(0);
      }
      items.add(assistant(turn.text()));
      chat.awaitStores(turn.worker(), turn.input(), turn.cached(), turn.output(), BS, storedBefore);
    }
    assertThat(chat.truthChecks("within_block") - withinBefore).as("every turn's check, in the router's metrics")
        .isEqualTo(QUESTIONS.length);
  }

  Turn send(ObjectNode body, boolean stream) throws Exception {
    HttpResponse<String> r = chat.stack().post("/v1/responses", RoutedChat.JSON.writeValueAsString(body), Map.of());
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    JsonNode response;
    if (stream) {
      response = null;
      for (String frame : r.body().split("\n\n")) {
        if (frame.startsWith("event: response.completed\n")) {
          response = RoutedChat.JSON.readTree(frame.substring(frame.indexOf("data: ") + 6)).get("response");
        }
      }
      assertThat(response).as("a response.completed event in %s", r.body()).isNotNull();
    } else {
      response = RoutedChat.JSON.readTree(r.body());
    }
    JsonNode usage = response.get("usage");
    return new Turn(r.headers().firstValue("x-kvrouter-served-by").orElseThrow(), response.get("id").asText(),
        response.get("output").get(0).get("content").get(0).get("text").asText(), usage.get("input_tokens").asInt(),
        usage.get("input_tokens_details").get("cached_tokens").asInt(), usage.get("output_tokens").asInt(),
        r.headers().firstValue("x-kvrouter-decision").orElseThrow());
  }

  static ObjectNode user(String text) {
    ObjectNode m = RoutedChat.JSON.createObjectNode().put("type", "message").put("role", "user");
    m.putArray("content").addObject().put("type", "input_text").put("text", text);
    return m;
  }

  static ObjectNode assistant(String text) {
    ObjectNode m = RoutedChat.JSON.createObjectNode().put("type", "message").put("role", "assistant").put("status",
        "completed");
    m.putArray("content").addObject().put("type", "output_text").put("text", text);
    return m;
  }
}
