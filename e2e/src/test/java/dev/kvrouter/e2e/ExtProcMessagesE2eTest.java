package dev.kvrouter.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The ext_proc messages one request costs through real Envoy with each shipped config, as the router counts them
 * ({@code kvrouter_ext_proc_messages_total}, {@code kvrouter_ext_proc_metadata_parsed_bytes_total}): the gRPC
 * transport is about a third of the router's CPU through Envoy, so a config or code change that adds messages per
 * request fails here. One request of each kind: a non-streamed chat, a streamed chat the observer leaves after its
 * first token, and one it follows to its usage (the truth check's sample: every second decision here).
 */
class ExtProcMessagesE2eTest {

  static final int TOKENS = 6;

  @ParameterizedTest
  @ValueSource(strings = {"envoy.yaml", "envoy-original-dst.yaml"})
  void messagesPerRequest(String config) throws Exception {
    boolean fullDuplex = config.contains("original-dst");
    // tokens 100 ms apart: Envoy sees the observer's close long before the second token
    try (Stack stack = new Stack(config, 1, 100, "routing: {policy: round_robin}",
        Stack.Options.NONE.withTruthCheckEvery(2))) {
      // until Envoy's health check has seen the router: before that requests bypass it (fail-open)
      for (int i = 0; oneRequest(stack, false).metadata(OBSERVER) == 0; i++) {
        assertThat(i).as("requests before one was routed").isLessThan(50);
        Thread.sleep(100);
      }
      Delta plain = oneRequest(stack, false);
      Delta a = oneRequest(stack, true);
      Delta b = oneRequest(stack, true);
      Delta left = a.get("kvrouter_observer_left_total") == 1 ? a : b;
      Delta followed = left == a ? b : a;
      assertThat(followed.get("kvrouter_observer_left_total")).as("decisions alternate: one left, one followed")
          .isZero();

      for (Delta d : new Delta[] {plain, left, followed}) {
        // the routing stream: request headers, then the body (FULL_DUPLEX: as it arrived, the last chunk possibly
        // an empty end of stream), one answer each; no response trailers (OpenAI responses carry none)
        assertThat(d.get(ROUTING, "received", "request_headers")).isEqualTo(1);
        if (fullDuplex) {
          assertThat(d.get(ROUTING, "received", "request_body")).isBetween(1.0, 2.0);
        } else {
          assertThat(d.get(ROUTING, "received", "request_body")).isEqualTo(1);
        }
        assertThat(d.get(ROUTING, "sent", "request_headers")).isEqualTo(1);
        assertThat(d.get(ROUTING, "sent", "request_body")).isEqualTo(1);
        assertThat(d.sum(ROUTING, "received")).as("routing, received").isEqualTo(
            1 + d.get(ROUTING, "received", "request_body"));
        assertThat(d.sum(ROUTING, "sent")).as("routing, sent").isEqualTo(2);
        // the observer: response headers and body chunks, never an answer (observability_mode)
        assertThat(d.get(OBSERVER, "received", "response_headers")).isEqualTo(1);
        assertThat(d.sum(OBSERVER, "sent")).isZero();
        assertThat(d.metadata(ROUTING)).as("the routing filter forwards no metadata").isZero();
      }
      // a non-streamed body arrives as one chunk and its end
      assertThat(plain.sum(OBSERVER, "received")).isEqualTo(1 + 2);
      // left after the first token: the rest of the response never reaches the router
      assertThat(left.sum(OBSERVER, "received")).isEqualTo(1 + 1);
      // followed: one message per token, the usage chunk and [DONE]
      assertThat(followed.sum(OBSERVER, "received")).isEqualTo(1 + TOKENS + 2);
      // Envoy forwards the routing filter's envoy.lb metadata on every observer message; the router parses it on
      // the first only, where the observer claims its decision
      assertThat(left.metadata(OBSERVER)).isPositive();
      assertThat(plain.metadata(OBSERVER)).isEqualTo(left.metadata(OBSERVER));
      assertThat(followed.metadata(OBSERVER)).isEqualTo(left.metadata(OBSERVER));
    }
  }

  static final String ROUTING = "routing";
  static final String OBSERVER = "observer";

  /** What one request moved in the router's counters. */
  record Delta(Map<String, Double> values) {
    double get(String name) {
      return values.getOrDefault(name, 0.0);
    }

    double get(String stream, String direction, String kind) {
      return get("kvrouter_ext_proc_messages_total{direction=\"" + direction + "\",kind=\"" + kind
          + "\",stream=\"" + stream + "\"}");
    }

    double sum(String stream, String direction) {
      return values.entrySet().stream().filter(e -> e.getKey().startsWith("kvrouter_ext_proc_messages_total{")
              && e.getKey().contains("direction=\"" + direction + "\"")
              && e.getKey().contains("stream=\"" + stream + "\""))
          .mapToDouble(Map.Entry::getValue).sum();
    }

    double metadata(String stream) {
      return get("kvrouter_ext_proc_metadata_parsed_bytes_total{stream=\"" + stream + "\"}");
    }
  }

  /** The router's counters moved by one chat request, once both its streams are over. */
  static Delta oneRequest(Stack stack, boolean stream) throws Exception {
    Map<String, Double> before = counters(stack.routerMetrics());
    HttpRequest req = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + stack.listenerPort
            + "/v1/chat/completions")).timeout(Duration.ofSeconds(20)).header("content-type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(Stack.chat("count the messages", stream, TOKENS))).build();
    HttpResponse<InputStream> r = stack.http.send(req, HttpResponse.BodyHandlers.ofInputStream());
    assertThat(r.statusCode()).isEqualTo(200);
    try (InputStream in = r.body()) {
      in.readAllBytes();
    }
    Await.until("the request's end", Duration.ofSeconds(10),
        () -> stack.runtime.ledger().liveReservations() == 0);
    // the streams close after the exchange: a message Envoy sent late is what this test is about
    Thread.sleep(300);
    Map<String, Double> after = counters(stack.routerMetrics());
    Map<String, Double> delta = new TreeMap<>();
    after.forEach((k, v) -> delta.put(k, v - before.getOrDefault(k, 0.0)));
    return new Delta(delta);
  }

  static Map<String, Double> counters(String metrics) {
    Map<String, Double> m = new TreeMap<>();
    metrics.lines().filter(l -> l.startsWith("kvrouter_ext_proc_messages_total{")
            || l.startsWith("kvrouter_ext_proc_metadata_parsed_bytes_total{")
            || l.startsWith("kvrouter_observer_left_total"))
        .forEach(l -> m.put(l.substring(0, l.lastIndexOf(' ')),
            Double.parseDouble(l.substring(l.lastIndexOf(' ') + 1))));
    return m;
  }
}
