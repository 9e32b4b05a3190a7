package dev.kvrouter.extproc.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import dev.kvrouter.extproc.request.InferenceRequest;
import dev.kvrouter.extproc.routing.RoundRobinPolicy;
import dev.kvrouter.extproc.routing.Router;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.config.core.v3.HeaderValueOption;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProtocolConfiguration;
import io.grpc.stub.StreamObserver;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The ext_proc protocol as Envoy drives it, one message at a time, without a network. */
class RequestStreamTest {

  final List<ProcessingResponse> sent = new ArrayList<>();
  final List<String> events = new ArrayList<>();
  WorkerRegistry registry;
  Router router;
  int inlineLimit = 1 << 20;
  final InFlight inFlight = new InFlight(100, java.time.Duration.ofMinutes(1));
  /** Routing tasks handed to the routing executor, run by the test when it chooses. */
  final List<Runnable> offloaded = new ArrayList<>();

  final StreamObserver<ProcessingResponse> out = new StreamObserver<>() {
    @Override
    public void onNext(ProcessingResponse r) {
      sent.add(r);
    }

    @Override
    public void onError(Throwable t) {
      events.add("error");
    }

    @Override
    public void onCompleted() {
      events.add("completed");
    }
  };

  final List<String> refused = new ArrayList<>();
  final List<dev.kvrouter.extproc.routing.Decision> decided = new ArrayList<>();
  int abandoned;
  final List<String> unexpected = new ArrayList<>();

  final RequestListener listener = new RequestListener() {
    @Override
    public void onRefused(String reason) {
      refused.add(reason);
    }

    @Override
    public void onDecision(dev.kvrouter.extproc.routing.Decision d) {
      decided.add(d);
    }

    @Override
    public void onAbandoned() {
      abandoned++;
    }

    @Override
    public void onUnexpectedMessage(String message) {
      unexpected.add(message);
    }

    @Override
    public void onResponseBody(dev.kvrouter.extproc.routing.Decision d, ByteString c, boolean first, boolean eos) {
      events.add("body first=" + first + " eos=" + eos);
    }

    @Override
    public void onObserverLeft(dev.kvrouter.extproc.routing.Decision d) {
      events.add("observer left");
    }

    @Override
    public void onEnd(dev.kvrouter.extproc.routing.Decision d, boolean aborted) {
      events.add("end aborted=" + aborted);
    }
  };

  @BeforeEach
  void fleet() {
    registry = new WorkerRegistry();
    registry.replace(List.of(Worker.simple("a", "10.0.0.1", 8000, "m"), Worker.simple("b", "10.0.0.2", 8000, "m")));
    router = new Router(registry, new RoundRobinPolicy(), Map.of(), System::nanoTime);
  }

  RequestStream stream(int maxBody) {
    ExtProcOptions o = ExtProcOptions.defaults();
    o = new ExtProcOptions(o.bind(), 0, maxBody, o.tenantHeader(), BodySendMode.BUFFERED, BodySendMode.STREAMED,
        1, 1, inlineLimit, 1);
    return new RequestStream(out, RequestPath.of(router, listener), o, offloaded::add, inFlight);
  }

  static ProcessingRequest headers(BodySendMode mode, String method, String path, boolean eos) {
    HeaderMap.Builder h = HeaderMap.newBuilder();
    for (String[] kv : new String[][] {{":method", method}, {":path", path}, {"x-request-id", "req-1"}}) {
      h.addHeaders(HeaderValue.newBuilder().setKey(kv[0]).setRawValue(ByteString.copyFromUtf8(kv[1])));
    }
    return ProcessingRequest.newBuilder()
        .setProtocolConfig(ProtocolConfiguration.newBuilder().setRequestBodyMode(mode)
            .setResponseBodyMode(mode == BodySendMode.FULL_DUPLEX_STREAMED ? mode : BodySendMode.STREAMED))
        .setRequestHeaders(HttpHeaders.newBuilder().setHeaders(h).setEndOfStream(eos))
        .build();
  }

  /** A response observer that keeps what the stream sent in {@code into}. */
  static StreamObserver<ProcessingResponse> collecting(List<ProcessingResponse> into) {
    return new StreamObserver<>() {
      @Override
      public void onNext(ProcessingResponse r) {
        into.add(r);
      }

      @Override
      public void onError(Throwable t) {}

      @Override
      public void onCompleted() {}
    };
  }

  static ProcessingRequest body(String s, boolean eos) {
    return ProcessingRequest.newBuilder()
        .setRequestBody(HttpBody.newBuilder().setBody(ByteString.copyFromUtf8(s)).setEndOfStream(eos)).build();
  }

  static ProcessingRequest responseBody(String s, boolean eos) {
    return ProcessingRequest.newBuilder()
        .setResponseBody(HttpBody.newBuilder().setBody(ByteString.copyFromUtf8(s)).setEndOfStream(eos)).build();
  }

  static Map<String, String> setHeaders(List<HeaderValueOption> hs) {
    return hs.stream().collect(Collectors.toMap(h -> h.getHeader().getKey(),
        h -> h.getHeader().getRawValue().toStringUtf8()));
  }

  static final String BODY = "{\"model\":\"m\",\"prompt\":\"hello\",\"stream\":true}";

