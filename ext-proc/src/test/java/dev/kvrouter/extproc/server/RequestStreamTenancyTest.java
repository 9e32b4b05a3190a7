package dev.kvrouter.extproc.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import dev.kvrouter.extproc.model.ModelRegistry;
import dev.kvrouter.extproc.request.RequestPreparer;
import dev.kvrouter.extproc.routing.Decision;
import dev.kvrouter.extproc.routing.RoundRobinPolicy;
import dev.kvrouter.extproc.routing.Router;
import dev.kvrouter.extproc.tenancy.TenantIsolation;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProtocolConfiguration;
import io.grpc.stub.StreamObserver;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The cache-salt rewrite through the ext_proc protocol, in both request body modes. */
class RequestStreamTenancyTest {

  final List<ProcessingResponse> sent = new ArrayList<>();
  final List<Decision> decisions = new ArrayList<>();
  final TenantIsolation tenancy = TenantIsolation.defaults();
  Router router;
  RequestPreparer preparer;
  WorkerRegistry registry;

  final StreamObserver<ProcessingResponse> out = RequestStreamTest.collecting(sent);

  @BeforeEach
  void fleet() {
    registry = new WorkerRegistry();
    registry.replace(List.of(Worker.simple("a", "10.0.0.1", 8000, "m")));
    router = new Router(registry, new RoundRobinPolicy(), Map.of(), System::nanoTime);
    preparer = new RequestPreparer(ModelRegistry.empty(new SimpleMeterRegistry()), tenancy, System::nanoTime);
  }

  RequestStream stream(BodySendMode mode) {
    ExtProcOptions o = ExtProcOptions.defaults();
    o = new ExtProcOptions(o.bind(), 0, 1 << 22, "x-tenant-id", mode, BodySendMode.STREAMED, 1, 1, 1 << 22, 1);
    return new RequestStream(out, new RequestPath(preparer, null, router, new RequestListener() {
      @Override
      public void onDecision(Decision d) {
        decisions.add(d);
      }
    }), o, Runnable::run, new InFlight(100, java.time.Duration.ofMinutes(1)));
  }

  static ProcessingRequest headers(BodySendMode mode, String tenant) {
    return headers(mode, "POST", "/v1/chat/completions", tenant);
  }

  static ProcessingRequest headers(BodySendMode mode, String method, String path, String tenant) {
    HeaderMap.Builder h = HeaderMap.newBuilder();
    List<String[]> kvs = new ArrayList<>(List.of(new String[] {":method", method},
        new String[] {":path", path}, new String[] {"x-request-id", "r1"}));
    if (tenant != null) {
      kvs.add(new String[] {"x-tenant-id", tenant});
    }
    for (String[] kv : kvs) {
      h.addHeaders(HeaderValue.newBuilder().setKey(kv[0]).setRawValue(ByteString.copyFromUtf8(kv[1])));
    }
    return ProcessingRequest.newBuilder()
        .setProtocolConfig(ProtocolConfiguration.newBuilder().setRequestBodyMode(mode)
            .setResponseBodyMode(mode == BodySendMode.FULL_DUPLEX_STREAMED ? mode : BodySendMode.STREAMED))
        .setRequestHeaders(HttpHeaders.newBuilder().setHeaders(h))
        .build();
  }

  static ProcessingRequest body(String s) {
    return ProcessingRequest.newBuilder()
        .setRequestBody(HttpBody.newBuilder().setBody(ByteString.copyFromUtf8(s)).setEndOfStream(true)).build();
  }

  static final String BODY = "{ \"model\" : \"m\",\n \"messages\":[{\"role\":\"user\",\"content\":\"ünïcode\"}],"
      + "\"cache_salt\": \"client\" , \"stream\":false}";

  static Map<String, String> setHeaders(CommonResponse c) {
    return c.getHeaderMutation().getSetHeadersList().stream().collect(Collectors.toMap(h -> h.getHeader().getKey(),
        h -> h.getHeader().getRawValue().toStringUtf8()));
  }

