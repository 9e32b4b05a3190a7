package dev.kvrouter.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.e2e.RoutedChat.Reply;
import dev.kvrouter.examples.ab.EnvoyAbStack;
import dev.kvrouter.examples.ab.RouterMetrics;
import dev.kvrouter.examples.sim.fleet.SimWorker;
import dev.kvrouter.examples.sim.http.FaultControl;
import dev.kvrouter.examples.sim.timing.Presets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * A worker whose KV events lose a batch, with no replay socket (vLLM's default), through real Envoy and real ZMQ:
 * its view goes stale, and the router credits it as far as the worker's own usage reports confirm it
 * ({@code StaleViewTrust}), so a repeated long prompt still goes to the worker that holds it.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class StaleViewE2eTest {

  static final String MODEL = "meta-llama/Llama-3.1-8B-Instruct";
  static final int BS = 16;

  RoutedChat chat;
  EnvoyAbStack stack;

  @BeforeAll
  void start() throws Exception {
    Path dir = Files.createTempDirectory("kvrouter-e2e-stale");
    // predicted entries gone at once, so only the event view can place the prompt; no recovery by quiet period;
    // the product's truth_check_every (16): non-streamed responses are read anyway
    chat = RoutedChat.start(new EnvoyAbStack.Options(Stack.ROOT, 2, Presets.byId("llama3.1-8b-h100"), MODEL,
        Stack.tokenizer("llama3_1"), BS, 4096, 3, null, false, "routing: {policy: kv_aware}", dir, 0, null,
        "events: {predicted_ttl_ms: 1, stale_recovery_ms: 600000}\n", null, 16, false));
    stack = chat.stack();
  }

  @AfterAll
  void stop() {
    if (chat != null) {
      chat.close();
    }
  }

  @Test
  void aStaleViewIsCreditedAtHalfThenAsTheWorkersUsageConfirmsIt() throws Exception {
    String doc = longText();
    Reply first = send(doc + " First question: what is the main point?");
    assertThat(first.cached()).isZero();
    SimWorker holder = worker(first.worker());
    awaitRouter("the holder's events are applied and the prediction expired", m ->
        RouterMetrics.sum(m, "kvrouter_index_worker_blocks", "worker=\"" + holder.name() + "\"")
            >= first.prompt() / BS - 1 && RouterMetrics.sum(m, "kvrouter_index_predicted_entries", "") == 0);

    // one batch lost: the holder computes a new question's blocks with every batch dropped, then publishes again
    holder.apply(new FaultControl.Update(1.0, null, null, null, null, null));
    Reply lost = send(doc + " Second question: who would disagree with it, and why?");
    assertThat(lost.worker()).isEqualTo(holder.name());
    holder.apply(new FaultControl.Update(0.0, null, null, null, null, null));
    Reply gap = send(doc + " Third question: which example supports it best?");
    assertThat(gap.worker()).isEqualTo(holder.name());
    awaitRouter("the sequence gap leaves the holder's view stale (no replay socket)", m ->
        RouterMetrics.sum(m, "kvrouter_events_stale", "worker=\"" + holder.name() + "\"") == 1
            && RouterMetrics.sum(m, "kvrouter_index_predicted_entries", "") == 0);

    // the gap reset the evidence: half credit of the holder's whole view still beats a cold worker
    double checks = truthChecks();
    Reply half = send(doc + " Fourth question: summarise it in one line.");
    JsonNode h = RoutedChat.candidate(half.decision(), holder.name());
    assertThat(h.get("stale").asBoolean()).isTrue();
    assertThat(h.get("view_trust").asDouble()).isEqualTo(0.5);
    assertThat(half.decision().get("fallback").asText()).contains("stale_events");
    assertThat(half.worker()).as("half credit of the held document").isEqualTo(holder.name());
    assertThat(half.cached()).as("the worker did hold it").isGreaterThan(first.prompt() * 9 / 10);

    // that response's cached_tokens, read through Envoy's response observer, confirmed the view
    awaitRouter("the fourth request's outcome is recorded and its prediction expired", m ->
        RouterMetrics.sum(m, "kvrouter_truth_checks_total", "") > checks
            && RouterMetrics.sum(m, "kvrouter_index_predicted_entries", "") == 0);
    Reply confirmed = send(doc + " Fifth question: what would you ask the author?");
    double trust = RoutedChat.candidate(confirmed.decision(), holder.name()).get("view_trust")
        .asDouble();
    assertThat(trust).as("confirmed by the worker's own report").isGreaterThan(0.8);
    assertThat(RouterMetrics.sum(stack.routerMetrics(), "kvrouter_events_stale_view_trust",
        "worker=\"" + holder.name() + "\"")).as("exported as well").isGreaterThan(0.8);
    assertThat(confirmed.worker()).isEqualTo(holder.name());
    JsonNode credited = RoutedChat.candidate(confirmed.decision(), holder.name());
    assertThat(credited.get("credit_blocks").asDouble()).isGreaterThan(0.8 * credited.get("overlap").get("gpu")
        .asInt());
  }

  /** About 3,000 tokens of distinct words: long enough that its blocks dominate the cost. */
  static String longText() {
    StringBuilder b = new StringBuilder("Read the following report and answer the question after it.\n");
    for (int i = 0; i < 600; i++) {
      b.append("item ").append(i * 7919 % 10007).append(" grows ");
    }
    return b.toString();
  }

  double truthChecks() {
    return RouterMetrics.sum(stack.routerMetrics(), "kvrouter_truth_checks_total", "");
  }

  SimWorker worker(String name) {
    return stack.fleet().workers().stream().filter(w -> w.name().equals(name)).findFirst().orElseThrow();
  }

  void awaitRouter(String what, java.util.function.Predicate<String> metrics) throws InterruptedException {
    Await.until(what, RoutedChat.WAIT, () -> {
      String m = stack.routerMetrics();
      return m != null && metrics.test(m);
    });
  }

  Reply send(String text) throws Exception {
    ObjectNode root = RoutedChat.JSON.createObjectNode().put("model", MODEL).put("max_tokens", 2);
    root.putArray("messages").addObject().put("role", "user").put("content", text);
    return chat.send(root);
  }
}