  @Test
  void aClientsRequestIdIsCutShortBeforeItKeysAnything() {
    // The id keys InFlight (200,000 decisions) and rides every record and header of its request: a count bound
    // bounds nothing when each key may be as long as Envoy lets a header be (60 KiB by default).
    String huge = "r".repeat(60_000);
    routedWithRequestId(huge);
    assertThat(decided).hasSize(1);
    String id = decided.get(0).id();
    assertThat(id).as("kept: its first 128 characters").isEqualTo(huge.substring(0, 128));
    assertThat(setHeaders(sent.get(1).getRequestBody().getResponse().getHeaderMutation().getSetHeadersList()))
        .containsEntry("x-kvrouter-decision", id);
    assertThat(inFlight.claim(id)).as("registered under the id it was given").isNotNull();
  }

  /**
   * A client's id whose 128th character is the first half of a surrogate pair (an emoji there): cut at 128, the id
   * kept a lone surrogate, which UTF-8 cannot carry, so the header and the metadata Envoy got (and forwards to the
   * response observer) said "?" where the router had registered the surrogate: the observer claimed nothing.
   */
  @Test
  void aClientsRequestIdIsNeverCutInsideACharacter() throws Exception {
    routedWithRequestId("r".repeat(RequestStream.MAX_REQUEST_ID_CHARS - 1) + "\uD83D\uDE00" + "tail");
    String id = decided.get(0).id();
    // what Envoy reads: the response as it crosses the wire
    ProcessingResponse wire = ProcessingResponse.parseFrom(sent.get(1).toByteArray());
    String forwarded = wire.getDynamicMetadata().getFieldsOrThrow("envoy.lb").getStructValue()
        .getFieldsOrThrow("x-kvrouter-decision").getStringValue();
    assertThat(inFlight.claim(forwarded)).as("the observer claims by what Envoy forwards").isNotNull();
    assertThat(setHeaders(wire.getRequestBody().getResponse().getHeaderMutation().getSetHeadersList()))
        .containsEntry("x-kvrouter-decision", id);
    assertThat(id).as("cut before the pair").isEqualTo("r".repeat(RequestStream.MAX_REQUEST_ID_CHARS - 1));
  }

  /** A completions request routed in BUFFERED mode, with the client's {@code x-request-id}. */
  private void routedWithRequestId(String requestId) {
    RequestStream s = stream(1 << 20);
    HeaderMap.Builder h = HeaderMap.newBuilder();
    String[][] kvs = {{":method", "POST"}, {":path", "/v1/completions"}, {"x-request-id", requestId}};
    for (String[] kv : kvs) {
      h.addHeaders(HeaderValue.newBuilder().setKey(kv[0]).setRawValue(ByteString.copyFromUtf8(kv[1])));
    }
    s.onNext(ProcessingRequest.newBuilder()
        .setProtocolConfig(ProtocolConfiguration.newBuilder().setRequestBodyMode(BodySendMode.BUFFERED)
            .setResponseBodyMode(BodySendMode.STREAMED))
        .setRequestHeaders(HttpHeaders.newBuilder().setHeaders(h)).build());
    s.onNext(body(BODY, true));
  }

  @Test
  void bufferedModeAnswersHeadersAtOnceAndRoutesOnTheBody() {
    RequestStream s = stream(1 << 20);
    s.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/completions", false));
    assertThat(sent).hasSize(1);
    assertThat(sent.get(0).hasRequestHeaders()).isTrue();
    assertThat(sent.get(0).getRequestHeaders().getResponse().getHeaderMutation().getSetHeadersCount()).isZero();

    s.onNext(body(BODY, true));
    ProcessingResponse r = sent.get(1);
    assertThat(r.hasRequestBody()).isTrue();
    assertThat(r.getRequestBody().getResponse().getClearRouteCache()).isTrue();
    Map<String, String> set = setHeaders(r.getRequestBody().getResponse().getHeaderMutation().getSetHeadersList());
    assertThat(set).containsEntry("x-kvrouter-cluster", "kvrouter_worker_a")
        .containsEntry("x-gateway-destination-endpoint", "10.0.0.1:8000")
        .containsEntry("x-kvrouter-decision", "req-1");
    assertThat(r.getDynamicMetadata().getFieldsOrThrow("envoy.lb").getStructValue()
        .getFieldsOrThrow("x-gateway-destination-endpoint").getStringValue()).isEqualTo("10.0.0.1:8000");
    // the body itself is not mutated in BUFFERED mode
    assertThat(r.getRequestBody().getResponse().hasBodyMutation()).isFalse();
  }

  @Test
  void fullDuplexHoldsHeadersUntilTheBodyEndsThenSendsHeadersBeforeChunkedBody() {
    RequestStream s = stream(1 << 20);
    s.onNext(headers(BodySendMode.FULL_DUPLEX_STREAMED, "POST", "/v1/chat/completions", false));
    assertThat(sent).isEmpty();
    String big = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"" + "x".repeat(130_000) + "\"}]}";
    int cut = 70_000;
    s.onNext(body(big.substring(0, cut), false));
    assertThat(sent).isEmpty();
    s.onNext(body(big.substring(cut), true));
    assertThat(sent.get(0).hasRequestHeaders()).isTrue();
    assertThat(sent.get(0).getRequestHeaders().getResponse().getClearRouteCache()).isTrue();
    List<ProcessingResponse> chunks = sent.subList(1, sent.size());
    assertThat(chunks).hasSize(3).allSatisfy(c -> assertThat(c.hasRequestBody()).isTrue());
    StringBuilder rebuilt = new StringBuilder();
    for (int i = 0; i < chunks.size(); i++) {
      var sb = chunks.get(i).getRequestBody().getResponse().getBodyMutation().getStreamedResponse();
      assertThat(sb.getBody().size()).isLessThanOrEqualTo(62_000);
      assertThat(sb.getEndOfStream()).isEqualTo(i == chunks.size() - 1);
      rebuilt.append(sb.getBody().toString(StandardCharsets.UTF_8));
    }
    assertThat(rebuilt.toString()).isEqualTo(big);
  }