  @Test
  void bufferedModeSendsTheRewrittenBodyWithAMatchingContentLength() {
    RequestStream s = stream(BodySendMode.BUFFERED);
    s.onNext(headers(BodySendMode.BUFFERED, "acme"));
    s.onNext(body(BODY));
    CommonResponse c = sent.get(1).getRequestBody().getResponse();
    String salt = tenancy.effectiveSalt(null, "acme", "client");
    String expected = BODY.replace("\"client\"", "\"" + salt + "\"");
    assertThat(c.getBodyMutation().getBody().toStringUtf8()).isEqualTo(expected);
    assertThat(setHeaders(c)).containsEntry("content-length",
        Integer.toString(expected.getBytes(StandardCharsets.UTF_8).length))
        .containsEntry("x-kvrouter-cluster", "kvrouter_worker_a");
    assertThat(c.getClearRouteCache()).isTrue();
    assertThat(decisions.get(0).detail().tenantHash()).isEqualTo(tenancy.tenantHash("acme"));
    assertThat(decisions.get(0).toString()).doesNotContain("acme");
  }

  @Test
  void fullDuplexModeReStreamsTheRewrittenBytes() {
    String big = BODY.replace("ünïcode", "x".repeat(150_000));
    RequestStream s = stream(BodySendMode.FULL_DUPLEX_STREAMED);
    s.onNext(headers(BodySendMode.FULL_DUPLEX_STREAMED, "globex"));
    s.onNext(body(big));
    assertThat(sent.get(0).hasRequestHeaders()).isTrue();
    assertThat(setHeaders(sent.get(0).getRequestHeaders().getResponse())).doesNotContainKey("content-length");
    StringBuilder rebuilt = new StringBuilder();
    for (ProcessingResponse r : sent.subList(1, sent.size())) {
      rebuilt.append(r.getRequestBody().getResponse().getBodyMutation().getStreamedResponse().getBody()
          .toStringUtf8());
    }
    assertThat(sent).hasSize(4); // headers + three chunks of at most 62,000 bytes
    assertThat(rebuilt.toString())
        .isEqualTo(big.replace("\"client\"", "\"" + tenancy.effectiveSalt(null, "globex", "client") + "\""));
  }

  @Test
  void withoutTenantOrSaltTheBodyIsNotTouched() {
    RequestStream s = stream(BodySendMode.BUFFERED);
    s.onNext(headers(BodySendMode.BUFFERED, null));
    s.onNext(body("{\"model\":\"m\",\"messages\":[]}"));
    CommonResponse c = sent.get(1).getRequestBody().getResponse();
    assertThat(c.hasBodyMutation()).isFalse();
    assertThat(setHeaders(c)).doesNotContainKey("content-length");
    assertThat(decisions.get(0).detail().tenantHash()).isNull();
    // routed by load; the request path's reason is in the decision record
    assertThat(decisions.get(0).fallback()).isEqualTo("no_tokenization");
    assertThat(decisions.get(0).detail().promptUnavailable()).isEqualTo("unknown_model");
  }

