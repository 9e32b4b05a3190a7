package dev.kvrouter.dist;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvrouter.extproc.model.InlineSystemMode;
import dev.kvrouter.extproc.model.InvalidModelConfig;
import dev.kvrouter.extproc.model.ModelSpec;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The {@code models:} and {@code tenancy:} sections of kvrouter.yaml. */
class ModelsAndTenancyConfigTest {

  @TempDir
  Path dir;

  @Test
  void modelsParseWithDefaults() {
    KvrouterConfig c = KvrouterConfig.parse("""
        models:
          - name: Qwen/Qwen3-8B
            tokenizer: tok/qwen3
            adapters: [sql-lora, chat-lora]
            tenancy: {share_across_tenants: true}
          - name: plain
            block_size: 32
            preload: false
        tenancy: {share_across_tenants: true, secret_env: KVR_SECRET}
        """, "k.yaml");
    assertThat(c.models()).containsExactly(
        new ModelSpec("Qwen/Qwen3-8B", "tok/qwen3", null, null, 16, List.of("sql-lora", "chat-lora"),
            new ModelSpec.Tenancy(true), true),
        new ModelSpec("plain", null, null, null, 32, List.of(), null, false));
    assertThat(c.tenancy().shareAcrossTenants()).isTrue();
    assertThat(c.tenancy().secretEnv()).isEqualTo("KVR_SECRET");
    assertThat(KvrouterConfig.defaults().models()).isEmpty();
    assertThat(KvrouterConfig.defaults().tenancy().shareAcrossTenants()).isFalse();
  }

  /** A tenant header no request can carry would leave every tenant sharing one cache identity, silently. */
  @Test
  void theTenantHeaderMustBeAHeaderName() {
    assertThat(KvrouterConfig.parse("tenancy: {header: X-Org_ID.v2}", "k.yaml").tenancy().header())
        .isEqualTo("x-org_id.v2");
    for (String bad : List.of("'x tenant'", "'x-tenant:'", "':authority'", "''", "'x-tënant'")) {
      assertThatThrownBy(() -> KvrouterConfig.parse("tenancy: {header: " + bad + "}", "k.yaml"))
          .as(bad).isInstanceOf(KvrouterConfig.InvalidConfig.class)
          .hasMessageContaining("tenancy.header: ").hasMessageContaining("must be an HTTP header name");
    }
    assertThatThrownBy(() -> KvrouterConfig.parse("server: {bind: ''}", "k.yaml"))
        .hasMessageContaining("server.bind: must be an address");
  }

