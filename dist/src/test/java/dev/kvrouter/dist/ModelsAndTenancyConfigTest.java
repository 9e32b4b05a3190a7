package dev.kvrouter.dist;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

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