  @Test
  void fullDuplexEchoesResponseChunksAndReportsFirstByteAndEnd() {
    RequestStream s = stream(1 << 20);
    s.onNext(headers(BodySendMode.FULL_DUPLEX_STREAMED, "POST", "/v1/completions", false));
    s.onNext(body(BODY, true));
    sent.clear();
    s.onNext(responseBody("data: 1\n\n", false));
    s.onNext(responseBody("data: [DONE]\n\n", true));
    assertThat(sent).hasSize(2);
    assertThat(sent.get(1).getResponseBody().getResponse().getBodyMutation().getStreamedResponse().getEndOfStream())
        .isTrue();
    assertThat(events).containsExactly("body first=true eos=false", "body first=false eos=true",
        "end aborted=false");
  }

  @Test
  void aResetAfterRoutingEndsTheRequestAsAborted() {
    RequestStream s = stream(1 << 20);
    s.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/completions", false));
    s.onNext(body(BODY, true));
    s.onError(new io.grpc.StatusRuntimeException(io.grpc.Status.CANCELLED));
    assertThat(events).containsExactly("end aborted=true");
  }

  @Test
  void malformedJsonGets400AndNothingIsRouted() {
    RequestStream s = stream(1 << 20);
    s.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/completions", false));
    s.onNext(body("{\"model\": \"m\", \"prompt\": [1, 2", true));
    ProcessingResponse r = sent.get(1);
    assertThat(r.hasImmediateResponse()).isTrue();
    assertThat(r.getImmediateResponse().getStatus().getCodeValue()).isEqualTo(400);
    assertThat(r.getImmediateResponse().getBody().toStringUtf8()).contains("invalid_request_error")
        .doesNotContain("prompt\": [1");
    // anything Envoy sends after the immediate response is ignored
    s.onNext(body("more", true));
    assertThat(sent).hasSize(2);
    assertThat(refused).as("counted as refused before any decision").containsExactly("bad_request");
  }

  @Test
  void bodiesOverTheLimitGet413EvenWhenTheyArriveInPieces() {
    RequestStream s = stream(100);
    s.onNext(headers(BodySendMode.FULL_DUPLEX_STREAMED, "POST", "/v1/completions", false));
    s.onNext(body("x".repeat(60), false));
    s.onNext(body("x".repeat(60), false));
    assertThat(sent).hasSize(1);
    assertThat(sent.get(0).getImmediateResponse().getStatus().getCodeValue()).isEqualTo(413);
    assertThat(refused).containsExactly("body_too_large");
  }

  @Test
  void nonInferencePathsPassThroughUntouchedInBothModes() {
    RequestStream s = stream(1 << 20);
    s.onNext(headers(BodySendMode.FULL_DUPLEX_STREAMED, "GET", "/v1/models", true));
    assertThat(sent).hasSize(1);
    assertThat(sent.get(0).getRequestHeaders().getResponse().getHeaderMutation().getSetHeadersCount()).isZero();
    RequestStream post = stream(1 << 20);
    post.onNext(headers(BodySendMode.FULL_DUPLEX_STREAMED, "POST", "/tokenize", false));
    post.onNext(body("{}", true));
    assertThat(sent.get(2).getRequestBody().getResponse().getBodyMutation().getStreamedResponse().getBody()
        .toStringUtf8()).isEqualTo("{}");
  }

  @Test
  void largeBodiesAreRoutedOffTheEventLoopAndTrailersWaitForTheDecision() {
    inlineLimit = 10;
    RequestStream s = stream(1 << 20);
    s.onNext(headers(BodySendMode.FULL_DUPLEX_STREAMED, "POST", "/v1/completions", false));
    s.onNext(body(BODY, false));
    s.onNext(ProcessingRequest.newBuilder().setRequestTrailers(
        io.envoyproxy.envoy.service.ext_proc.v3.HttpTrailers.getDefaultInstance()).build());
    assertThat(sent).isEmpty();
    assertThat(offloaded).hasSize(1);
    offloaded.remove(0).run();
    assertThat(sent.get(0).hasRequestHeaders()).isTrue();
    assertThat(sent.get(1).getRequestBody().getResponse().getBodyMutation().getStreamedResponse().getEndOfStream())
        .isFalse(); // trailers follow
    assertThat(sent.get(2).hasRequestTrailers()).isTrue();
  }