  /**
   * The engine (uvicorn) percent-decodes the path before matching routes, and Envoy forwards {@code :path} as sent
   * unless it normalizes: a path the router reads differently would reach the engine as chat, unrouted and with
   * the client's own salt (here globex's, computable by anyone when salts are keyed by the public seed).
   */
  @ParameterizedTest
  @ValueSource(strings = {"/v1/chat/completions", "/v1/chat/%63ompletions", "/v1/chat%2Fcompletions",
      "/v1/chat/completions%2F", "//v1//chat/completions/?x=1"})
  void aTenantsChatRequestIsSaltedHoweverItsPathIsSpelled(String path) {
    for (BodySendMode mode : new BodySendMode[] {BodySendMode.BUFFERED, BodySendMode.FULL_DUPLEX_STREAMED}) {
      sent.clear();
      RequestStream s = stream(mode);
      s.onNext(headers(mode, "POST", path, "acme"));
      String globex = tenancy.effectiveSalt(null, "globex", null);
      s.onNext(body("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
          + "\"cache_salt\":\"" + globex + "\"}"));
      String forwarded = mode == BodySendMode.BUFFERED
          ? sent.get(1).getRequestBody().getResponse().getBodyMutation().getBody().toStringUtf8()
          : sent.get(1).getRequestBody().getResponse().getBodyMutation().getStreamedResponse().getBody()
              .toStringUtf8();
      assertThat(forwarded).as("the body the engine gets for tenant acme on %s (%s)", path, mode)
          .contains(tenancy.effectiveSalt(null, "acme", globex)).doesNotContain(globex);
    }
  }

  /**
   * OpenAI's Responses API, which vLLM serves with chat's {@code cache_salt}: a tenant's request used to be refused
   * (404, an endpoint the router did not route). It is routed (here by load: no model registry) with the tenant's
   * effective salt in the body, whatever salt the client sent, or none.
   */
  @Test
  void aTenantsResponsesRequestIsRoutedWithItsSalt() {
    String globex = tenancy.effectiveSalt(null, "globex", null);
    for (String clientSalt : new String[] {null, "client", globex}) {
      sent.clear();
      decisions.clear();
      RequestStream s = stream(BodySendMode.BUFFERED);
      s.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/responses", "acme"));
      String body = "{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":\"hi\"}],"
          + "\"max_output_tokens\":7" + (clientSalt == null ? "" : ",\"cache_salt\":\"" + clientSalt + "\"") + "}";
      s.onNext(body(body));
      forwardedWithAcmesSalt(clientSalt);
      assertThat(decisions.get(0).fallback()).isEqualTo("no_tokenization");
      // no model registry here, so the prompt is not tokenized: the model's own fallback
      assertThat(decisions.get(0).detail().promptUnavailable()).isEqualTo("unknown_model");
      assertThat(decisions.get(0).detail().expectedOutputTokens()).as("max_output_tokens").isEqualTo(7);
    }
  }

  /** The body forwarded to worker a carries acme's effective salt, never the client's own. */
  private void forwardedWithAcmesSalt(String clientSalt) {
    CommonResponse c = sent.get(1).getRequestBody().getResponse();
    String forwarded = c.getBodyMutation().getBody().toStringUtf8();
    assertThat(forwarded).as("salt %s", clientSalt).contains(tenancy.effectiveSalt(null, "acme", clientSalt));
    if (clientSalt != null) {
      assertThat(forwarded).doesNotContain("\"" + clientSalt + "\"");
    }
    assertThat(setHeaders(c)).containsEntry("x-kvrouter-cluster", "kvrouter_worker_a");
  }

  /**
   * With {@code tenancy.salt_messages_api} (every worker's vLLM declares {@code cache_salt} on its Anthropic request
   * model), a tenant's Messages request is routed like chat, with the tenant's effective salt in the body whatever the
   * client sent; without it, the 404 of {@link #aTenantsPostToAPathTheRouterDoesNotRouteIsRefusedUnlessItMayPassThrough}.
   */
  @Test
  void aTenantsMessagesRequestIsSaltedWhenTheWorkersHonourIt() {
    ExtProcOptions o = ExtProcOptions.defaults();
    ExtProcOptions salting = new ExtProcOptions(o.bind(), 0, 1 << 22, "x-tenant-id", BodySendMode.BUFFERED,
        BodySendMode.STREAMED, 1, 1, 1 << 22, 1, o.tenantPassThroughPaths(), true);
    for (String clientSalt : new String[] {null, "client"}) {
      sent.clear();
      decisions.clear();
      RequestStream s = new RequestStream(out, new RequestPath(preparer, null, router, new RequestListener() {
        @Override
        public void onDecision(Decision d) {
          decisions.add(d);
        }
      }), salting, Runnable::run, new InFlight(100, java.time.Duration.ofMinutes(1)));
      s.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/messages", "acme"));
      s.onNext(body("{\"model\":\"m\",\"max_tokens\":7,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
          + (clientSalt == null ? "" : ",\"cache_salt\":\"" + clientSalt + "\"") + "}"));
      forwardedWithAcmesSalt(clientSalt);
      assertThat(decisions).hasSize(1);
    }
  }

