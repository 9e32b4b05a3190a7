package dev.kvrouter.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.fake.FakeWorker;
import dev.kvrouter.extproc.server.InFlight;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestReporter;

/**
 * The skeleton's contract with Envoy, run once per shipped Envoy config (cluster-header routing with BUFFERED
 * bodies and state-of-the-world ADS; ORIGINAL_DST with FULL_DUPLEX_STREAMED bodies and delta ADS) against a
 * real Envoy process, the xDS server, the ext_proc router and three fake workers.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class RoutingContract {

  static final ObjectMapper JSON = new ObjectMapper();
  Stack stack;

  abstract String envoyConfig();

  @BeforeAll
  void startStack() throws Exception {
    // HTTP/1.1 request trailers reach the filters only when the connection manager is told to keep them (the
    // shipped configs leave that to the mesh); on for aRequestWithTrailersIsRoutedWithoutWaiting.
    stack = new Stack(envoyConfig(), 3, 40, new Stack.Options("", Map.of(), y -> y.replace(
        "          stat_prefix: inference\n",
        "          stat_prefix: inference\n          http_protocol_options: {enable_trailers: true}\n")));
    System.out.println("[e2e] " + getClass().getSimpleName() + " started real Envoy " + stack.envoyVersion
        + " from " + Stack.ROOT.resolve("envoy-config").resolve(envoyConfig()));
  }

  @AfterAll
  void stopStack() {
    if (stack != null) {
      stack.close();
    }
  }

  @Test
  void reportsTheEnvoyVersionItStarted(TestReporter reporter) {
    reporter.publishEntry("envoy.version", stack.envoyVersion);
    reporter.publishEntry("envoy.config", envoyConfig());
    assertThat(stack.envoyVersion).matches("\\d+\\.\\d+\\.\\d+");
  }

  @Test
  void eachRequestLandsOnTheWorkerTheRouterChose() throws Exception {
    Map<String, Integer> perWorker = new HashMap<>();
    for (int i = 0; i < 6; i++) {
      String body = i % 2 == 0 ? Stack.completion("p" + i, false, 3) : Stack.chat("c" + i, false, 3);
      String path = i % 2 == 0 ? "/v1/completions" : "/v1/chat/completions";
      HttpResponse<String> r = stack.post(path, body, Map.of());
      assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
      String served = r.headers().firstValue(FakeWorker.SERVED_BY).orElseThrow();
      FakeWorker w = stack.workers.get(served);
      JsonNode seen = w.lastHeaders();
      // The worker that answered is the one the router named, in both destination headers it sent upstream.
      assertThat(seen.path("x-kvrouter-cluster").asText()).isEqualTo("kvrouter_worker_" + served);
      assertThat(seen.path("x-gateway-destination-endpoint").asText()).isEqualTo("127.0.0.1:" + w.port());
      String decision = r.headers().firstValue("x-kvrouter-decision").orElseThrow();
      assertThat(seen.path("x-kvrouter-decision").asText()).isEqualTo(decision);
      perWorker.merge(served, 1, Integer::sum);
    }
    // round robin in the skeleton: every worker took exactly two
    assertThat(perWorker).containsOnlyKeys("w1", "w2", "w3").allSatisfy((k, v) -> assertThat(v).isEqualTo(2));
  }

  /**
   * The Responses API: vLLM keeps a stored response on the server that produced it, so a request continuing it
   * ({@code previous_response_id}) must reach that worker. The router writes each response's id (vLLM answers with the
   * request's {@code request_id}) so that it names the worker; round robin would spread the continuations.
   */
  @Test
  void aResponsesConversationStaysOnTheWorkerThatStoredIt() throws Exception {
    HttpResponse<String> first = stack.post("/v1/responses", "{\"model\":\"" + Stack.MODEL + "\",\"input\":\"hi\"}",
        Map.of());
    assertThat(first.statusCode()).as(first.body()).isEqualTo(200);
    String holder = first.headers().firstValue(FakeWorker.SERVED_BY).orElseThrow();
    String id = JSON.readTree(first.body()).path("id").asText();
    assertThat(id).matches("resp_[0-9a-f]{32}");
    for (int i = 0; i < 4; i++) {
      HttpResponse<String> next = stack.post("/v1/responses", "{\"model\":\"" + Stack.MODEL + "\",\"input\":\"turn "
          + i + "\",\"previous_response_id\":\"" + id + "\"}", Map.of());
      assertThat(next.statusCode()).as(next.body()).isEqualTo(200);
      assertThat(next.headers().firstValue(FakeWorker.SERVED_BY)).as("turn %d", i).hasValue(holder);
      id = JSON.readTree(next.body()).path("id").asText();
    }
    // retrieving it, or cancelling it, goes there too (FakeWorker stores nothing: it answers 404, from the holder)
    for (int i = 0; i < 3; i++) {
      HttpResponse<String> get = stack.get("/v1/responses/" + id);
      assertThat(get.headers().firstValue(FakeWorker.SERVED_BY)).as("GET %d", i).hasValue(holder);
      HttpResponse<String> cancel = stack.post("/v1/responses/" + id + "/cancel", "", Map.of());
      assertThat(cancel.headers().firstValue(FakeWorker.SERVED_BY)).as("cancel %d", i).hasValue(holder);
    }
  }

  @Test
  void clientSuppliedDestinationHeadersAreIgnored() throws Exception {
    Map<String, Integer> perWorker = new HashMap<>();
    for (int i = 0; i < 6; i++) {
      HttpResponse<String> r = stack.post("/v1/completions", Stack.completion("x" + i, false, 2), Map.of(
          "x-kvrouter-cluster", "kvrouter_worker_w3",
          "x-gateway-destination-endpoint", "127.0.0.1:" + stack.workers.get("w3").port(),
          "x-kvrouter-decision", "forged"));
      assertThat(r.statusCode()).isEqualTo(200);
      String served = r.headers().firstValue(FakeWorker.SERVED_BY).orElseThrow();
      assertThat(r.headers().firstValue("x-kvrouter-decision").orElseThrow()).isNotEqualTo("forged");
      perWorker.merge(served, 1, Integer::sum);
    }
    assertThat(perWorker).containsOnlyKeys("w1", "w2", "w3");
  }

  @Test
  void streamingResponseArrivesChunkByChunk() throws Exception {
    for (boolean chat : new boolean[] {false, true}) {
      HttpRequest req = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + stack.listenerPort
              + (chat ? "/v1/chat/completions" : "/v1/completions")))
          .timeout(Duration.ofSeconds(20))
          .header("content-type", "application/json")
          .POST(HttpRequest.BodyPublishers.ofString(chat ? Stack.chat("s", true, 8) : Stack.completion("s", true, 8)))
          .build();
      long start = System.nanoTime();
      HttpResponse<InputStream> r = stack.http.send(req, HttpResponse.BodyHandlers.ofInputStream());
      assertThat(r.statusCode()).isEqualTo(200);
      assertThat(r.headers().firstValue("content-type").orElse("")).startsWith("text/event-stream");
      List<Long> arrivals = new ArrayList<>();
      List<String> events = new ArrayList<>();
      try (BufferedReader in = new BufferedReader(new InputStreamReader(r.body(), StandardCharsets.UTF_8))) {
        String line;
        while ((line = in.readLine()) != null) {
          if (line.startsWith("data: ")) {
            arrivals.add((System.nanoTime() - start) / 1_000_000);
            events.add(line.substring(6));
          }
        }
      }
      assertThat(events).hasSize(10).endsWith("[DONE]"); // 8 tokens, the usage chunk, [DONE]
      // The worker pauses 40 ms between tokens: if Envoy or the router buffered the response, every event would
      // arrive at once at the end.
      assertThat(arrivals.get(7) - arrivals.get(0)).as("arrival ms %s", arrivals).isGreaterThanOrEqualTo(200);
      assertThat(JSON.readTree(events.get(8)).path("usage").path("completion_tokens").asInt()).isEqualTo(8);
    }
  }

  @Test
  void responsesAreFollowedByTheObserverNotHeldByTheRouter() throws Exception {
    var inFlight = stack.runtime.extProc().inFlight();
    // An earlier test's last response may still be on its way to the observer: start from a quiet router, or
    // that late claim counts as one of ours.
    long quiet = System.nanoTime() + java.time.Duration.ofSeconds(5).toNanos();
    while (inFlight.pending() > 0 && System.nanoTime() < quiet) {
      Thread.sleep(10);
    }
    assertThat(inFlight.pending()).as("decisions of earlier tests still unclaimed").isZero();
    long before = inFlight.claimed();
    for (int i = 0; i < 4; i++) {
      assertThat(stack.post("/v1/completions", Stack.completion("o" + i, i % 2 == 0, 3), Map.of()).statusCode())
          .isEqualTo(200);
    }
    // Every routed request is claimed by its response observer. Envoy does not wait for an observability-mode
    // stream, so the last claim may land just after the client has its response: wait for it, bounded.
    long deadline = System.nanoTime() + java.time.Duration.ofSeconds(5).toNanos();
    while (inFlight.claimed() - before < 4 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertThat(inFlight.claimed() - before).isEqualTo(4);
    assertThat(inFlight.unclaimed()).isZero();
  }

  @Test
  void streamedResponsesAreLeftAfterTheirFirstChunkAndEndWhenTheExchangeDoes() throws Exception {
    // The product default (truth_check_every 16) reads one streamed response's usage in 16, by decision number:
    // of three in a row at least two are left after their first chunk. The observer may leave only while the
    // routing stream is open, which the shipped configs keep until the exchange is over (response trailers).
    InFlight inFlight = stack.runtime.extProc().inFlight();
    long left = inFlight.left();
    long messages = inFlight.observerMessages();
    for (int i = 0; i < 3; i++) {
      HttpResponse<String> r = stack.post("/v1/completions", Stack.completion("s" + i, true, 20), Map.of());
      assertThat(r.statusCode()).isEqualTo(200);
      assertThat(r.body()).endsWith("data: [DONE]\n\n");
    }
    Await.until("released when Envoy closed the routing streams", Duration.ofSeconds(10),
        () -> stack.runtime.ledger().liveReservations() == 0);
    assertThat(stack.runtime.ledger().expired()).isZero();
    assertThat(inFlight.left() - left).isGreaterThanOrEqualTo(2);
    // a left response costs its headers, first chunk and what Envoy sent before it saw the close; a followed
    // one every chunk (20 tokens, the usage chunk and [DONE])
    assertThat(inFlight.observerMessages() - messages).isLessThan(2 * 8 + 25);
  }

  @Test
  void aRequestWithTrailersIsRoutedWithoutWaiting() throws Exception {
    // A chunked body followed by trailers: Envoy's BUFFERED mode sends the whole body without end_of_stream and
    // holds the trailers until the body is answered (and never sends them under request_trailer_mode SKIP).
    // Waiting for either stalled the request until message_timeout (2 s), after which it went unrouted.
    String body = Stack.completion("with trailers", false, 3);
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    String request = "POST /v1/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        + "transfer-encoding: chunked\r\ntrailer: x-client-checksum\r\nconnection: close\r\n\r\n"
        + Integer.toHexString(bytes.length) + "\r\n" + body + "\r\n0\r\nx-client-checksum: 1\r\n\r\n";
    long start = System.nanoTime();
    String response;
    try (java.net.Socket s = new java.net.Socket("127.0.0.1", stack.listenerPort)) {
      s.setSoTimeout(10_000);
      s.getOutputStream().write(request.getBytes(StandardCharsets.UTF_8));
      s.getOutputStream().flush();
      response = new String(s.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    }
    long ms = (System.nanoTime() - start) / 1_000_000;
    assertThat(response).as(response).startsWith("HTTP/1.1 200");
    String lower = response.toLowerCase(java.util.Locale.ROOT);
    // Had the router waited for an end of stream, Envoy would have given up after message_timeout (2 s) and
    // sent the request to the pool without a decision.
    assertThat(lower).as("routed by the router, not failed open to the pool (%d ms)", ms)
        .contains("x-kvrouter-decision: ");
    String served = lower.replaceAll("(?s).*" + FakeWorker.SERVED_BY.toLowerCase(java.util.Locale.ROOT)
        + ": (\\S+).*", "$1");
    assertThat(stack.workers.get(served).lastHeaders().path("x-kvrouter-cluster").asText())
        .isEqualTo("kvrouter_worker_" + served);
  }

  @Test
  void requestsInFlightWithOneRequestIdAreEachRoutedAndReleased() throws Exception {
    // Envoy keeps a client's x-request-id (no use_remote_address), so a retrying client can have two requests
    // with one id in flight at once. Each must keep its own decision, or one is never ended and its reservation
    // stays load until the ledger's expiry.
    InFlight inFlight = stack.runtime.extProc().inFlight();
    long reused = inFlight.reusedIds();
    long expired = stack.runtime.ledger().expired();
    var pool = java.util.concurrent.Executors.newFixedThreadPool(2);
    try {
      List<java.util.concurrent.Future<HttpResponse<String>>> sent = new ArrayList<>();
      for (int i = 0; i < 2; i++) {
        int n = i;
        // Not streamed: a decision waits for its observer until the response starts, which for a real engine is
        // the end of the generation (held 600 ms here), so the first is still waiting when the second is routed.
        sent.add(pool.submit(() -> stack.post("/v1/completions", Stack.completion("same id " + n, false, 12),
            Map.of("x-request-id", "client-reused-id", FakeWorker.HOLD_HEADER, "600"))));
        Thread.sleep(100);
      }
      List<String> decisions = new ArrayList<>();
      for (var f : sent) {
        HttpResponse<String> r = f.get(20, java.util.concurrent.TimeUnit.SECONDS);
        assertThat(r.statusCode()).isEqualTo(200);
        assertThat(JSON.readTree(r.body()).path("usage").path("completion_tokens").asInt()).isEqualTo(12);
        decisions.add(r.headers().firstValue("x-kvrouter-decision").orElseThrow());
      }
      assertThat(decisions).doesNotHaveDuplicates().contains("client-reused-id");
      assertThat(inFlight.reusedIds() - reused).isEqualTo(1);
    } finally {
      pool.shutdownNow();
    }
    Await.until("both requests released", Duration.ofSeconds(10),
        () -> stack.runtime.ledger().liveReservations() == 0);
    assertThat(stack.runtime.ledger().expired()).isEqualTo(expired);
  }

  @Test
  void nonInferencePathsPassThroughToThePool() throws Exception {
    HttpResponse<String> models = stack.get("/v1/models");
    assertThat(models.statusCode()).isEqualTo(200);
    assertThat(JSON.readTree(models.body()).path("data").get(0).path("id").asText()).isEqualTo(Stack.MODEL);
    assertThat(models.headers().firstValue("x-kvrouter-decision")).isEmpty();
    assertThat(stack.get("/health").statusCode()).isEqualTo(200);
  }

  @Test
  void malformedBodyGetsAnOpenAiStyleError() throws Exception {
    HttpResponse<String> r = stack.post("/v1/completions", "{\"model\": \"test/model\", \"prompt\": ", Map.of());
    assertThat(r.statusCode()).isEqualTo(400);
    assertThat(r.headers().firstValue("content-type").orElse("")).startsWith("application/json");
    JsonNode err = JSON.readTree(r.body()).path("error");
    assertThat(err.path("type").asText()).isEqualTo("invalid_request_error");
    assertThat(err.path("message").asText()).contains("not valid JSON");
    assertThat(r.headers().firstValue("x-kvrouter-decision")).isPresent();
    for (FakeWorker w : stack.workers.values()) {
      assertThat(w.lastHeaders() == null || !w.lastHeaders().toString().contains("\"prompt\": ")).isTrue();
    }
  }

  @Test
  void missingAndUnknownModelsAreAnsweredByTheRouter() throws Exception {
    HttpResponse<String> missing = stack.post("/v1/completions", "{\"prompt\":\"hi\"}", Map.of());
    assertThat(missing.statusCode()).isEqualTo(400);
    assertThat(JSON.readTree(missing.body()).path("error").path("param").asText()).isEqualTo("model");
    HttpResponse<String> unknown = stack.post("/v1/completions",
        "{\"model\":\"no/such-model\",\"prompt\":\"hi\"}", Map.of());
    assertThat(unknown.statusCode()).isEqualTo(404);
    assertThat(JSON.readTree(unknown.body()).path("error").path("code").asText()).isEqualTo("model_not_found");
  }
}