  @Test
  void tenantPassThroughPathsDefaultToTheTokenizerEndpointsAndAreValidated() {
    assertThat(KvrouterConfig.defaults().tenancy().passThroughPaths()).containsExactly("/tokenize", "/detokenize",
        "/v1/messages/count_tokens");
    assertThat(KvrouterConfig.parse("tenancy: {pass_through_paths: [/v1/embeddings]}", "k.yaml").tenancy()
        .passThroughPaths()).containsExactly("/v1/embeddings");
    assertThatThrownBy(() -> KvrouterConfig.parse("tenancy: {pass_through_paths: [/v1/responses]}", "k.yaml"))
        .hasMessageContaining("tenancy.pass_through_paths[0]: `/v1/responses` is routed");
    assertThat(KvrouterConfig.parse("tenancy: {pass_through_paths: []}", "k.yaml").tenancy().passThroughPaths())
        .isEmpty();
    assertThatThrownBy(() -> KvrouterConfig.parse(
        "tenancy: {pass_through_paths: [tokenize, /v1/chat/completions, '/to%6Benize', /tokenize/]}", "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .hasMessageContaining("k.yaml: tenancy.pass_through_paths[0]: must be a path starting with /")
        .hasMessageContaining("tenancy.pass_through_paths[1]: `/v1/chat/completions` is routed")
        .hasMessageContaining("tenancy.pass_through_paths[2]: `/to%6Benize` must be written as the router compares")
        .hasMessageContaining("tenancy.pass_through_paths[3]: `/tokenize/` must be written");
  }

  @Test
  void modelProblemsAreReportedWithTheRestOfTheConfig() {
    assertThatThrownBy(() -> KvrouterConfig.parse("""
        models:
          - {name: a, block_size: 0, adapters: [x]}
          - {name: x}
        tenancy: {secret_file: s, secret_env: S}
        limits: {max_body_bytes: 10}
        """, "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .hasMessageContaining("k.yaml: models[0].block_size: must be 1..8192")
        .hasMessageContaining("k.yaml: models[1].name: `x` is already declared at models[0].adapters[0]")
        .hasMessageContaining("k.yaml: tenancy: set secret_file or secret_env, not both")
        .hasMessageContaining("k.yaml: limits.max_body_bytes: must be >= 1024");
  }

  /** A model's inline-system placement follows its workers' --anthropic-inline-system, or vLLM before the probe. */
  @Test
  void messagesInlineSystemIsOneOfTheFourPlacements() {
    KvrouterConfig c = KvrouterConfig.parse("""
        models:
          - {name: a, messages_inline_system: merge}
          - {name: b, messages_inline_system: auto}
          - {name: c}
        """, "k.yaml");
    assertThat(c.models()).extracting(ModelSpec::inlineSystemOverride)
        .containsExactly(InlineSystemMode.MERGE, null, null);
    assertThatThrownBy(() -> KvrouterConfig.parse("models: [{name: a, messages_inline_system: hoist}]", "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .hasMessageContaining("k.yaml: models[0].messages_inline_system: must be auto, preserve, fold or merge, "
            + "was `hoist`");
  }

  @Test
  void multimodalExpansionsParseAndAreValidated() {
    KvrouterConfig c = KvrouterConfig.parse("""
        models:
          - name: google/gemma-3-27b-it
            tokenizer: tok/gemma3
            multimodal: {preset: gemma3}
          - name: llava-hf/llava-1.5-7b-hf
            tokenizer: tok/llava
            multimodal:
              image: {placeholder: "<image>", token: "<image>", count: 576}
        """, "k.yaml");
    assertThat(c.models().get(0).multimodal().expansions().get("image").replacement())
        .startsWith("\n\n<start_of_image><image_soft_token>").endsWith("<end_of_image>\n\n")
        .hasSize(2 + 16 + 256 * 18 + 14 + 2);
    assertThat(c.models().get(0).multimodal().resolved().mergeTokens()).hasSize(3);
    assertThat(c.models().get(1).multimodal().expansions().get("image").replacement()).isEqualTo("<image>".repeat(576));
    assertThat(c.models().get(1).multimodal().expansions()).containsOnlyKeys("image");
    assertThatThrownBy(() -> KvrouterConfig.parse("""
        models:
          - {name: a, tokenizer: t, multimodal: {preset: qwen2-vl}}
          - {name: b, tokenizer: t, multimodal: {preset: gemma3, image: {placeholder: x, token: y, count: 1}}}
          - {name: c, tokenizer: t, multimodal: {image: {placeholder: "", token: y, count: 0}}}
          - {name: d, multimodal: {preset: gemma3}}
          - {name: e, tokenizer: t, multimodal: {image: {placeholder: p, token: y, count: 2}, merge_tokens: [[a, b]]}}
        """, "k.yaml"))
        .isInstanceOf(KvrouterConfig.InvalidConfig.class)
        .hasMessageContaining("models[0].multimodal.preset: unknown `qwen2-vl` (known: gemma3)")
        .hasMessageContaining("models[1].multimodal: give either `preset` or the modalities, not both")
        .hasMessageContaining("models[2].multimodal.image.placeholder: required")
        .hasMessageContaining("models[2].multimodal.image.count: must be 1..65536")
        .hasMessageContaining("models[3].multimodal: needs `tokenizer`")
        .hasMessageContaining("models[4].multimodal.merge_tokens[0]: must be [left, right, merged]");
  }

  @Test
  void unknownModelKeysNameTheAllowedOnes() {
    assertThatThrownBy(() -> KvrouterConfig.parse("models:\n  - {name: a, tokenzier: t}\n", "k.yaml"))
        .hasMessageContaining("unknown key `tokenzier`")
        .hasMessageContaining("tokenizer_config");
  }

  @Test
  void missingTokenizerFilesStopTheStartWithEveryProblem() throws Exception {
    Files.writeString(dir.resolve("workers.yaml"), "workers: []\n");
    KvrouterConfig c = KvrouterConfig.parse("""
        server: {ext_proc_port: 1, xds_port: 2, admin_port: 3}
        models:
          - {name: a, tokenizer: nowhere}
          - {name: b, tokenizer: ., chat_template: missing.jinja}
        """, "k.yaml");
    assertThatThrownBy(() -> KvrouterRuntime.start(c, dir, KvrouterRuntime.Mode.EXT_PROC))
        .isInstanceOf(InvalidModelConfig.class)
        .hasMessageContaining("models[0].tokenizer: ")
        .hasMessageContaining("models[1].tokenizer: directory");
  }

  @Test
  void aShortOrMissingSecretStopsTheStartWithoutEchoingIt() throws Exception {
    Files.writeString(dir.resolve("workers.yaml"), "workers: []\n");
    Files.writeString(dir.resolve("secret"), "too-short\n");
    KvrouterConfig c = KvrouterConfig.parse("""
        server: {ext_proc_port: 1, xds_port: 2, admin_port: 3}
        tenancy: {secret_file: secret}
        """, "k.yaml");
    assertThatThrownBy(() -> KvrouterRuntime.start(c, dir, KvrouterRuntime.Mode.EXT_PROC))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("tenancy.secret_file")
        .hasMessageContaining("at least 16 bytes")
        .hasMessageNotContaining("too-short");
  }
}
