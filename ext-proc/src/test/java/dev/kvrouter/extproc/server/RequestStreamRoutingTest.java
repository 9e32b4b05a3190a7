package dev.kvrouter.extproc.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import dev.kvrouter.extproc.routing.Decision;
import dev.kvrouter.extproc.routing.Router;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProtocolConfiguration;
import io.grpc.stub.StreamObserver;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The routing headers the stream passes in (trusted overrides) and out (data-parallel rank). */
class RequestStreamRoutingTest {

  final List<ProcessingResponse> sent = new ArrayList<>();
  final List<Decision> decisions = new ArrayList<>();

  static Router router(List<Worker> fleet) {
    WorkerRegistry registry = new WorkerRegistry();
    registry.replace(fleet);
    return Router.builder(registry).build();
  }

  RequestStream stream(List<Worker> fleet) {
    Router router = router(fleet);
    StreamObserver<ProcessingResponse> out = RequestStreamTest.collecting(sent);
    RequestListener l = new RequestListener() {
      @Override
      public void onDecision(Decision d) {
        decisions.add(d);
      }
    };
    ExtProcOptions o = ExtProcOptions.defaults();
    return new RequestStream(out, RequestPath.of(router, l), new ExtProcOptions(o.bind(), 0, 1 << 20, o.tenantHeader(),
        BodySendMode.BUFFERED, BodySendMode.STREAMED, 1, 1, 1 << 20, 1), Runnable::run,
        new InFlight(100, java.time.Duration.ofMinutes(1)));
  }

  static ProcessingRequest headers(Map<String, String> extra) {
    HeaderMap.Builder h = HeaderMap.newBuilder();
    Map<String, String> all = new java.util.LinkedHashMap<>(Map.of(":method", "POST", ":path", "/v1/completions"));
    all.putAll(extra);
    all.forEach((k, v) -> h.addHeaders(HeaderValue.newBuilder().setKey(k).setRawValue(ByteString.copyFromUtf8(v))));
    return ProcessingRequest.newBuilder()
        .setProtocolConfig(ProtocolConfiguration.newBuilder().setRequestBodyMode(BodySendMode.BUFFERED)
            .setResponseBodyMode(BodySendMode.STREAMED))
        .setRequestHeaders(HttpHeaders.newBuilder().setHeaders(h)).build();
  }

  static ProcessingRequest body(String s) {
    return ProcessingRequest.newBuilder().setRequestBody(io.envoyproxy.envoy.service.ext_proc.v3.HttpBody
        .newBuilder().setBody(ByteString.copyFromUtf8(s)).setEndOfStream(true)).build();
  }

  static Map<String, String> setHeaders(ProcessingResponse r) {
    Map<String, String> m = new java.util.HashMap<>();
    r.getRequestBody().getResponse().getHeaderMutation().getSetHeadersList()
        .forEach(h -> m.put(h.getHeader().getKey(), h.getHeader().getRawValue().toStringUtf8()));
    return m;
  }

  static final String BODY = "{\"model\":\"m\",\"prompt\":\"" + "x".repeat(400) + "\"}";

  @Test
  void trustedOverrideHeadersReachTheRouter() {
    RequestStream s = stream(List.of(Worker.simple("a", "10.0.0.1", 8000, "m")));
    s.onNext(headers(Map.of("x-kvrouter-policy", "least_load", "x-kvrouter-weights", "gpu_credit=nope")));
    s.onNext(body(BODY));
    Decision d = decisions.get(0);
    assertThat(d.policy()).isEqualTo("least_load");
    assertThat(d.fallback()).isEqualTo("invalid_weights_override,no_tokenization");
    // without tokens the body size stands in for the prompt length in the load reservation
    assertThat(d.detail().promptTokens()).isEqualTo(BODY.length() / 4);
  }