  /**
   * vLLM answers a Responses request with the request's {@code request_id} as the response's id: the router writes one
   * naming the worker it chose (with the salt, for a tenant), so continuations find their stored response; a client's
   * own request_id is left alone.
   */
  @Test
  void aResponsesRequestGetsARequestIdNamingItsWorkerUnlessItChoseOne() throws Exception {
    for (String tenant : new String[] {null, "acme"}) {
      for (BodySendMode mode : new BodySendMode[] {BodySendMode.BUFFERED, BodySendMode.FULL_DUPLEX_STREAMED}) {
        sent.clear();
        RequestStream s = stream(mode);
        s.onNext(headers(mode, "POST", "/v1/responses", tenant));
        s.onNext(body("{\"model\":\"m\",\"input\":\"hi\",\"store\":true}"));
        String forwarded = forwardedBody(mode);
        com.fasterxml.jackson.databind.JsonNode json = new com.fasterxml.jackson.databind.ObjectMapper()
            .readTree(forwarded);
        String id = json.path("request_id").asText();
        assertThat(dev.kvrouter.extproc.request.ResponseIds.tagOf(id)).as("%s %s: %s", tenant, mode, forwarded)
            .isEqualTo(dev.kvrouter.extproc.request.ResponseIds.tag("a"));
        assertThat(json.path("input").asText()).isEqualTo("hi");
        assertThat(json.has("cache_salt")).isEqualTo(tenant != null);
        if (mode == BodySendMode.BUFFERED) {
          assertThat(setHeaders(sent.get(1).getRequestBody().getResponse())).containsEntry("content-length",
              Integer.toString(forwarded.getBytes(StandardCharsets.UTF_8).length));
        }
      }
    }
    sent.clear();
    RequestStream own = stream(BodySendMode.BUFFERED);
    own.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/responses", null));
    own.onNext(body("{\"model\":\"m\",\"input\":\"hi\",\"request_id\":\"mine\"}"));
    assertThat(sent.get(1).getRequestBody().getResponse().hasBodyMutation()).as("the client's own id").isFalse();
  }

  /** Lifecycle requests of a stored response (get, delete, cancel, input items) go to the worker that stores it. */
  @Test
  void aStoredResponsesLifecycleRequestsGoToItsWorker() {
    registry.replace(List.of(Worker.simple("a", "10.0.0.1", 8000, "m"), Worker.simple("b", "10.0.0.2", 8000, "m")));
    String onB = dev.kvrouter.extproc.request.ResponseIds.mint("b");
    String[][] lifecycle = {{"GET", "/v1/responses/" + onB}, {"DELETE", "/v1/responses/" + onB + "/"},
        {"POST", "/v1/responses/" + onB + "/cancel"}, {"GET", "/v1/responses/" + onB + "/input_items?limit=5"}};
    for (BodySendMode mode : new BodySendMode[] {BodySendMode.BUFFERED, BodySendMode.FULL_DUPLEX_STREAMED}) {
      for (String[] m : lifecycle) {
        for (String tenant : new String[] {null, "acme"}) {
          sent.clear();
          stream(mode).onNext(headers(mode, m[0], m[1], tenant));
          assertThat(sent).as("%s %s %s", m[0], m[1], tenant).hasSize(1);
          CommonResponse c = sent.get(0).getRequestHeaders().getResponse();
          assertThat(setHeaders(c)).as("%s %s %s", m[0], m[1], tenant)
              .containsEntry("x-kvrouter-cluster", "kvrouter_worker_b")
              .containsEntry("x-gateway-destination-endpoint", "10.0.0.2:8000");
          assertThat(c.getClearRouteCache()).isTrue();
        }
      }
    }
    // an id no worker of the fleet minted, or another method: as before (the pool; a tenant's POST refused)
    sent.clear();
    stream(BodySendMode.BUFFERED).onNext(headers(BodySendMode.BUFFERED, "GET",
        "/v1/responses/" + dev.kvrouter.extproc.request.ResponseIds.mint("gone"), null));
    assertThat(sent.get(0).getRequestHeaders().getResponse().hasHeaderMutation()).isFalse();
    sent.clear();
    stream(BodySendMode.BUFFERED).onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/responses/" + onB, "acme"));
    assertThat(sent.get(0).getImmediateResponse().getStatus().getCodeValue()).isEqualTo(404);
    assertThat(decisions).as("no decision for a lifecycle request").isEmpty();
  }