  @Test
  void aBufferedBodyThatTrailersFollowIsRoutedWithoutItsEndOfStream() {
    // Envoy's BUFFERED mode sends the whole body without end_of_stream when the request has trailers, and sends
    // the trailers (if at all) only after the body is answered.
    RequestStream s = stream(1 << 20);
    s.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/completions", false));
    s.onNext(body(BODY, false));
    assertThat(sent).as("headers, then the routed body").hasSize(2);
    assertThat(setHeaders(sent.get(1).getRequestBody().getResponse().getHeaderMutation().getSetHeadersList()))
        .containsEntry("x-kvrouter-cluster", "kvrouter_worker_a");
    s.onNext(ProcessingRequest.newBuilder().setRequestTrailers(
        io.envoyproxy.envoy.service.ext_proc.v3.HttpTrailers.getDefaultInstance()).build());
    assertThat(sent).hasSize(3);
    assertThat(sent.get(2).hasRequestTrailers()).isTrue();
    assertThat(inFlight.pending()).as("routed once").isEqualTo(1);
  }

  @Test
  void twoRequestsInFlightWithOneRequestIdEachKeepTheirOwnDecision() {
    List<String> ends = new ArrayList<>();
    RequestListener byWorker = new RequestListener() {
      @Override
      public void onEnd(dev.kvrouter.extproc.routing.Decision d, boolean aborted) {
        ends.add(d.id() + "@" + d.chosen().name());
      }
    };
    ExtProcOptions o = ExtProcOptions.defaults();
    o = new ExtProcOptions(o.bind(), 0, 1 << 20, o.tenantHeader(), BodySendMode.BUFFERED, BodySendMode.STREAMED,
        1, 1, inlineLimit, 1);
    RequestStream first = new RequestStream(out, RequestPath.of(router, byWorker), o, offloaded::add, inFlight);
    RequestStream second = new RequestStream(out, RequestPath.of(router, byWorker), o, offloaded::add, inFlight);
    first.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/completions", false)); // x-request-id: req-1
    first.onNext(body(BODY, true));
    second.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/completions", false)); // the same id, still in flight
    second.onNext(body(BODY, true));
    String firstId = setHeaders(sent.get(1).getRequestBody().getResponse().getHeaderMutation().getSetHeadersList())
        .get("x-kvrouter-decision");
    String secondId = setHeaders(sent.get(3).getRequestBody().getResponse().getHeaderMutation()
        .getSetHeadersList()).get("x-kvrouter-decision");
    assertThat(firstId).isEqualTo("req-1");
    assertThat(secondId).startsWith("req-1~").isNotEqualTo(firstId);
    assertThat(sent.get(3).getDynamicMetadata().getFieldsOrThrow("envoy.lb").getStructValue()
        .getFieldsOrThrow("x-kvrouter-decision").getStringValue()).isEqualTo(secondId);
    assertThat(inFlight.pending()).isEqualTo(2);
    assertThat(inFlight.reusedIds()).isEqualTo(1);
    for (String id : List.of(secondId, firstId)) {
      ObserverStream obs = new ObserverStream(out, inFlight, byWorker, 1);
      obs.onNext(ProcessingRequest.newBuilder().setRequestHeaders(HttpHeaders.newBuilder().setHeaders(
          HeaderMap.newBuilder().addHeaders(HeaderValue.newBuilder().setKey("x-kvrouter-decision")
              .setRawValue(ByteString.copyFromUtf8(id))))).build());
      obs.onNext(responseBody("{}", true));
    }
    assertThat(ends).containsExactly(secondId + "@b", "req-1@a");
    first.onCompleted();
    second.onCompleted();
    assertThat(ends).as("each ended once").hasSize(2);
  }

  @Test
  void anObserverOfAResponseNobodyRoutedClosesAtOnce() {
    // A pass-through path (GET /v1/models): the observer's first message carries no decision.
    ObserverStream obs = new ObserverStream(out, inFlight, listener, 1);
    obs.onNext(ProcessingRequest.newBuilder().setResponseHeaders(HttpHeaders.newBuilder().setHeaders(
        HeaderMap.newBuilder().addHeaders(HeaderValue.newBuilder().setKey(":status")
            .setRawValue(ByteString.copyFromUtf8("200"))))).build());
    assertThat(events).as("closed by the router, not left to Envoy's deferred close").containsExactly("completed");
    obs.onNext(responseBody("{\"data\":[]}", true));
    obs.onCompleted();
    assertThat(events).as("closed once, nothing ended").containsExactly("completed");
  }

  @Test
  void aClientThatLeavesWhileItsRequestIsRoutedGetsNothingSentAndEndsAborted() {
    inlineLimit = 10;
    RequestStream[] s = new RequestStream[1];
    // the client leaves while a routing thread computes its decision
    router = new Router(registry, new PolicyDuring(() -> s[0].onError(
        new io.grpc.StatusRuntimeException(io.grpc.Status.CANCELLED))), Map.of(), System::nanoTime);
    s[0] = stream(1 << 20);
    s[0].onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/completions", false));
    s[0].onNext(body(BODY, true));
    int before = sent.size();
    offloaded.remove(0).run();
    assertThat(sent).hasSize(before);
    assertThat(decided).hasSize(1);
    assertThat(events).containsExactly("end aborted=true");
  }