  /**
   * Envoy's default route spreads over every model's workers, so in a fleet of two models a request the router does
   * not route (/tokenize, /v1/messages/count_tokens, /v1/embeddings) reached the other model's worker half the time
   * and got its 404. Its body's model now picks that model's pool; a model no worker serves, a body without one, and
   * one that is not JSON keep the default route. A large body is read on a routing thread, as routing is.
   */
  @Test
  void aRequestTheRouterDoesNotRouteGoesToThePoolOfItsModel() {
    List<Worker> fleet = List.of(Worker.simple("a", "10.0.0.1", 8000, "m"),
        Worker.simple("b", "10.0.0.2", 8000, "Org/Other_Model"));
    String pad = "\"messages\":[{\"role\":\"user\",\"content\":\"" + "x".repeat(2000) + "\"}],";
    Map<String, String> cases = new java.util.LinkedHashMap<>();
    cases.put("{" + pad + "\"model\":\"Org/Other_Model\"}", "kvrouter_pool_org_other_model_");
    cases.put("{\"model\":\"m\",\"prompt\":\"hi\"}", "kvrouter_pool_m");
    cases.put("{\"model\":\"nobody-serves-it\"}", null);
    cases.put("{\"prompt\":\"hi\"}", null);
    cases.put("not json", null);
    for (Map.Entry<String, String> c : cases.entrySet()) {
      for (int inline : new int[] {1 << 20, 16}) {
        sent.clear();
        List<Runnable> queued = new ArrayList<>();
        ExtProcOptions o = ExtProcOptions.defaults();
        RequestStream s = new RequestStream(RequestStreamTest.collecting(sent), RequestPath.of(router(fleet), null),
            new ExtProcOptions(o.bind(), 0, 1 << 20, o.tenantHeader(), BodySendMode.BUFFERED, BodySendMode.STREAMED,
                1, 1, inline, 1), queued::add, new InFlight(100, java.time.Duration.ofMinutes(1)));
        s.onNext(headers(Map.of(":path", "/v1/messages/count_tokens")));
        s.onNext(body(c.getKey()));
        assertThat(queued).as("read off the event loop past the inline bound: %s", c.getKey())
            .hasSize(c.getKey().length() > inline ? 1 : 0);
        queued.forEach(Runnable::run);
        assertThat(sent).hasSize(2);
        assertThat(sent.get(0).hasRequestHeaders()).isTrue();
        assertThat(sent.get(1).hasRequestBody()).isTrue();
        String cluster = setHeaders(sent.get(1)).get("x-kvrouter-cluster");
        if (c.getValue() == null) {
          assertThat(cluster).as(c.getKey()).isNull();
          assertThat(sent.get(1).getRequestBody().getResponse().getClearRouteCache()).isFalse();
        } else {
          assertThat(cluster).as(c.getKey()).startsWith(c.getValue())
              .isEqualTo(dev.kvrouter.xds.server.ClusterSnapshots.poolCluster(c.getValue().endsWith("_")
                  ? "Org/Other_Model" : "m"));
          assertThat(sent.get(1).getRequestBody().getResponse().getClearRouteCache()).isTrue();
        }
      }
    }
    assertThat(decisions).isEmpty();
  }