  private String forwardedBody(BodySendMode mode) {
    if (mode == BodySendMode.BUFFERED) {
      return sent.get(1).getRequestBody().getResponse().getBodyMutation().getBody().toStringUtf8();
    }
    StringBuilder b = new StringBuilder();
    for (ProcessingResponse r : sent.subList(1, sent.size())) {
      b.append(r.getRequestBody().getResponse().getBodyMutation().getStreamedResponse().getBody().toStringUtf8());
    }
    return b.toString();
  }

  /**
   * An engine endpoint the router does not understand would let a tenant reach the engine with a salt of its
   * choosing, or none: refused, except for the configured pass-through paths, and for GET and tenant-less requests,
   * which pass as before.
   */
  @Test
  void aTenantsPostToAPathTheRouterDoesNotRouteIsRefusedUnlessItMayPassThrough() {
    // /v1/messages too, although routed without a tenant: vLLM's Anthropic request model drops fields it does not
    // declare, and only recent versions declare cache_salt, so the salt could be lost on the way to the engine
    for (String path : new String[] {"/v1/embeddings", "/v1/chat/completions%zz", "/v1/chat/%2563ompletions",
        "/invocations", "/v1/messages"}) {
      sent.clear();
      stream(BodySendMode.BUFFERED).onNext(headers(BodySendMode.BUFFERED, "POST", path, "acme"));
      assertThat(sent).as(path).hasSize(1);
      var refused = sent.get(0).getImmediateResponse();
      assertThat(refused.getStatus().getCodeValue()).as(path).isEqualTo(404);
      // in the shape the path's clients parse (RequestStreamErrorShapeTest)
      assertThat(refused.getBody().toStringUtf8()).as(path).contains(path.equals("/v1/messages")
          ? "{\"type\":\"error\",\"error\":{\"type\":\"NotFoundError\""
          : "\"type\":\"invalid_request_error\"");
      assertThat(refused.getDetails()).as(path).isEqualTo("kvrouter_unknown_url");
    }
    String[][] passing = {{"POST", "/tokenize", "acme"}, {"POST", "/detokenize/", "acme"},
        {"POST", "/v1/messages/count_tokens", "acme"},
        {"GET", "/v1/models", "acme"}, {"POST", "/v1/embeddings", null}, {"POST", "/v1/embeddings", ""}};
    for (String[] p : passing) {
      sent.clear();
      stream(BodySendMode.BUFFERED).onNext(headers(BodySendMode.BUFFERED, p[0], p[1], p[2]));
      assertThat(sent).as(String.join(" ", p[0], p[1], String.valueOf(p[2]))).hasSize(1);
      assertThat(sent.get(0).hasRequestHeaders()).as(p[1]).isTrue();
    }
    ExtProcOptions o = ExtProcOptions.defaults();
    ExtProcOptions listed = new ExtProcOptions(o.bind(), 0, 1 << 22, "x-tenant-id", BodySendMode.BUFFERED,
        BodySendMode.STREAMED, 1, 1, 1 << 22, 1, java.util.Set.of("/v1/embeddings"));
    sent.clear();
    new RequestStream(out, new RequestPath(preparer, null, router, null), listed, Runnable::run,
        new InFlight(100, java.time.Duration.ofMinutes(1)))
        .onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/embeddings", "acme"));
    assertThat(sent.get(0).hasRequestHeaders()).as("listed in tenancy.pass_through_paths").isTrue();
  }

