package dev.kvrouter.extproc.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.protobuf.ByteString;
import dev.kvrouter.extproc.routing.RoundRobinPolicy;
import dev.kvrouter.extproc.routing.Router;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerRegistry;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ImmediateResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Every answer the router gives itself, through the ext_proc immediate response: in Anthropic's shape on the Messages
 * API (what Claude Code and the Anthropic SDKs parse), in OpenAI's on the OpenAI paths, with the same status.
 */
class RequestStreamErrorShapeTest {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String MESSAGES_BODY =
      "{\"model\":\"m\",\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
  private static final String CHAT_BODY = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";

  final List<ProcessingResponse> sent = new ArrayList<>();
  WorkerRegistry registry;
  Router router;

  @BeforeEach
  void fleet() {
    registry = new WorkerRegistry();
    registry.replace(List.of(Worker.simple("a", "10.0.0.1", 8000, "m")));
    router = new Router(registry, new RoundRobinPolicy(), Map.of(), System::nanoTime);
  }

  RequestStream stream(int maxBody, Set<String> passThrough) {
    ExtProcOptions o = ExtProcOptions.defaults();
    o = new ExtProcOptions(o.bind(), 0, maxBody, "x-tenant-id", BodySendMode.BUFFERED, BodySendMode.STREAMED, 1, 1,
        1 << 20, 1, passThrough);
    return new RequestStream(RequestStreamTest.collecting(sent), RequestPath.of(router, null), o, Runnable::run,
        new InFlight(100, java.time.Duration.ofMinutes(1)));
  }

  RequestStream stream() {
    return stream(1 << 20, Set.copyOf(ExtProcOptions.DEFAULT_TENANT_PASS_THROUGH_PATHS));
  }

  /** The router's own answer to one request: its headers (with a tenant, or raw tenant bytes) and body. */
  ImmediateResponse answer(RequestStream s, String path, Object tenant, String body) {
    sent.clear();
    ProcessingRequest h = RequestStreamTenancyTest.headers(BodySendMode.BUFFERED, "POST", path,
        tenant instanceof String t ? t : null);
    if (tenant instanceof byte[] raw) {
      HeaderMap.Builder map = h.getRequestHeaders().getHeaders().toBuilder()
          .addHeaders(HeaderValue.newBuilder().setKey("x-tenant-id").setRawValue(ByteString.copyFrom(raw)));
      h = h.toBuilder().setRequestHeaders(h.getRequestHeaders().toBuilder().setHeaders(map)
          .setEndOfStream(body == null)).build();
    } else if (body == null) {
      h = h.toBuilder().setRequestHeaders(h.getRequestHeaders().toBuilder().setEndOfStream(true)).build();
    }
    s.onNext(h);
    if (body != null && !sent.get(sent.size() - 1).hasImmediateResponse()) {
      s.onNext(RequestStreamTest.body(body, true));
    }
    ProcessingResponse last = sent.get(sent.size() - 1);
    assertThat(last.hasImmediateResponse()).as("answered by the router: %s", path).isTrue();
    return last.getImmediateResponse();
  }

  /** The same refusal, asked on the Messages path and on an OpenAI one. */
  record Case(String what, int status, String anthropicType, Consumer<RequestStreamErrorShapeTest> setUp,
      String messagesPath, String openAiPath, Object tenant, String messagesBody, String openAiBody) {}

  static final byte[] LATIN1 = {'c', 'a', 'f', (byte) 0xe9};

