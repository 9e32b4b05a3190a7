package dev.kvrouter.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.examples.fake.FakeWorker;
import dev.kvrouter.extproc.tenancy.SaltKey;
import dev.kvrouter.extproc.tenancy.TenantIsolation;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Tenant isolation through real Envoy: the worker receives the body with {@code cache_salt} set to the tenant's
 * effective salt and every other byte as the client sent it.
 *
 * <p>The shipped Envoy configs strip {@code x-tenant-id} from clients (only an authentication filter placed after
 * the early header mutation may set it). This test stands in for that filter with Envoy's {@code header_mutation}
 * HTTP filter, inserted by text substitution into a test-only copy of the shipped config just before ext_proc: it
 * copies the test's own {@code x-test-tenant} header into {@code x-tenant-id}, as a {@code jwt_authn}
 * {@code claim_to_headers} rule would copy a claim. The shipped files stay untouched.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class TenantIsolationContract {

  static final ObjectMapper JSON = new ObjectMapper();
  static final String SECRET = "e2e-secret-0123456789abcdef";
  static final String AUTH_FILTER = String.join("\n",
      "          - name: envoy.filters.http.header_mutation",
      "            typed_config:",
      "              \"@type\": type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation",
      "              mutations:",
      "                request_mutations:",
      "                - append:",
      "                    header: {key: x-tenant-id, value: \"%REQ(x-test-tenant)%\"}",
      "                    append_action: OVERWRITE_IF_EXISTS_OR_ADD",
      "                - remove: x-test-tenant",
      "");
  static final String EXT_PROC_FILTER = "          - name: envoy.filters.http.ext_proc\n";

  final TenantIsolation tenancy = new TenantIsolation(SaltKey.hmac(SECRET.getBytes(StandardCharsets.UTF_8)), false);
  Stack stack;

  abstract String envoyConfig();

  static String withAuthFilter(String envoyYaml) {
    assertThat(envoyYaml).contains(EXT_PROC_FILTER);
    return envoyYaml.replace(EXT_PROC_FILTER, AUTH_FILTER + EXT_PROC_FILTER);
  }

  @BeforeAll
  void startStack() throws Exception {
    stack = new Stack(envoyConfig(), 2, 0, new Stack.Options("tenancy: {secret_file: tenant.secret}\n",
        Map.of("tenant.secret", SECRET + "\n"), TenantIsolationContract::withAuthFilter));
  }

  @AfterAll
  void stopStack() {
    if (stack != null) {
      stack.close();
    }
  }

  /** Sends a chat request as {@code tenant} (null: none) and returns the exact body the worker received. */
  String forwarded(String body, String tenant) throws Exception {
    HttpResponse<String> r = stack.post("/v1/chat/completions", body,
        tenant == null ? Map.of() : Map.of("x-test-tenant", tenant));
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    FakeWorker w = stack.workers.get(r.headers().firstValue(FakeWorker.SERVED_BY).orElseThrow());
    assertThat(w.lastHeaders().has("x-test-tenant")).isFalse();
    return new String(w.lastBody(), StandardCharsets.UTF_8);
  }

  static String body(String salt, String content) {
    return "{ \"model\" :\"" + Stack.MODEL + "\",\n\t\"messages\": [ {\"role\":\"user\", \"content\": \"" + content
        + "\"} ],\"max_tokens\": 2" + (salt == null ? "" : " , \"cache_salt\" : \"" + salt + "\"") + " }";
  }

  @Test
  void aTenantsRequestReachesTheWorkerWithItsEffectiveSaltAndOtherwiseByteIdentical() throws Exception {
    String original = body(null, "héllo wörld ✓ 😀");
    String got = forwarded(original, "acme");
    String salt = tenancy.effectiveSalt(null, "acme", null);
    assertThat(got).isEqualTo("{\"cache_salt\":\"" + salt + "\"," + original.substring(1));
  }

  @Test
  void aChunkedRequestIsRewrittenWholeAndReachesTheWorkerIntact() throws Exception {
    // No content-length from the client: in BUFFERED mode the router sets one for the rewritten body, beside the
    // client's transfer-encoding; what the worker reads must still be exactly the salted body, and the answer 200.
    String original = body(null, "sent in chunks");
    String request = "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        + "x-test-tenant: acme\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
    byte[] bytes = original.getBytes(StandardCharsets.UTF_8);
    StringBuilder chunks = new StringBuilder(request);
    for (int off = 0; off < bytes.length; off += 40) {
      String part = new String(bytes, off, Math.min(40, bytes.length - off), StandardCharsets.UTF_8);
      chunks.append(Integer.toHexString(part.getBytes(StandardCharsets.UTF_8).length)).append("\r\n").append(part)
          .append("\r\n");
    }
    chunks.append("0\r\n\r\n");
    String response;
    try (java.net.Socket s = new java.net.Socket("127.0.0.1", stack.listenerPort)) {
      s.setSoTimeout(10_000);
      s.getOutputStream().write(chunks.toString().getBytes(StandardCharsets.UTF_8));
      response = new String(s.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    }
    assertThat(response).as(response).startsWith("HTTP/1.1 200");
    String served = response.toLowerCase(java.util.Locale.ROOT)
        .replaceAll("(?s).*" + FakeWorker.SERVED_BY.toLowerCase(java.util.Locale.ROOT) + ": (\\S+).*", "$1");
    String got = new String(stack.workers.get(served).lastBody(), StandardCharsets.UTF_8);
    assertThat(got).isEqualTo("{\"cache_salt\":\"" + tenancy.effectiveSalt(null, "acme", null) + "\","
        + original.substring(1));
  }

  @Test
  void aClientSaltIsReplacedInPlaceByTheTenantsDerivedSalt() throws Exception {
    String original = body("my-own-salt", "x".repeat(70_000)); // more than one streamed chunk
    String got = forwarded(original, "acme");
    assertThat(got).isEqualTo(original.replace("\"my-own-salt\"",
        "\"" + tenancy.effectiveSalt(null, "acme", "my-own-salt") + "\""));
  }

  @Test
  void twoTenantsGetDifferentSaltsAndOneTenantAlwaysTheSame() throws Exception {
    String a1 = salt(forwarded(body(null, "same prompt"), "acme"));
    String b = salt(forwarded(body(null, "same prompt"), "globex"));
    String a2 = salt(forwarded(body(null, "same prompt"), "acme"));
    assertThat(a1).isEqualTo(a2).startsWith(TenantIsolation.SALT_PREFIX).isNotEqualTo(b);
    assertThat(b).isEqualTo(tenancy.effectiveSalt(null, "globex", null));
  }

  @Test
  void withoutTenantOrSaltTheBodyIsForwardedUntouched() throws Exception {
    String original = body(null, "plain");
    assertThat(forwarded(original, null)).isEqualTo(original);
  }

  @Test
  void aTenantHeaderSentByTheClientIsStrippedBeforeTheRouterSeesIt() throws Exception {
    String original = body(null, "forged");
    HttpResponse<String> r = stack.post("/v1/chat/completions", original, Map.of("x-tenant-id", "acme"));
    assertThat(r.statusCode()).isEqualTo(200);
    FakeWorker w = stack.workers.get(r.headers().firstValue(FakeWorker.SERVED_BY).orElseThrow());
    assertThat(new String(w.lastBody(), StandardCharsets.UTF_8)).isEqualTo(original);
  }

  /**
   * The engine (uvicorn, and FakeWorker like it) percent-decodes the path, so a tenant could send chat to
   * {@code /v1/chat/%63ompletions} and keep a salt of its choosing if Envoy and the router read the raw path. The
   * shipped configs normalize it, and redirect an escaped slash to the plain path; the router decodes it as well.
   */
  @Test
  void aTenantsRequestOnAnEncodedPathStillGetsItsSalt() throws Exception {
    for (String path : new String[] {"/v1/chat/%63ompletions", "//v1//chat/completions"}) {
      HttpResponse<String> r = stack.post(path, body("client-picked-salt", "same prompt"),
          Map.of("x-test-tenant", "acme"));
      assertThat(r.statusCode()).as(path + ": " + r.body()).isEqualTo(200);
      FakeWorker w = stack.workers.get(r.headers().firstValue(FakeWorker.SERVED_BY).orElseThrow());
      assertThat(salt(new String(w.lastBody(), StandardCharsets.UTF_8)))
          .as("cache_salt the worker saw for tenant acme via " + path)
          .isEqualTo(tenancy.effectiveSalt(null, "acme", "client-picked-salt"));
    }
    HttpResponse<String> escapedSlash = stack.post("/v1/chat%2Fcompletions", body("client-picked-salt", "x"),
        Map.of("x-test-tenant", "acme"));
    assertThat(escapedSlash.statusCode()).as("Envoy redirects an escaped slash").isEqualTo(307);
    assertThat(escapedSlash.headers().firstValue("location").orElseThrow()).endsWith("/v1/chat/completions");
    assertThat(escapedSlash.headers().firstValue(FakeWorker.SERVED_BY)).isEmpty();
  }

  /**
   * The Responses API (vLLM serves it with chat's cache_salt) was refused for tenants as an endpoint the router did
   * not route; it is routed by load now, with the tenant's salt in the body the worker gets.
   */
  @Test
  void aTenantsResponsesRequestReachesTheWorkerWithItsSalt() throws Exception {
    HttpResponse<String> r = stack.post("/v1/responses", "{\"model\":\"" + Stack.MODEL + "\",\"input\":\"x\","
        + "\"cache_salt\":\"client-picked-salt\"}", Map.of("x-test-tenant", "acme"));
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    assertThat(r.headers().firstValue("x-kvrouter-decision")).as("routed by the router").isPresent();
    FakeWorker w = stack.workers.get(r.headers().firstValue(FakeWorker.SERVED_BY).orElseThrow());
    assertThat(salt(new String(w.lastBody(), StandardCharsets.UTF_8)))
        .isEqualTo(tenancy.effectiveSalt(null, "acme", "client-picked-salt"));
  }

  /** An engine endpoint the router does not route would reach the engine unsalted: refused for a tenant. */
  @Test
  void aTenantsPostToAnEndpointTheRouterDoesNotRouteIsRefused() throws Exception {
    HttpResponse<String> refused = stack.post("/v1/embeddings", body("client-picked-salt", "x"),
        Map.of("x-test-tenant", "acme"));
    assertThat(refused.statusCode()).isEqualTo(404);
    assertThat(JSON.readTree(refused.body()).path("error").path("code").asText()).isEqualTo("unknown_url");
    assertThat(refused.headers().firstValue(FakeWorker.SERVED_BY)).as("no worker reached").isEmpty();
    // without a tenant, and on a pass-through path, the engine answers (FakeWorker has neither endpoint: 404)
    for (Map<String, String> h : List.of(Map.<String, String>of(), Map.of("x-test-tenant", "acme"))) {
      String path = h.isEmpty() ? "/v1/embeddings" : "/tokenize";
      HttpResponse<String> passed = stack.post(path, "{}", h);
      assertThat(passed.headers().firstValue(FakeWorker.SERVED_BY)).as(path + " reaches a worker").isPresent();
    }
  }

  static String salt(String forwardedBody) throws Exception {
    JsonNode n = JSON.readTree(forwardedBody);
    return n.path("cache_salt").asText();
  }
}