  /**
   * Envoy closes the stream of a request still waiting for a routing thread when its message_timeout fires (or the
   * client leaves), and sends the request on unrouted. Routing it anyway spent the threads on answers nobody read:
   * under overload every queued request was routed after its deadline, so none was routed in time, and each kept
   * its body until a thread reached it.
   */
  @Test
  void aRequestAbandonedWhileItWaitsForARoutingThreadIsNotRouted() {
    inlineLimit = 10;
    for (boolean reset : new boolean[] {false, true}) {
      RequestStream s = stream(1 << 20);
      s.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/completions", false));
      s.onNext(body(BODY, true));
      int before = sent.size();
      if (reset) {
        s.onError(new io.grpc.StatusRuntimeException(io.grpc.Status.CANCELLED));
      } else {
        s.onCompleted(); // message_timeout: Envoy closes its side
      }
      offloaded.remove(0).run();
      assertThat(sent).hasSize(before);
    }
    assertThat(decided).as("nothing routed").isEmpty();
    assertThat(events).containsExactly("completed");
    assertThat(inFlight.pending()).isZero();
    assertThat(abandoned).as("counted").isEqualTo(2);
  }

  /**
   * Request headers or a request body after the stream had them (Envoy sends neither; another ext_proc client, or an
   * Envoy bug, might). A second body while the first was routed off the event loop started a second routing task
   * over the same, now longer, buffer the first was reading: two answers to one message, and two decisions
   * registered, the first never ended (its reservation load until the ledger's expiry). One after the routing hit a
   * released buffer and logged an internal failure.
   */
  @Test
  void requestMessagesAfterTheirPhaseAreIgnoredAndCounted() {
    inlineLimit = 10;
    RequestStream s = stream(1 << 20);
    s.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/completions", false));
    s.onNext(body(BODY, true));
    s.onNext(body("", true)); // while the body is routed
    s.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/chat/completions", false));
    assertThat(offloaded).as("one routing task").hasSize(1);
    offloaded.remove(0).run();
    s.onNext(body(BODY, true)); // after it was routed
    assertThat(sent).as("headers, then the routed body").hasSize(2);
    assertThat(setHeaders(sent.get(1).getRequestBody().getResponse().getHeaderMutation().getSetHeadersList()))
        .containsEntry("x-kvrouter-cluster", "kvrouter_worker_a");
    assertThat(decided).hasSize(1);
    assertThat(unexpected).containsExactly("request_body", "request_headers", "request_body");
    s.onError(new io.grpc.StatusRuntimeException(io.grpc.Status.CANCELLED));
    assertThat(events).containsExactly("end aborted=true");
    assertThat(inFlight.pending()).as("nothing left for an observer").isZero();
  }

  /**
   * An Envoy configured with {@code request_header_mode: SKIP} sends the body alone. Without a path nothing can be
   * routed: it must go on unrouted at once, not as the router's own 500 (as it did until 2026-12-02) nor held until
   * Envoy's message_timeout.
   */
  @Test
  void aBodyWithoutHeadersGoesOnUnroutedAndIsCounted() {
    RequestStream s = stream(1 << 20);
    s.onNext(body(BODY, true));
    assertThat(sent).hasSize(1);
    assertThat(sent.get(0).hasRequestBody()).isTrue();
    assertThat(sent.get(0).getRequestBody().getResponse().hasHeaderMutation()).isFalse();
    assertThat(refused).as("not the router's failure").isEmpty();
    assertThat(decided).isEmpty();
    assertThat(unexpected).containsExactly("request_body_before_headers");
  }

  /**
   * Trailers before any headers (an Envoy with {@code request_header_mode: SKIP} and trailers sent; found by
   * ExtProcStreamPropertyTest) carry no path, as a body without headers does: they go on unrouted. They were taken
   * for the end of a body to route, and the empty body was refused with 400.
   */
  @Test
  void trailersWithoutHeadersGoOnUnroutedAndAreCounted() {
    RequestStream s = stream(1 << 20);
    s.onNext(ProcessingRequest.newBuilder()
        .setRequestTrailers(io.envoyproxy.envoy.service.ext_proc.v3.HttpTrailers.getDefaultInstance()).build());
    assertThat(sent).hasSize(1);
    assertThat(sent.get(0).hasRequestTrailers()).isTrue();
    assertThat(refused).isEmpty();
    assertThat(decided).isEmpty();
    assertThat(unexpected).containsExactly("request_trailers_before_headers");

    s.onNext(body(BODY, true)); // the stream passes through from here
    assertThat(sent).hasSize(2);
    assertThat(sent.get(1).hasRequestBody()).isTrue();
    assertThat(sent.get(1).getRequestBody().getResponse().hasHeaderMutation()).isFalse();
    assertThat(decided).isEmpty();
  }

  /**
   * Headers after a body that went on unrouted without them (ExtProcStreamPropertyTest found it): the body is gone,
   * so nothing is left to route, and the headers must be answered as they are. They were read as a request's
   * first phase instead: in FULL_DUPLEX_STREAMED mode held for a body that had already passed, unanswered on a
   * stream Envoy puts no timeout on.
   */
  @Test
  void headersAfterABodyThatWentOnWithoutThemAreAnsweredAsTheyAre() {
    RequestStream s = stream(1 << 20);
    s.onNext(body(BODY, true));
    s.onNext(headers(BodySendMode.FULL_DUPLEX_STREAMED, "POST", "/v1/chat/completions", false));
    assertThat(sent).hasSize(2);
    assertThat(sent.get(1).hasRequestHeaders()).isTrue();
    assertThat(sent.get(1).getRequestHeaders().getResponse().hasHeaderMutation()).isFalse();
    assertThat(decided).isEmpty();
    assertThat(unexpected).containsExactly("request_body_before_headers", "request_headers");
  }