  static List<Case> cases() {
    return List.of(
        new Case("bad JSON", 400, "BadRequestError", t -> {}, "/v1/messages", "/v1/chat/completions", null,
            "{\"model\": \"m\", \"messages\": [", "{\"model\": \"m\", \"messages\": ["),
        new Case("bad field", 400, "BadRequestError", t -> {}, "/v1/messages", "/v1/chat/completions", null,
            "{\"model\":\"m\",\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":5}]}",
            "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":5}]}"),
        new Case("no body", 400, "BadRequestError", t -> {}, "/v1/messages", "/v1/chat/completions", null, null,
            null),
        new Case("tenant not UTF-8", 400, "BadRequestError", t -> {}, "/v1/messages", "/v1/chat/completions",
            LATIN1, MESSAGES_BODY, CHAT_BODY),
        new Case("unknown model", 404, "NotFoundError", t -> {}, "/v1/messages", "/v1/chat/completions", null,
            MESSAGES_BODY.replace("\"m\"", "\"other\""), CHAT_BODY.replace("\"m\"", "\"other\"")),
        new Case("tenant on an unrouted path", 404, "NotFoundError", t -> {}, "/v1/messages",
            "/v1/embeddings", "acme", MESSAGES_BODY, CHAT_BODY),
        new Case("no eligible worker", 503, "Service Unavailable",
            t -> t.registry.replace(List.of(Worker.simple("a", "10.0.0.1", 8000, "m").withDraining(true))),
            "/v1/messages", "/v1/chat/completions", null, MESSAGES_BODY, CHAT_BODY));
  }

  @Test
  void everyRefusalOnTheMessagesApiIsAnthropicShapedAndOpenAiPathsKeepOpenAisShape() throws Exception {
    for (Case c : cases()) {
      fleet();
      c.setUp().accept(this);
      ImmediateResponse anthropic = answer(stream(), c.messagesPath(), c.tenant(), c.messagesBody());
      assertThat(anthropic.getStatus().getCodeValue()).as(c.what()).isEqualTo(c.status());
      assertAnthropic(anthropic, c.anthropicType(), c.what());

      ImmediateResponse openAi = answer(stream(), c.openAiPath(), c.tenant(), c.openAiBody());
      assertThat(openAi.getStatus().getCodeValue()).as(c.what()).isEqualTo(c.status());
      JsonNode error = JSON.readTree(openAi.getBody().toStringUtf8()).path("error");
      assertThat(error.path("type").asText()).as(c.what()).isNotEmpty().isNotEqualTo(c.anthropicType());
      assertThat(error.has("code")).as(c.what()).isTrue();
      assertThat(openAi.getDetails()).as("Envoy's details name the router's code alike").isEqualTo(
          anthropic.getDetails());
    }
  }

  @Test
  void aBodyOverTheLimitIs413InEitherShape() throws Exception {
    ImmediateResponse anthropic = answer(stream(10, Set.of()), "/v1/messages", null, MESSAGES_BODY);
    assertThat(anthropic.getStatus().getCodeValue()).isEqualTo(413);
    assertAnthropic(anthropic, "Request Entity Too Large", "413");
    ImmediateResponse openAi = answer(stream(10, Set.of()), "/v1/chat/completions", null, CHAT_BODY);
    assertThat(openAi.getStatus().getCodeValue()).isEqualTo(413);
    assertThat(JSON.readTree(openAi.getBody().toStringUtf8()).path("error").path("code").asText())
        .isEqualTo("request_too_large");
  }

  /** count_tokens is refused for a tenant only when the operator removes it from the pass-through paths. */
  @Test
  void aTenantsCountTokensRefusedByConfigurationIsAnthropicShaped() throws Exception {
    ImmediateResponse r = answer(stream(1 << 20, Set.of("/tokenize")), "/v1/messages/count_tokens", "acme",
        MESSAGES_BODY);
    assertThat(r.getStatus().getCodeValue()).isEqualTo(404);
    assertAnthropic(r, "NotFoundError", "count_tokens");
    // a path spelled otherwise is read as the engine reads it
    ImmediateResponse spelled = answer(stream(1 << 20, Set.of()), "//v1/messages/?beta=true", "acme",
        MESSAGES_BODY);
    assertAnthropic(spelled, "NotFoundError", "spelled");
  }

  /** What vLLM's request model refuses costs no routing decision: the client gets the worker's 400 at once. */
  @Test
  void aBodyVllmRefusesIsAnsweredWithoutADecision() throws Exception {
    List<String> decided = new ArrayList<>();
    RequestStream s = new RequestStream(RequestStreamTest.collecting(sent), RequestPath.of(router,
        new RequestListener() {
          @Override
          public void onDecision(dev.kvrouter.extproc.routing.Decision d) {
            decided.add(d.id());
          }
        }), ExtProcOptions.defaults(), Runnable::run, new InFlight(100, java.time.Duration.ofMinutes(1)));
    ImmediateResponse r = answer(s, "/v1/messages", null,
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
            + "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024}}");
    assertThat(r.getStatus().getCodeValue()).isEqualTo(400);
    assertAnthropic(r, "BadRequestError", "no max_tokens");
    assertThat(JSON.readTree(r.getBody().toStringUtf8()).path("error").path("message").asText())
        .contains("max_tokens");
    assertThat(decided).isEmpty();
  }

  private static void assertAnthropic(ImmediateResponse r, String type, String what) throws Exception {
    JsonNode body = JSON.readTree(r.getBody().toStringUtf8());
    assertThat(body.path("type").asText()).as(what).isEqualTo("error");
    assertThat(body.path("error").path("type").asText()).as(what).isEqualTo(type);
    assertThat(body.path("error").path("message").asText()).as(what).isNotEmpty();
    assertThat(body.has("param") || body.path("error").has("code")).as(what).isFalse();
    assertThat(r.getHeaders().getSetHeadersList()).as(what)
        .anySatisfy(h -> assertThat(h.getHeader().getKey()).isEqualTo("content-type"));
  }
}
