package dev.kvrouter.extproc.request;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvrouter.extproc.model.ModelRegistry;
import dev.kvrouter.extproc.model.ModelResourcesLoader;
import dev.kvrouter.extproc.model.ModelSpec;
import dev.kvrouter.extproc.request.InferenceRequest.Kind;
import dev.kvrouter.extproc.tenancy.SaltKey;
import dev.kvrouter.extproc.tenancy.TenantIsolation;
import dev.kvrouter.index.block.CacheNamespace;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class RequestPreparerTest {

  final TenantIsolation tenancy = new TenantIsolation(SaltKey.hmac("0123456789abcdef-secret".getBytes()), false);
  final ModelRegistry models = ModelRegistry.create(List.of(
      new ModelSpec("base", null, null, null, null, List.of("lora-a"), null, null),
      new ModelSpec("open", null, null, null, null, null, new ModelSpec.Tenancy(true), null),
      new ModelSpec("old-vllm", null, null, null, null, null, null, null, null, "merge")),
      Path.of("."), ModelResourcesLoader.NONE, Runnable::run, System::nanoTime, new SimpleMeterRegistry());
  final RequestPreparer preparer = new RequestPreparer(models, tenancy, System::nanoTime);

  PreparedRequest prepare(String json, String tenant) throws Exception {
    byte[] b = json.getBytes(StandardCharsets.UTF_8);
    return preparer.prepare(Kind.CHAT, b, b.length, tenant);
  }

  static String body(String model, String extra) {
    return "{\"model\":\"" + model + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" + extra + "}";
  }

  @Test
  void aTenantsRequestGetsItsOwnNamespaceAndARewrittenBody() throws Exception {
    PreparedRequest p = prepare(body("lora-a", ",\"stream\":true"), "acme");
    String salt = tenancy.effectiveSalt(null, "acme", null);
    assertThat(p.scope().namespace()).isEqualTo(new CacheNamespace("base", "lora-a", salt));
    assertThat(p.scope().tenantHash()).isEqualTo(tenancy.tenantHash("acme"));
    assertThat(p.scope().fallback()).isEqualTo("no_tokenizer");
    assertThat(p.rewritesBody()).isTrue();
    String original = body("lora-a", ",\"stream\":true");
    byte[] out = p.rewriteBody(original.getBytes(StandardCharsets.UTF_8), original.length());
    assertThat(new String(out, StandardCharsets.UTF_8))
        .isEqualTo("{\"cache_salt\":\"" + salt + "\"," + original.substring(1));
    assertThat(p.parseNanos()).isPositive();
  }

  /**
   * A salt is keyed by its UTF-8 bytes, and an unpaired surrogate (JSON lets a client escape one) has none: it was
   * written as "?", so a client's "s\\ud800" shared the partition of "s?" and "s\\udfff", for a tenant as without one.
   */
  @Test
  void aSaltThatIsNotUnicodeTextIsRefusedRatherThanMergedWithAnother() throws Exception {
    for (String tenant : new String[] {null, "acme"}) {
      CacheNamespace plain = prepare(body("base", ",\"cache_salt\":\"s?\""), tenant).scope().namespace();
      assertThat(plain.cacheSalt()).startsWith("kvr1:");
      for (String odd : new String[] {"s\\ud800", "s\\udfff", "\\ude00s\\ud83d"}) {
        assertThatThrownBy(() -> prepare(body("base", ",\"cache_salt\":\"" + odd + "\""), tenant))
            .as(odd).isInstanceOf(RequestBodyParser.BadRequest.class)
            .satisfies(e -> assertThat(((RequestBodyParser.BadRequest) e).error().param()).isEqualTo("cache_salt"));
      }
    }
    assertThat(prepare(body("base", ",\"cache_salt\":\"s\\ud83d\\ude00\""), null).request().cacheSalt())
        .as("a pair is one character").isEqualTo("s\ud83d\ude00");
  }

  /** A model configured with its workers' inline-system placement is converted so, whatever the probe says. */
  @Test
  void aConfiguredInlineSystemPlacementIsUsed() throws Exception {
    String json = "{\"model\":\"%s\",\"max_tokens\":8,\"system\":\"S\",\"messages\":[{\"role\":\"user\","
        + "\"content\":\"a\"},{\"role\":\"system\",\"content\":\"N\"}]}";
    byte[] merged = String.format(json, "old-vllm").getBytes(StandardCharsets.UTF_8);
    assertThat(preparer.prepare(Kind.MESSAGES, merged, merged.length, null).request().chat().messages())
        .containsExactly(Map.of("role", "system", "content", "SN"), Map.of("role", "user", "content", "a"));
    // no resources loaded here: the default, as vLLM's probe decides for a template that marks system turns
    byte[] probed = String.format(json, "base").getBytes(StandardCharsets.UTF_8);
    assertThat(preparer.prepare(Kind.MESSAGES, probed, probed.length, null).request().chat().messages())
        .extracting(m -> m.get("role")).containsExactly("system", "user", "system");
  }

  /**
   * A Messages body needs its model while it is parsed (the inline-system dialect) and after (the namespace): one
   * resolution serves both, so its fallback is counted once, as a chat request's is, and the dialect and the scope
   * come from the same state of a model whose resources are loading.
   */
  @Test
  void aMessagesRequestResolvesItsModelOnce() throws Exception {
    SimpleMeterRegistry meters = new SimpleMeterRegistry();
    ModelRegistry counted = ModelRegistry.create(List.of(new ModelSpec("base", null, null, null, null, null, null,
        null)), Path.of("."), ModelResourcesLoader.NONE, Runnable::run, System::nanoTime, meters);
    RequestPreparer p = new RequestPreparer(counted, tenancy, System::nanoTime);
    byte[] messages = "{\"model\":\"who/knows\",\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}"
        .getBytes(StandardCharsets.UTF_8);
    byte[] chat = body("who/knows", "").getBytes(StandardCharsets.UTF_8);
    for (int i = 0; i < 3; i++) {
      assertThat(p.prepare(Kind.MESSAGES, messages, messages.length, null).scope().fallback())
          .isEqualTo("unknown_model");
    }
    double afterMessages = meters.get("kvrouter.model.fallback").tag("reason", "unknown_model").counter().count();
    p.prepare(Kind.CHAT, chat, chat.length, null);
    double afterChat = meters.get("kvrouter.model.fallback").tag("reason", "unknown_model").counter().count();
    assertThat(afterMessages).as("three Messages requests").isEqualTo(3.0);
    assertThat(afterChat - afterMessages).as("a chat request").isEqualTo(1.0);
  }

  @Test
  void withoutTenantOrSaltNothingIsRewritten() throws Exception {
    PreparedRequest p = prepare(body("base", ""), null);
    assertThat(p.scope().namespace()).isEqualTo(CacheNamespace.of("base"));
    assertThat(p.scope().tenantHash()).isNull();
    assertThat(p.rewritesBody()).isFalse();
  }

  @Test
  void aClientSaltIsRederivedWithAndWithoutTenant() throws Exception {
    PreparedRequest alone = prepare(body("base", ",\"cache_salt\":\"mine\""), null);
    assertThat(alone.scope().effectiveSalt()).isEqualTo(tenancy.effectiveSalt(null, null, "mine"));
    assertThat(alone.rewritesBody()).isTrue();
    PreparedRequest tenant = prepare(body("base", ",\"cache_salt\":\"mine\""), "acme");
    assertThat(tenant.scope().effectiveSalt()).isEqualTo(tenancy.effectiveSalt(null, "acme", "mine"))
        .isNotEqualTo(alone.scope().effectiveSalt());
  }

  @Test
  void aModelThatSharesAcrossTenantsIgnoresTheTenant() throws Exception {
    PreparedRequest a = prepare(body("open", ""), "acme");
    PreparedRequest b = prepare(body("open", ""), "globex");
    assertThat(a.scope().namespace()).isEqualTo(b.scope().namespace()).isEqualTo(CacheNamespace.of("open"));
    assertThat(a.rewritesBody()).isFalse();
    assertThat(a.scope().tenantHash()).isNotEqualTo(b.scope().tenantHash()); // still recorded, pseudonymously
  }

  @Test
  void unknownModelsKeepTheirNameAndRouteByLoad() throws Exception {
    PreparedRequest p = prepare(body("who/knows", ""), "acme");
    assertThat(p.scope().namespace().model()).isEqualTo("who/knows");
    assertThat(p.scope().fallback()).isEqualTo("unknown_model");
    assertThat(p.rewritesBody()).as("isolation applies to unknown models too").isTrue();
  }

  @Test
  void aNonUtf8BodyThatNeedsASaltIsRefusedRatherThanForwardedUnsalted() throws Exception {
    byte[] b = body("base", "").getBytes(StandardCharsets.UTF_16BE);
    assertThat(preparer.prepare(Kind.CHAT, b, b.length, null).rewritesBody()).isFalse();
    assertThatThrownBy(() -> preparer.prepare(Kind.CHAT, b, b.length, "acme"))
        .isInstanceOf(RequestBodyParser.BadRequest.class).hasMessageContaining("UTF-8");
  }

  @Test
  void theTenantNeverAppearsInTheScope() throws Exception {
    PreparedRequest p = prepare(body("base", ""), "tenant-secret-name");
    assertThat(p.scope().toString()).doesNotContain("tenant-secret-name");
    assertThat(Map.of("scope", p.scope()).toString()).doesNotContain("tenant-secret-name");
  }
}