  /** Round robin, running {@code during} first: something that happens while a routing thread decides. */
  record PolicyDuring(Runnable during) implements dev.kvrouter.extproc.routing.RoutingPolicy {
    @Override
    public String name() {
      return "during";
    }

    @Override
    public Choice choose(dev.kvrouter.extproc.routing.Scoring sc) {
      during.run();
      return new Choice(sc.candidates().get(0), "during");
    }
  }

  /** A request routed, its routing stream closed, and its observer claiming it by the decision header. */
  ObserverStream routedAndObserved() {
    RequestStream s = stream(1 << 20);
    s.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/completions", false));
    s.onNext(body(BODY, true));
    ObserverStream obs = new ObserverStream(out, inFlight, listener, 1);
    HeaderMap.Builder h = HeaderMap.newBuilder().addHeaders(HeaderValue.newBuilder().setKey("x-kvrouter-decision")
        .setRawValue(ByteString.copyFromUtf8("req-1")));
    obs.onNext(ProcessingRequest.newBuilder().setRequestHeaders(HttpHeaders.newBuilder().setHeaders(h)).build());
    s.onCompleted(); // Envoy closes the routing stream once the request phases are done
    return obs;
  }

  @Test
  void withAnObserverTheObserverEndsTheRequestAndTheRoutingStreamDoesNot() {
    ObserverStream obs = routedAndObserved();
    assertThat(events).containsExactly("completed");
    obs.onNext(responseBody("{\"usage\":{}}", true));
    // the observer closes its stream at the end of the response rather than waiting for Envoy's deferred close
    assertThat(events).containsExactly("completed", "body first=true eos=true", "end aborted=false",
        "completed");
    obs.onCompleted();
    assertThat(events).as("closed once").hasSize(4);
    assertThat(inFlight.claim("req-1")).isNull();
  }

  /**
   * vLLM opens a streamed Responses answer with response.created and response.in_progress as soon as it accepts the
   * request, before the prefill: the first chunk of output (which frees the prefill in the ledger and times TTFT) is
   * the first other event. Before, the preamble's chunk was taken for it.
   */
  @Test
  void aStreamedResponsesAnswersOutputBeginsAfterItsPreamble() {
    ObserverStream obs = routedAndObserved();
    obs.onNext(responseBody("event: response.created\ndata: {\"type\":\"response.created\"}\n\n", false));
    obs.onNext(responseBody("event: response.in_progress\ndata: {}\n\nevent: response.out", false));
    obs.onNext(responseBody("put_item.added\ndata: {}\n\n", false));
    obs.onNext(responseBody("event: response.completed\ndata: {}\n\n", true));
    assertThat(events).containsExactly("completed", "body first=false eos=false", "body first=false eos=false",
        "body first=true eos=false", "body first=false eos=true", "end aborted=false", "completed");
  }

  /** A completions request routed in BUFFERED mode, with x-request-id req-1. */
  RequestStream routed() {
    RequestStream s = stream(1 << 20);
    s.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/completions", false));
    s.onNext(body(BODY, true));
    return s;
  }

  /** A response observer stream, whose own messages back are not kept. */
  ObserverStream observer() {
    return new ObserverStream(RequestStreamTest.collecting(new ArrayList<>()), inFlight, listener, 1);
  }

  /**
   * A routing filter that also asks for the response phases (response_header_mode left at its default, SEND) next to
   * the observer (ExtProcStreamPropertyTest found it): the routing stream's take-back failed, the observer had the
   * decision, and both followed the response, each ending the request (two ends, two health reports of its status,
   * its chunks fed twice to the usage scanner from two threads at once). The routing stream now answers Envoy and
   * leaves the response to the observer.
   */
  @Test
  void responsePhasesOnTheRoutingStreamAreLeftToTheObserverThatClaimedThem() {
    RequestStream s = routed();
    ObserverStream obs = observer();
    HeaderMap.Builder h = HeaderMap.newBuilder().addHeaders(HeaderValue.newBuilder().setKey(":status")
        .setRawValue(ByteString.copyFromUtf8("200")));
    ProcessingRequest responseHeaders = ProcessingRequest.newBuilder()
        .setResponseHeaders(HttpHeaders.newBuilder().setHeaders(h)).build();
    obs.onNext(responseHeaders.toBuilder().setMetadataContext(io.envoyproxy.envoy.config.core.v3.Metadata.newBuilder()
        .putFilterMetadata("envoy.lb", com.google.protobuf.Struct.newBuilder().putFields("x-kvrouter-decision",
            com.google.protobuf.Value.newBuilder().setStringValue("req-1").build()).build())).build());
    s.onNext(responseHeaders);
    s.onNext(responseBody("{\"usage\":{}}", true));
    obs.onNext(responseBody("{\"usage\":{}}", true));
    s.onCompleted();
    assertThat(events).containsExactly("body first=true eos=true", "end aborted=false", "completed");
    assertThat(sent).as("Envoy's answers").extracting(ProcessingResponse::getResponseCase).containsExactly(
        ProcessingResponse.ResponseCase.REQUEST_HEADERS, ProcessingResponse.ResponseCase.REQUEST_BODY,
        ProcessingResponse.ResponseCase.RESPONSE_HEADERS, ProcessingResponse.ResponseCase.RESPONSE_BODY);
  }

