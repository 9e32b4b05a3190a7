package dev.kvrouter.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.examples.fake.FakeWorker;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The routing policy's bookkeeping through real Envoy with the product default ({@code kv_aware}; no index yet,
 * so it balances on load and says so): reservations follow each response (routing stream, then the response
 * observer) and return to zero after completions and cancellations; a worker busy with a long stream is
 * avoided; every request leaves a decision, an outcome and a truth check in the metrics. The router here reads
 * no streamed response's usage ({@code truth_check_every: 0}): the observer leaves every streamed response after
 * its first chunk, and the routing stream's close ends it.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class LoadAccountingE2eTest {

  Stack stack;

  @BeforeAll
  void start() throws Exception {
    stack = new Stack("envoy.yaml", 3, 25, "routing: {policy: kv_aware, scrape: {interval_ms: 100}}",
        Stack.Options.NONE.withTruthCheckEvery(0));
  }

  @AfterAll
  void stop() {
    if (stack != null) {
      stack.close();
    }
  }

  static void await(String what, BooleanSupplier condition) throws InterruptedException {
    Await.until(what, Duration.ofSeconds(10), condition);
  }

  long[] totals() {
    return stack.runtime.ledger().totals();
  }

  String metrics() throws Exception {
    return stack.routerMetrics();
  }

  static double sample(String metrics, String prefix) {
    return metrics.lines().filter(l -> l.startsWith(prefix)).mapToDouble(l -> Double.parseDouble(
        l.substring(l.lastIndexOf(' ') + 1))).sum();
  }

  HttpResponse<InputStream> openStream(int tokens) throws Exception {
    HttpRequest req = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + stack.listenerPort + "/v1/completions"))
        .timeout(Duration.ofSeconds(20)).header("content-type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(Stack.completion("long story", true, tokens))).build();
    return stack.http.send(req, HttpResponse.BodyHandlers.ofInputStream());
  }

  @Test
  void reservationsReturnToZeroAfterCompletionsAndCancellations() throws Exception {
    for (int i = 0; i < 6; i++) {
      HttpResponse<String> r = stack.post(i % 2 == 0 ? "/v1/completions" : "/v1/chat/completions",
          i % 2 == 0 ? Stack.completion("p" + i, i % 3 == 0, 4) : Stack.chat("c" + i, i % 3 == 0, 4), Map.of());
      assertThat(r.statusCode()).isEqualTo(200);
    }
    // a client that reads one chunk of a long stream and hangs up
    HttpResponse<InputStream> cancelled = openStream(200);
    assertThat(cancelled.body().read(new byte[16])).isPositive();
    assertThat(totals()[2]).as("the long stream is in flight").isEqualTo(1);
    cancelled.body().close();
    await("every reservation released", () -> stack.runtime.ledger().liveReservations() == 0);
    assertThat(totals()).containsExactly(0, 0, 0, 0, 0);
    assertThat(stack.runtime.ledger().expired()).isZero();
  }

  @Test
  void aWorkerBusyWithALongStreamIsAvoided() throws Exception {
    HttpResponse<InputStream> longOne = openStream(120); // 3 s of tokens
    String busy = longOne.headers().firstValue(FakeWorker.SERVED_BY).orElseThrow();
    assertThat(longOne.body().read(new byte[16])).isPositive();
    for (int i = 0; i < 4; i++) {
      HttpResponse<String> r = stack.post("/v1/completions", Stack.completion("short" + i, false, 2), Map.of());
      assertThat(r.headers().firstValue(FakeWorker.SERVED_BY).orElseThrow()).as("request %d", i).isNotEqualTo(busy);
    }
    longOne.body().close();
    await("every reservation released", () -> stack.runtime.ledger().liveReservations() == 0);
  }

  @Test
  void everyDecisionIsCountedWithItsFallbackAndTruthCheck() throws Exception {
    for (int i = 0; i < 3; i++) {
      assertThat(stack.post("/v1/completions", Stack.completion("m" + i, i == 0, 3), Map.of()).statusCode())
          .isEqualTo(200);
    }
    await("outcomes recorded", () -> stack.runtime.ledger().liveReservations() == 0);
    String m = metrics();
    // no tokenizer yet: kv_aware balances on load and says why, on every decision
    assertThat(sample(m, "kvrouter_routing_decisions_total{fallback=\"no_tokenization\",policy=\"kv_aware\","
        + "reason=\"load_only\"")).isGreaterThanOrEqualTo(3);
    assertThat(sample(m, "kvrouter_routing_fallbacks_total{fallback=\"no_tokenization\"")).isGreaterThanOrEqualTo(3);
    // the fake workers report cached_tokens 0 and the router predicted 0: the picture is right; the streamed
    // response was left after its first chunk, its usage unread
    assertThat(sample(m, "kvrouter_truth_checks_total{outcome=\"within_block\"")).isGreaterThanOrEqualTo(2);
    assertThat(sample(m, "kvrouter_truth_checks_total{outcome=\"skipped\"")).isGreaterThanOrEqualTo(1);
    assertThat(sample(m, "kvrouter_truth_checks_total{outcome=\"over\"")).isZero();
    assertThat(sample(m, "kvrouter_routing_decision_seconds_count")).isGreaterThanOrEqualTo(3);
    assertThat(sample(m, "kvrouter_ledger_reservations")).isZero();
    // the fake workers expose no metrics: reached (healthy), scraped as "no_metrics"
    assertThat(sample(m, "kvrouter_scrapes_total{outcome=\"no_metrics\"")).isPositive();
    assertThat(sample(m, "kvrouter_worker_healthy{")).isEqualTo(3);
  }

  @Test
  void aStreamedResponseIsLeftAfterItsFirstChunkAndEndsWhenTheExchangeDoes() throws Exception {
    String before = metrics();
    HttpResponse<InputStream> r = openStream(40); // 40 tokens 25 ms apart
    try (InputStream in = r.body()) {
      assertThat(in.read(new byte[16])).isPositive();
      await("the observer left after the first chunk", () -> delta(before, "kvrouter_observer_left_total") == 1);
      assertThat(stack.runtime.ledger().liveReservations()).as("the response still streams").isEqualTo(1);
      String rest = new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
      assertThat(rest).endsWith("data: [DONE]\n\n");
    }
    await("released when Envoy closed the routing stream", () -> stack.runtime.ledger().liveReservations() == 0);
    assertThat(stack.runtime.ledger().expired()).as("not by expiry").isZero();
    // response headers, the first chunk and what Envoy had sent before it saw the close: not one per token
    assertThat(delta(before, "kvrouter_observer_messages_total")).isBetween(2.0, 10.0);
    assertThat(delta(before, "kvrouter_truth_checks_total{outcome=\"skipped\"")).isEqualTo(1.0);
    assertThat(delta(before, "kvrouter_request_ttft_seconds_count")).as("the first token was seen").isEqualTo(1.0);
  }

  double delta(String before, String prefix) {
    try {
      return sample(metrics(), prefix) - sample(before, prefix);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }
}