  /**
   * In a body mode the router cannot route in (an Envoy configured STREAMED, BUFFERED_PARTIAL or NONE), the request
   * used to pass through to the default route with the client's body: a tenant's chat reached the engine with no
   * salt (the shared namespace) or with a salt of its choosing. It must be refused instead; tenant-less requests
   * still pass, as they would unsalted anyway.
   */
  @ParameterizedTest
  @ValueSource(strings = {"STREAMED", "BUFFERED_PARTIAL", "NONE"})
  void aTenantsInferenceRequestIsRefusedInABodyModeThatCannotCarryItsSalt(String name) {
    BodySendMode mode = BodySendMode.valueOf(name);
    RequestStream s = stream(BodySendMode.BUFFERED);
    s.onNext(headers(mode, "acme"));
    assertThat(sent).hasSize(1);
    assertThat(sent.get(0).hasImmediateResponse()).as("a tenant's chat in %s mode", mode).isTrue();
    assertThat(sent.get(0).getImmediateResponse().getStatus().getCodeValue()).isEqualTo(500);
    assertThat(decisions).isEmpty();

    sent.clear();
    RequestStream anonymous = stream(BodySendMode.BUFFERED);
    anonymous.onNext(headers(mode, null));
    assertThat(sent).hasSize(1);
    assertThat(sent.get(0).hasRequestHeaders()).as("a tenant-less chat in %s mode passes", mode).isTrue();
  }

  /**
   * Envoy passes header bytes as they came ({@code raw_value}); HTTP allows bytes over 0x7F that are not UTF-8 (a
   * Latin-1 "café"). Decoded leniently, every such byte became U+FFFD, so tenants "caf\xe9" and "caf\xe8" were one
   * tenant with one salt. Two tenants whose bytes differ must never share a salt: such a value is refused.
   */
  @Test
  void tenantsWhoseHeaderBytesDifferNeverShareASalt() {
    List<String> forwarded = new ArrayList<>();
    for (byte last : new byte[] {(byte) 0xe9, (byte) 0xe8}) {
      sent.clear();
      ProcessingRequest h = headers(BodySendMode.BUFFERED, null);
      HeaderMap.Builder map = h.getRequestHeaders().getHeaders().toBuilder().addHeaders(HeaderValue.newBuilder()
          .setKey("x-tenant-id").setRawValue(ByteString.copyFrom(new byte[] {'c', 'a', 'f', last})));
      RequestStream s = stream(BodySendMode.BUFFERED);
      s.onNext(h.toBuilder().setRequestHeaders(h.getRequestHeaders().toBuilder().setHeaders(map)).build());
      if (!sent.get(0).hasImmediateResponse()) {
        s.onNext(body(BODY));
      }
      ProcessingResponse last1 = sent.get(sent.size() - 1);
      if (last1.hasImmediateResponse()) {
        assertThat(last1.getImmediateResponse().getStatus().getCodeValue()).isEqualTo(400);
        assertThat(last1.getImmediateResponse().getBody().toStringUtf8()).doesNotContain("caf");
      } else {
        forwarded.add(last1.getRequestBody().getResponse().getBodyMutation().getBody().toStringUtf8());
      }
    }
    assertThat(forwarded).doesNotHaveDuplicates();
  }
}