  /**
   * A client that sends its next request with the same x-request-id while the first still streams: the first's
   * observer has claimed it, so the id is free and the second registers under it. When the first's client then left,
   * its routing stream claimed by id and took the second's decision: the first was ended twice (here and by its
   * observer) and the second never. A routing stream now claims only its own exchange.
   */
  @Test
  void aRoutingStreamTakesBackOnlyItsOwnDecisionWhenItsIdIsReused() {
    RequestStream first = routed();
    ObserverStream obs = observer();
    HeaderMap.Builder h = HeaderMap.newBuilder().addHeaders(HeaderValue.newBuilder().setKey("x-kvrouter-decision")
        .setRawValue(ByteString.copyFromUtf8("req-1")));
    obs.onNext(ProcessingRequest.newBuilder().setRequestHeaders(HttpHeaders.newBuilder().setHeaders(h)).build());
    routed();
    assertThat(decided).extracting(dev.kvrouter.extproc.routing.Decision::id).containsExactly("req-1", "req-1");

    first.onError(new io.grpc.StatusRuntimeException(io.grpc.Status.CANCELLED));
    assertThat(events).as("the first's end is its observer's").isEmpty();
    assertThat(inFlight.pending()).as("the second's, for its own observer").isEqualTo(1);
    obs.onError(new io.grpc.StatusRuntimeException(io.grpc.Status.CANCELLED));
    assertThat(events).containsExactly("end aborted=true");
  }

  @Test
  void theObserverClaimsByTheDecisionIdEnvoyForwardsInMetadata() {
    RequestStream s = stream(1 << 20);
    s.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/completions", false));
    s.onNext(body(BODY, true));
    // what the routing stream told Envoy is what Envoy forwards to the observer filter
    var metadata = sent.get(1).getDynamicMetadata();
    s.onCompleted();
    assertThat(inFlight.pending()).as("routed, waiting for its observer").isEqualTo(1);
    ObserverStream obs = new ObserverStream(out, inFlight, listener, 1);
    obs.onNext(ProcessingRequest.newBuilder().setMetadataContext(io.envoyproxy.envoy.config.core.v3.Metadata
            .newBuilder().putAllFilterMetadata(metadata.getFieldsMap().entrySet().stream().collect(
                java.util.stream.Collectors.toMap(java.util.Map.Entry::getKey, e -> e.getValue().getStructValue()))))
        .setResponseBody(io.envoyproxy.envoy.service.ext_proc.v3.HttpBody.newBuilder()
            .setBody(ByteString.copyFromUtf8("{}")).setEndOfStream(true))
        .build());
    assertThat(events).containsExactly("completed", "body first=true eos=true", "end aborted=false", "completed");
    assertThat(inFlight.claimed()).isEqualTo(1);
    assertThat(inFlight.pending()).isZero();
  }

  @Test
  void aClientGoneBeforeTheObserverClaimedIsEndedByTheRoutingStream() {
    RequestStream s = stream(1 << 20);
    s.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/completions", false));
    s.onNext(body(BODY, true));
    s.onError(new io.grpc.StatusRuntimeException(io.grpc.Status.CANCELLED));
    assertThat(events).containsExactly("end aborted=true");
    ObserverStream late = new ObserverStream(out, inFlight, listener, 1);
    HeaderMap.Builder h = HeaderMap.newBuilder().addHeaders(HeaderValue.newBuilder().setKey("x-kvrouter-decision")
        .setRawValue(ByteString.copyFromUtf8("req-1")));
    late.onNext(ProcessingRequest.newBuilder().setRequestHeaders(HttpHeaders.newBuilder().setHeaders(h)).build());
    // nothing left to follow: the late observer closes at once instead of idling until Envoy's deferred close
    assertThat(events).containsExactly("end aborted=true", "completed");
    late.onError(new io.grpc.StatusRuntimeException(io.grpc.Status.CANCELLED));
    assertThat(events).containsExactly("end aborted=true", "completed"); // ended once, not twice
  }

  /** The response observer of decision req-1 as Envoy opens it when the response starts. */
  ObserverStream observer(int truthCheckEvery) {
    ObserverStream obs = new ObserverStream(out, inFlight, listener, truthCheckEvery);
    HeaderMap.Builder h = HeaderMap.newBuilder().addHeaders(HeaderValue.newBuilder().setKey("x-kvrouter-decision")
        .setRawValue(ByteString.copyFromUtf8("req-1")));
    obs.onNext(ProcessingRequest.newBuilder().setRequestHeaders(HttpHeaders.newBuilder().setHeaders(h)).build());
    return obs;
  }

  RequestStream routed(String body) {
    RequestStream s = stream(1 << 20);
    s.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/completions", false));
    s.onNext(body(body, true));
    return s;
  }

  @Test
  void aStreamedResponseOutsideTheSampleIsLeftAfterItsFirstChunkAndEndedByTheRoutingStream() {
    RequestStream s = routed(BODY);
    ObserverStream obs = observer(0);
    obs.onNext(responseBody("data: 1\n\n", false));
    // the observer closes its stream: Envoy stops sending it the response's chunks
    assertThat(events).containsExactly("body first=true eos=false", "completed");
    assertThat(inFlight.left()).isEqualTo(1);
    obs.onNext(responseBody("data: 2\n\n", false)); // sent before Envoy saw the close
    obs.onCompleted();
    assertThat(events).as("not over yet: the response still streams").hasSize(2);
    s.onCompleted(); // the routing filter's stream closes when the HTTP exchange is over
    assertThat(events).containsExactly("body first=true eos=false", "completed", "observer left",
        "end aborted=false", "completed");
    assertThat(inFlight.observerMessages()).isEqualTo(3);
  }

