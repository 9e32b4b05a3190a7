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
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;

/**
 * A worker whose KV events lose a batch, with no replay socket (vLLM's default), through real Envoy and real ZMQ:
 * its view goes stale, and the router credits it as far as the worker's own usage reports confirm it
 * ({@code StaleViewTrust}): a repeated long prompt still goes to the worker that holds it, and a view that lost the
 * worker's cache clear loses its credit at the first request that finds nothing.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class StaleViewE2eTest {

  static final String MODEL = "meta-llama/Llama-3.1-8B-Instruct";
  static final int BS = 16;
  static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

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
  @Order(1)
  void aStaleViewIsCreditedAtHalfThenAsTheWorkersUsageConfirmsIt() throws Exception {
    String doc = longText(0);
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

  /**
   * The worst case for trusting a stale view: the batch the view lost was the worker's cache clear
   * ({@code /reset_prefix_cache}), so it claims a document the worker no longer has. The first request sent there
   * on that claim pays its whole prefill, and its usage report takes the view's credit away.
   */
  @Test
  @Order(2)
  void aStaleViewThatLostACacheClearLosesItsCreditAtTheFirstMiss() throws Exception {
    // a worker whose view is fresh (the first test left its holder stale), given a document directly
    SimWorker w = stack.fleet().workers().stream().filter(x -> RouterMetrics.sum(stack.routerMetrics(),
        "kvrouter_events_stale", "worker=\"" + x.name() + "\"") == 0).findFirst().orElseThrow();
    String doc = longText(1);
    int blocks = direct(w, doc + " Warm-up question: what is it about?") / BS;
    awaitRouter("the worker's events of the document are applied", m ->
        RouterMetrics.sum(m, "kvrouter_index_worker_blocks", "worker=\"" + w.name() + "\"") >= blocks - 1);

    // its cache cleared with that event lost; the next batch (a request sent straight to it) shows the gap
    w.apply(new FaultControl.Update(1.0, null, null, null, null, null));
    HttpResponse<String> reset = HTTP.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + w.httpPort()
        + "/reset_prefix_cache")).POST(HttpRequest.BodyPublishers.noBody()).build(),
        HttpResponse.BodyHandlers.ofString());
    assertThat(reset.statusCode()).as(reset.body()).isEqualTo(200);
    w.apply(new FaultControl.Update(0.0, null, null, null, null, null));
    direct(w, "An unrelated short question about the weather.");
    awaitRouter("the gap leaves the worker's view stale", m ->
        RouterMetrics.sum(m, "kvrouter_events_stale", "worker=\"" + w.name() + "\"") == 1);

    // half credit of a document the worker no longer holds: it gets the request and computes it all
    double checks = truthChecks();
    Reply miss = send(doc + " First question: what is the main point?");
    assertThat(RoutedChat.candidate(miss.decision(), w.name()).get("view_trust").asDouble()).isEqualTo(0.5);
    assertThat(miss.worker()).isEqualTo(w.name());
    assertThat(miss.cached()).as("the cache was cleared").isZero();
    awaitRouter("the miss's outcome is recorded and its prediction expired", m ->
        RouterMetrics.sum(m, "kvrouter_truth_checks_total", "") > checks
            && RouterMetrics.sum(m, "kvrouter_index_predicted_entries", "") == 0);
    // 0.5 of the prior's 64 blocks, decayed, over them plus the ~185 blocks the view claimed and the worker lacked
    assertThat(RouterMetrics.sum(stack.routerMetrics(), "kvrouter_events_stale_view_trust",
        "worker=\"" + w.name() + "\"")).as("refuted at the first long miss").isLessThan(0.15);
    // and until a scrape after it shows the worker idle again: a scrape that still counted the miss running made
    // the worker look busier than the idle other, and the idle relief priced a copy of the twice-asked document
    // there (the request went to the other worker, and nothing confirmed the view)
    double scrapes = RouterMetrics.sum(stack.routerMetrics(), "kvrouter_scrapes_total", "outcome=\"ok\"");
    awaitRouter("a round of scrapes after the miss, nothing in flight", m ->
        RouterMetrics.sum(m, "kvrouter_scrapes_total", "outcome=\"ok\"") >= scrapes + 2 * stack.fleet().workers().size()
            && RouterMetrics.sum(m, "kvrouter_ledger_requests", "") == 0);
    Reply after = send(doc + " Second question: who would disagree?");
    assertThat(after.worker()).as("the worker whose view the miss refuted, as it holds the document again")
        .isEqualTo(w.name());
    assertThat(RoutedChat.candidate(after.decision(), w.name()).get("view_trust").asDouble()).isLessThan(0.15);

    // the miss computed the document again, so the view is right again, and the next report says so
    awaitRouter("the view earns credit back", m -> RouterMetrics.sum(m, "kvrouter_events_stale_view_trust",
        "worker=\"" + w.name() + "\"") > 0.4);
    assertThat(after.cached()).isGreaterThan(miss.prompt() * 9 / 10);
  }

  /** About 3,000 tokens of distinct words: long enough that its blocks dominate the cost. */
  static String longText(int variant) {
    StringBuilder b = new StringBuilder("Read report " + variant + " and answer the question after it.\n");
    for (int i = 0; i < 600; i++) {
      b.append("item ").append((i + variant * 1000) * 7919 % 10007).append(" grows ");
    }
    return b.toString();
  }

  /** A chat request sent straight to {@code w}, not through Envoy (the router never sees it); its prompt tokens. */
  int direct(SimWorker w, String text) throws Exception {
    ObjectNode root = RoutedChat.JSON.createObjectNode().put("model", MODEL).put("max_tokens", 2);
    root.putArray("messages").addObject().put("role", "user").put("content", text);
    HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + w.httpPort()
        + "/v1/chat/completions")).header("content-type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(RoutedChat.JSON.writeValueAsString(root))).build(),
        HttpResponse.BodyHandlers.ofString());
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    return RoutedChat.JSON.readTree(r.body()).get("usage").get("prompt_tokens").asInt();
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