  /**
   * The same with FULL_DUPLEX_STREAMED bodies (envoy-original-dst.yaml): only the request-headers answer can set the
   * route's header there, and it went back at once, so such a request always took the default route. The headers
   * are now held until the body has ended (two chunks here), then sent with the pool, then the body, then the
   * trailers; a body the router may not hold (over limits.max_body_bytes) goes on at once, unrefused.
   */
  @Test
  void aFullDuplexRequestTheRouterDoesNotRouteWaitsForItsBodyToNameItsPool() {
    List<Worker> fleet = List.of(Worker.simple("a", "10.0.0.1", 8000, "m"),
        Worker.simple("b", "10.0.0.2", 8000, "other"));
    String body = "{\"model\":\"other\",\"input\":\"" + "x".repeat(3000) + "\"}";
    for (int inline : new int[] {1 << 20, 16}) {
      sent.clear();
      List<Runnable> queued = new ArrayList<>();
      RequestStream s = fullDuplex(fleet, 1 << 20, inline, queued);
      s.onNext(headers(Map.of(":path", "/v1/embeddings")).toBuilder().clearProtocolConfig().build());
      s.onNext(chunk(body.substring(0, 100), false));
      assertThat(sent).as("headers held for the body's model").isEmpty();
      s.onNext(chunk(body.substring(100), false));
      s.onNext(ProcessingRequest.newBuilder().setRequestTrailers(
          io.envoyproxy.envoy.service.ext_proc.v3.HttpTrailers.getDefaultInstance()).build());
      assertThat(queued).hasSize(inline < body.length() ? 1 : 0);
      queued.forEach(Runnable::run);
      assertThat(sent).hasSize(3);
      var headers = sent.get(0).getRequestHeaders().getResponse();
      assertThat(headers.getClearRouteCache()).isTrue();
      assertThat(headers.getHeaderMutation().getSetHeadersList()).singleElement()
          .satisfies(h -> assertThat(h.getHeader().getKey()).isEqualTo("x-kvrouter-cluster"))
          .satisfies(h -> assertThat(h.getHeader().getRawValue().toStringUtf8())
              .isEqualTo(dev.kvrouter.xds.server.ClusterSnapshots.poolCluster("other")));
      var streamed = sent.get(1).getRequestBody().getResponse().getBodyMutation().getStreamedResponse();
      assertThat(streamed.getBody().toStringUtf8()).isEqualTo(body);
      assertThat(streamed.getEndOfStream()).isFalse();
      assertThat(sent.get(2).hasRequestTrailers()).isTrue();
    }
    // over the body limit: the headers go on as they are, then what was held, then the rest as it comes
    sent.clear();
    RequestStream s = fullDuplex(fleet, 1024, 1 << 20, new ArrayList<>());
    s.onNext(headers(Map.of(":path", "/tokenize")).toBuilder().clearProtocolConfig().build());
    s.onNext(chunk(body.substring(0, 1000), false));
    s.onNext(chunk(body.substring(1000), true));
    assertThat(sent).hasSize(3);
    assertThat(sent.get(0).getRequestHeaders().getResponse().hasHeaderMutation()).isFalse();
    StringBuilder forwarded = new StringBuilder();
    sent.subList(1, 3).forEach(r -> forwarded.append(
        r.getRequestBody().getResponse().getBodyMutation().getStreamedResponse().getBody().toStringUtf8()));
    assertThat(forwarded.toString()).isEqualTo(body);
    assertThat(sent.get(2).getRequestBody().getResponse().getBodyMutation().getStreamedResponse().getEndOfStream())
        .isTrue();
    assertThat(decisions).isEmpty();
  }

  private RequestStream fullDuplex(List<Worker> fleet, int maxBody, int inline, List<Runnable> queued) {
    ExtProcOptions o = ExtProcOptions.defaults();
    return new RequestStream(RequestStreamTest.collecting(sent), RequestPath.of(router(fleet), null),
        new ExtProcOptions(o.bind(), 0, maxBody, o.tenantHeader(), BodySendMode.FULL_DUPLEX_STREAMED,
            BodySendMode.STREAMED, 1, 1, inline, 1), queued::add, new InFlight(100, java.time.Duration.ofMinutes(1)));
  }

  static ProcessingRequest chunk(String s, boolean end) {
    return ProcessingRequest.newBuilder().setRequestBody(io.envoyproxy.envoy.service.ext_proc.v3.HttpBody
        .newBuilder().setBody(ByteString.copyFromUtf8(s)).setEndOfStream(end)).build();
  }

  @Test
  void aDataParallelWorkerGetsItsRankHeader() {
    Worker dp = new Worker("dp", "10.0.0.9", 8000, "m", List.of(), Worker.Role.BOTH, null, 4, 16, 1, null, false,
        Map.of());
    RequestStream s = stream(List.of(dp));
    s.onNext(headers(Map.of()));
    s.onNext(body(BODY));
    Map<String, String> set = setHeaders(sent.get(1));
    assertThat(set).containsEntry("x-data-parallel-rank", Integer.toString(decisions.get(0).dpRank()));
    assertThat(decisions.get(0).dpRank()).isBetween(0, 3);
    // a single-rank worker gets no rank header
    sent.clear();
    decisions.clear();
    RequestStream one = stream(List.of(Worker.simple("a", "10.0.0.1", 8000, "m")));
    one.onNext(headers(Map.of()));
    one.onNext(body(BODY));
    assertThat(setHeaders(sent.get(1))).doesNotContainKey("x-data-parallel-rank");
  }
}