  @Test
  void aClientGoneAfterTheObserverLeftEndsAborted() {
    RequestStream s = routed(BODY);
    ObserverStream obs = observer(0);
    obs.onNext(responseBody("data: 1\n\n", false));
    s.onError(new io.grpc.StatusRuntimeException(io.grpc.Status.CANCELLED));
    assertThat(events).containsExactly("body first=true eos=false", "completed", "observer left",
        "end aborted=true");
  }

  @Test
  void whenEnvoyClosedTheRoutingStreamBeforeTheResponseTheObserverFollowsItToTheEnd() {
    // an Envoy config whose routing filter asks for nothing of the response closes its stream after the request
    // phases: its close says nothing about the end, so the observer must not leave
    RequestStream s = routed(BODY);
    s.onCompleted();
    ObserverStream obs = observer(0);
    obs.onNext(responseBody("data: 1\n\n", false));
    obs.onNext(responseBody("data: [DONE]\n\n", true));
    assertThat(events).containsExactly("completed", "body first=true eos=false", "body first=false eos=true",
        "end aborted=false", "completed");
    assertThat(inFlight.left()).isZero();
    assertThat(inFlight.followedForTheEnd()).as("counted").isEqualTo(1);
  }

  @Test
  void nonStreamedResponsesAndTheSampledStreamsAreFollowedToTheirEnd() {
    RequestStream s = routed("{\"model\":\"m\",\"prompt\":\"hello\"}");
    ObserverStream obs = observer(0);
    obs.onNext(responseBody("{\"choices\":", false)); // a large JSON answer may come in pieces
    obs.onNext(responseBody("[]}", true));
    s.onCompleted();
    assertThat(events).containsExactly("body first=true eos=false", "body first=false eos=true",
        "end aborted=false", "completed", "completed");
    events.clear();
    RequestStream streamed = routed(BODY);
    ObserverStream sampled = observer(1);
    sampled.onNext(responseBody("data: 1\n\n", false));
    sampled.onNext(responseBody("data: [DONE]\n\n", true));
    streamed.onCompleted();
    assertThat(events).containsExactly("body first=true eos=false", "body first=false eos=true",
        "end aborted=false", "completed", "completed");
    assertThat(inFlight.left()).isZero();
    assertThat(inFlight.followedForTheEnd()).as("followed by choice, not for want of a routing stream").isZero();
  }

  @Test
  void inferencePathsAreRecognisedExactly() {
    assertThat(RequestStream.inferenceKind("POST", "/v1/completions?x=1")).isNotNull();
    assertThat(RequestStream.inferenceKind("POST", "/v1/chat/completions/")).isNotNull();
    assertThat(RequestStream.inferenceKind("GET", "/v1/completions")).isNull();
    assertThat(RequestStream.inferenceKind("POST", "/v1/completionsx")).isNull();
    assertThat(RequestStream.inferenceKind("POST", "/v1/embeddings")).isNull();
    assertThat(RequestStream.inferenceKind("POST", "/v1/messages")).isEqualTo(InferenceRequest.Kind.MESSAGES);
    assertThat(RequestStream.inferenceKind("POST", "/v1/messages/count_tokens")).isNull();
    // read as the engine reads them: percent-decoded once, repeated slashes merged
    assertThat(RequestStream.inferenceKind("POST", "/v1/chat/%63ompletions")).isNotNull();
    assertThat(RequestStream.inferenceKind("POST", "/v1%2Fcompletions")).isNotNull();
    assertThat(RequestStream.inferenceKind("POST", "//v1///completions#f")).isNotNull();
    assertThat(RequestStream.inferenceKind("POST", "/v1/chat/%2563ompletions")).isNull();
    assertThat(RequestStream.inferenceKind("POST", "/v1/completions%")).isNull();
    assertThat(RequestStream.inferenceKind("POST", "/v1/completions%c3")).isNull();
    assertThat(ExtProcOptions.passThroughPathError("/tokenize")).isNull();
    assertThat(ExtProcOptions.passThroughPathError("/v1/chat/completions")).contains("routed");
    assertThat(ExtProcOptions.passThroughPathError("/tokenize/")).contains("as the router compares it");
    assertThat(ExtProcOptions.passThroughPathError("tokenize")).contains("starting with /");
  }

  @Test
  void noEligibleWorkerGets503AndUnservedModelGets404() {
    registry.replace(List.of(Worker.simple("a", "10.0.0.1", 8000, "m").withDraining(true)));
    RequestStream s = stream(1 << 20);
    s.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/completions", false));
    s.onNext(body(BODY, true));
    assertThat(sent.get(1).getImmediateResponse().getStatus().getCodeValue()).isEqualTo(503);
    RequestStream other = stream(1 << 20);
    other.onNext(headers(BodySendMode.BUFFERED, "POST", "/v1/completions", false));
    other.onNext(body("{\"model\":\"other\",\"prompt\":\"x\"}", true));
    assertThat(sent.get(3).getImmediateResponse().getStatus().getCodeValue()).isEqualTo(404);
    assertThat(refused).as("the router's decisions, counted as decisions, not as refusals").isEmpty();
  }
}
