package dev.kvrouter.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.e2e.RoutedChat.Reply;
import dev.kvrouter.examples.ab.EnvoyAbStack;
import dev.kvrouter.examples.ab.RouterMetrics;
import dev.kvrouter.examples.sim.fleet.SimWorker;
import dev.kvrouter.examples.sim.timing.Presets;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * Media requests through real Envoy to three simulated vLLM workers serving Gemma 3 (its real tokenizer and
 * template, {@code multimodal: {preset: gemma3}} in the router's kvrouter.yaml and in the workers), which publish
 * their KV events ({@code BlockStored} with vLLM's {@code [identifier, offset]} extra keys) over ZMQ to the router's
 * index.
 *
 * <p>The router's predicted entries live 1 ms ({@code events.predicted_ttl_ms: 1}), and before each repeat the test
 * waits (bounded) until the worker's stores of the first request were applied and no prediction is left: every
 * overlap the router then credits comes from the worker's events. Each decision is read from the router's decision
 * record ({@code overlap.gpu} = blocks known from events, {@code overlap.predicted} = its own predictions), each
 * cache hit from the worker's {@code usage.prompt_tokens_details.cached_tokens} (the engine's truth).
 *
 * <p>Each test uses its own text, so no other worker holds its pre-image blocks and the tests are independent.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class MultimodalRoutingE2eTest {

  static final String MODEL = "google/gemma-3-4b-it";
  static final int BS = 16;
  static final ObjectMapper JSON = new ObjectMapper();
  static final Duration WAIT = Duration.ofSeconds(30);

  RoutedChat chat;
  EnvoyAbStack stack;

  @BeforeAll
  void start() throws Exception {
    Path gemma = Stack.tokenizer("gemma3");
    Path dir = Files.createTempDirectory("kvrouter-e2e-multimodal");
    chat = RoutedChat.start(new EnvoyAbStack.Options(Stack.ROOT, 3, Presets.byId("llama3.1-8b-h100"), MODEL, gemma,
        BS, 4096, 11, null, false, "routing: {policy: kv_aware, scrape: {interval_ms: 100}}", dir, 0, "gemma3",
        "events: {predicted_ttl_ms: 1}\n", null, null));
    stack = chat.stack();
  }

  @AfterAll
  void stop() {
    if (chat != null) {
      chat.close();
    }
  }

  @Test
  void aRepeatedImageGoesToItsHolderOnTheWorkersEventsAndAnotherImageMatchesOnlyTheTextBeforeIt()
      throws Exception {
    String text = "Please describe the chart below in detail: the axes, the trend of each series, and any annotation "
        + "written on it, then say what the data suggests about the cache hit rate of each worker.";
    Map<String, Double> stored = storedBlocks();
    Reply first = send(image(text, "https://example.com/chart.png", "chart-a"));
    assertThat(first.cached()).isZero();
    int blocks = first.prompt() / BS;
    assertThat(first.prompt()).as("text plus Gemma 3's 260 image tokens").isGreaterThan(260);
    awaitEventsOf(first, stored);

    Reply again = send(image(text, "https://example.com/chart.png", "chart-a"));
    assertThat(again.worker()).as("the repeat goes to the worker that holds the image").isEqualTo(first.worker());
    assertThat(again.cached()).as("the worker serves every block but the one with the last token from cache")
        .isEqualTo((again.prompt() - 1) / BS * BS);
    JsonNode d = again.decision();
    assertThat(d.get("prompt_tokens").asInt()).as("the router reproduced the worker's prompt").isEqualTo(
        again.prompt());
    JsonNode holder = candidate(d, first.worker());
    assertThat(holder.get("overlap").get("gpu").asInt()).as("learned from the worker's events: every block")
        .isEqualTo(blocks);
    assertThat(holder.get("overlap").get("predicted").asInt()).as("no prediction of the router's was left")
        .isZero();
    assertOthersHoldNothing(d, first.worker());

    awaitNoPredictions(); // the repeat's own
    Reply other = send(image(text, "https://example.com/chart.png", "chart-b"));
    int preImage = other.cached() / BS;
    assertThat(other.worker()).as("the text before the image is only on the holder").isEqualTo(first.worker());
    assertThat(preImage).as("another image: the worker hits only the blocks before it").isPositive()
        .isLessThan(blocks);
    JsonNode od = candidate(other.decision(), first.worker()).get("overlap");
    assertThat(od.get("gpu").asInt()).as("the router credits exactly the pre-image blocks").isEqualTo(preImage);
    assertThat(od.get("predicted").asInt()).isZero();
  }

  /**
   * vLLM keys an image sent without a uuid by its own hash of the decoded pixels, which the router cannot compute
   * (it never fetches media; its own identifier for such an item is derived from the URL or bytes). The router
   * learns the engine's identifier from the store of the worker it sent the image to (docs/request-path.md,
   * "Multimodal identity"): once those events are applied and its own prediction has expired, the repeat without a
   * uuid is credited with every block from the worker's events, as a uuid's would be; an image the worker never saw
   * (a uuid of its own) still matches only the blocks before it.
   */
  @Test
  void withoutAUuidTheRouterLearnsTheEnginesIdentifierFromItsStoreAndCreditsTheWholeRepeat() throws Exception {
    String text = "Look at this photograph of a server rack and list every cable colour you can see, from the top "
        + "shelf to the bottom one, and say which of them look unplugged or loose.";
    double learnedBefore = RouterMetrics.sum(stack.routerMetrics(), "kvrouter_index_media_learned_total", "");
    Map<String, Double> stored = storedBlocks();
    Reply first = send(image(text, "https://example.com/rack.png", null));
    assertThat(first.cached()).isZero();
    int blocks = first.prompt() / BS;
    awaitEventsOf(first, stored);
    assertThat(RouterMetrics.sum(stack.routerMetrics(), "kvrouter_index_media_learned_total", "") - learnedBefore)
        .as("the worker's store taught the image's identifier").isEqualTo(1);

    Reply again = send(image(text, "https://example.com/rack.png", null));
    assertThat(again.worker()).isEqualTo(first.worker());
    assertThat(again.cached()).as("the worker's own content hash hits every block but the last")
        .isEqualTo((again.prompt() - 1) / BS * BS);
    JsonNode overlap = candidate(again.decision(), first.worker()).get("overlap");
    assertThat(overlap.get("predicted").asInt()).isZero();
    assertThat(overlap.get("gpu").asInt()).as("learned: every block, from the worker's events").isEqualTo(blocks);
    assertOthersHoldNothing(again.decision(), first.worker());

    // the same text with a uuid image the worker never saw: the engine's count of pre-image blocks
    awaitNoPredictions();
    Reply named = send(image(text, "https://example.com/rack.png", "rack-1"));
    assertThat(named.worker()).isEqualTo(first.worker());
    int preImage = named.cached() / BS;
    assertThat(preImage).isPositive().isLessThan(blocks);
    assertThat(candidate(named.decision(), first.worker()).get("overlap").get("gpu").asInt())
        .as("exactly the blocks before the image").isEqualTo(preImage);
  }

  @Test
  void mediaTheModelCannotTakeIsRoutedByLoadVisiblyAndRefusedByTheWorker() throws Exception {
    double before = RouterMetrics.sum(stack.routerMetrics(), "kvrouter_prompt_unavailable_total",
        "reason=\"multimodal\"");
    ObjectNode root = JSON.createObjectNode().put("model", MODEL).put("max_tokens", 2);
    ArrayNode content = root.putArray("messages").addObject().put("role", "user").putArray("content");
    content.addObject().put("type", "input_audio").putObject("input_audio").put("data", "AAAA").put("format", "wav");
    HttpResponse<String> r = stack.post("/v1/chat/completions", JSON.writeValueAsString(root), Map.of());
    assertThat(r.statusCode()).as(r.body()).isEqualTo(400);
    assertThat(r.body()).contains("does not support audio input");
    assertThat(RouterMetrics.sum(stack.routerMetrics(), "kvrouter_prompt_unavailable_total",
        "reason=\"multimodal\"") - before).isEqualTo(1);
  }

  Reply send(ObjectNode body) throws Exception {
    return chat.send(body);
  }

  /** Blocks the router applied from each worker's {@code BlockStored} events so far. */
  Map<String, Double> storedBlocks() {
    return storedBlocks(stack);
  }

  /** Blocks the router applied from each worker of {@code stack}'s fleet. */
  static Map<String, Double> storedBlocks(EnvoyAbStack stack) {
    String m = stack.routerMetrics();
    assertThat(m).as("router metrics").isNotNull();
    Map<String, Double> out = new HashMap<>();
    for (SimWorker w : stack.fleet().workers()) {
      out.put(w.name(), RouterMetrics.sum(m, "kvrouter_events_blocks_total",
          "op=\"stored\",worker=\"" + w.name() + "\""));
    }
    return out;
  }

  /**
   * Waits until the router applied the stores of every block {@code reply}'s request added on its worker (its full
   * blocks minus those the worker found cached) and no predicted entry is left. Bounded.
   */
  void awaitEventsOf(Reply reply, Map<String, Double> storedBefore) throws Exception {
    int added = reply.prompt() / BS - reply.cached() / BS;
    double target = storedBefore.get(reply.worker()) + added;
    String filter = "op=\"stored\",worker=\"" + reply.worker() + "\"";
    await("the router applies the " + added + " blocks " + reply.worker() + " stored and its predictions expire",
        () -> {
          String m = stack.routerMetrics();
          return m != null && RouterMetrics.sum(m, "kvrouter_events_blocks_total", filter) >= target
              && RouterMetrics.sum(m, "kvrouter_index_predicted_entries", "") == 0;
        });
  }

  void awaitNoPredictions() throws Exception {
    await("the router's predicted entries expire", () -> {
      String m = stack.routerMetrics();
      return m != null && RouterMetrics.sum(m, "kvrouter_index_predicted_entries", "") == 0;
    });
  }

  static JsonNode candidate(JsonNode decision, String worker) {
    return RoutedChat.candidate(decision, worker);
  }

  static void assertOthersHoldNothing(JsonNode decision, String holder) {
    for (JsonNode c : decision.get("candidates")) {
      if (!c.get("worker").asText().equals(holder)) {
        assertThat(c.get("overlap").get("gpu").asInt()).as("%s", c).isZero();
      }
    }
  }

  static ObjectNode image(String text, String url, String uuid) {
    ObjectNode root = JSON.createObjectNode().put("model", MODEL).put("max_tokens", 2);
    ArrayNode content = root.putArray("messages").addObject().put("role", "user").putArray("content");
    content.addObject().put("type", "text").put("text", text);
    ObjectNode part = content.addObject().put("type", "image_url");
    part.putObject("image_url").put("url", url);
    if (uuid != null) {
      part.put("uuid", uuid);
    }
    return root;
  }

  static void await(String what, BooleanSupplier done) throws InterruptedException {
    Await.until(what, WAIT, done);
  }
}
