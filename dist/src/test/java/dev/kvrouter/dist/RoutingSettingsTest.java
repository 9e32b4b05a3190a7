package dev.kvrouter.dist;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvrouter.extproc.routing.BusyThresholds;
import dev.kvrouter.extproc.routing.ModelRouting;
import dev.kvrouter.extproc.routing.RoutingConfig;
import dev.kvrouter.extproc.routing.Weights;
import org.junit.jupiter.api.Test;

class RoutingSettingsTest {

  @Test
  void defaultsAreTheRoutersDefaults() {
    RoutingConfig c = RoutingSettings.toConfig(KvrouterConfig.defaults().routing());
    assertThat(c.defaults()).isEqualTo(new ModelRouting("kv_aware", Weights.DEFAULTS, BusyThresholds.OFF,
        ModelRouting.WhenAllBusy.REJECT));
    assertThat(c.models()).isEmpty();
    assertThat(c.defaultBlockSize()).isEqualTo(16);
    assertThat(c.expectedOutputTokens(-1)).isEqualTo(256);
    assertThat(c.expectedOutputTokens(5000)).isEqualTo(1024);
    assertThat(c.expectedOutputTokens(7)).isEqualTo(7);
  }

  @Test
  void perModelOverridesInheritTheRestFromTheGlobalSection() {
    KvrouterConfig cfg = KvrouterConfig.parse("""
        routing:
          policy: kv_aware
          weights: {prefill_load_scale: 2.0, temperature: 0.1, decode_read_weight: 0.2, bounded_load: 1.5,
                    step_tokens: 8192}
          busy: {max_prefill_tokens: 8192, when_all_busy: least_loaded}
          models:
            meta-llama/Llama-3.1-8B-Instruct:
              weights: {gpu_credit: 0.5, imbalance_gate: true, decode_read_weight: 0.05, new_prefill_queue_weight: 2,
                        step_tokens: 2048}
              busy: {max_kv_usage: 0.95}
            qwen-ab:
              policy: round_robin
        """, "k.yaml");
    RoutingConfig c = RoutingSettings.toConfig(cfg.routing());
    ModelRouting llama = c.resolve("meta-llama/Llama-3.1-8B-Instruct", null);
    assertThat(llama.policy()).isEqualTo("kv_aware");
    assertThat(llama.weights().gpuCredit()).isEqualTo(0.5);
    assertThat(llama.weights().imbalanceGate()).isTrue();
    assertThat(llama.weights().prefillLoadScale()).isEqualTo(2.0); // inherited
    assertThat(llama.weights().temperature()).isEqualTo(0.1);
    assertThat(llama.weights().decodeReadWeight()).isEqualTo(0.05);
    assertThat(llama.weights().newPrefillQueueWeight()).isEqualTo(2.0);
    assertThat(llama.weights().boundedLoad()).isEqualTo(1.5); // inherited
    assertThat(llama.weights().stepTokens()).isEqualTo(2048.0);
    assertThat(llama.busy()).isEqualTo(new BusyThresholds(8192, 0, 0.95, 0));
    assertThat(llama.whenAllBusy()).isEqualTo(ModelRouting.WhenAllBusy.LEAST_LOADED);
    assertThat(c.resolve("qwen-ab", null).policy()).isEqualTo("round_robin");
    assertThat(c.resolve("qwen-ab", null).weights().prefillLoadScale()).isEqualTo(2.0);
    assertThat(c.resolve("qwen-ab", null).weights().decodeReadWeight()).isEqualTo(0.2); // inherited
    assertThat(c.resolve("qwen-ab", null).weights().stepTokens()).isEqualTo(8192.0); // inherited
    assertThat(c.resolve("other", null).weights().gpuCredit()).isEqualTo(1.0);
    assertThat(c.resolve("other", null).weights().newPrefillQueueWeight()).isZero();
  }

  @Test
  void theTimeModelIsSetGloballyOrPerModelAndEachCoefficientValidatedWithItsPath() {
    KvrouterConfig cfg = KvrouterConfig.parse("""
        routing:
          weights: {step_tokens: 8192, time_step_us: 6493, time_step_us_per_ktoken: 48.9}
          models:
            m1: {weights: {time_prefill_us_per_token: 28.22}}
        """, "k.yaml");
    RoutingConfig c = RoutingSettings.toConfig(cfg.routing());
    assertThat(c.resolve("m1", null).weights().timeModel()).isTrue();
    assertThat(c.resolve("m1", null).weights().timeStepUsPerKtoken()).isEqualTo(48.9); // inherited
    assertThat(c.resolve("other", null).weights().timeModel()).isFalse();
    assertThatThrownBy(() -> KvrouterConfig.parse("""
        routing:
          weights: {time_step_us: -1}
        """, "k.yaml"))
        .hasMessageContaining("routing.weights.time_step_us: time_step_us must be a finite number >= 0");
    // a model's weights are checked on a valid global set
    assertThatThrownBy(() -> KvrouterConfig.parse("""
        routing:
          models:
            m1: {weights: {time_prefill_us_per_token: "28", time_step_us_per_ktoken: -48.9}}
        """, "k.yaml"))
        .hasMessageContaining("routing.models.m1.weights.time_prefill_us_per_token: must be a finite number,"
            + " was string \"28\"")
        .hasMessageContaining("routing.models.m1.weights.time_step_us_per_ktoken: time_step_us_per_ktoken must be a"
            + " finite number >= 0");
  }

  @Test
  void everyRoutingProblemIsReportedWithItsPath() {
    assertThatThrownBy(() -> KvrouterConfig.parse("""
        routing:
          policy: best
          weights: {gpu_credit: -1}
          busy: {when_all_busy: panic, max_kv_usage: 2}
          load: {reservation_ttl_seconds: 0}
          scrape: {interval_ms: 10}
          models:
            m1: {policy: nope, weights: {bogus: 1, temperature: hot}, busy: {max_waiting: 3}}
        """, "k.yaml"))
        .hasMessageContaining("routing.policy: `best` must be one of [kv_aware, round_robin, least_load, cache_only,"
            + " random, dynamo, llm_d]")
        .hasMessageContaining("routing.weights.gpu_credit: gpu_credit must be a finite number >= 0")
        .hasMessageContaining("routing.busy: busy thresholds must be >= 0")
        .hasMessageContaining("routing.busy.when_all_busy: `panic` must be reject or least_loaded")
        .hasMessageContaining("routing.load.reservation_ttl_seconds: must be > 0")
        .hasMessageContaining("routing.scrape.interval_ms: must be >= 50");
    assertThatThrownBy(() -> KvrouterConfig.parse("""
        routing:
          models:
            m1: {policy: nope, weights: {bogus: 1, temperature: hot}, busy: {max_waiting: 3}}
        """, "k.yaml"))
        .hasMessageContaining("routing.models.m1.policy: `nope`")
        .hasMessageContaining("routing.models.m1.weights.bogus: unknown weight `bogus`")
        .hasMessageContaining("routing.models.m1.weights.temperature: must be a finite number, was string \"hot\"")
        .hasMessageContaining("routing.models.m1.busy: unknown key `max_waiting`");
  }

  /**
   * docs/configuration.md: a quoted number or switch is an error anywhere in kvrouter.yaml. The global busy section
   * and per-model weights refuse one; per-model busy read every value through String.valueOf and took "8192".
   */
  @Test
  void perModelBusyValuesAreTypedAsStrictlyAsTheGlobalOnes() {
    assertThatThrownBy(() -> KvrouterConfig.parse("""
        routing:
          models:
            m1: {busy: {max_prefill_tokens: "8192", max_kv_usage: "0.9", max_decode_blocks: true,
                        when_all_busy: 1}}
        """, "k.yaml"))
        .hasMessageContaining("routing.models.m1.busy.max_prefill_tokens: must be a whole number, was string \"8192\"")
        .hasMessageContaining("routing.models.m1.busy.max_kv_usage: must be a finite number, was string \"0.9\"")
        .hasMessageContaining("routing.models.m1.busy.max_decode_blocks: must be a whole number, was `true`")
        .hasMessageContaining("routing.models.m1.busy.when_all_busy: must be reject or least_loaded, was `1`");
    RoutingConfig c = RoutingSettings.toConfig(KvrouterConfig.parse("""
        routing:
          models:
            m1: {busy: {max_prefill_tokens: 8192, max_kv_usage: 1, when_all_busy: least_loaded}}
        """, "k.yaml").routing());
    assertThat(c.resolve("m1", null).busy()).isEqualTo(new BusyThresholds(8192, 0, 1.0, 0));
  }

  /**
   * docs/configuration.md: a setting written as `~` takes its default, and a model's unset keys inherit the global
   * values; a model's weights and busy maps refused `~` as a value that is not a number.
   */
  @Test
  void aModelsOverrideWrittenAsNullInheritsTheGlobalValue() {
    RoutingConfig c = RoutingSettings.toConfig(KvrouterConfig.parse("""
        routing:
          weights: {gpu_credit: 0.5}
          busy: {max_kv_usage: 0.9, when_all_busy: least_loaded}
          models:
            m1: {weights: {gpu_credit: ~, temperature: 0.2}, busy: {max_kv_usage: ~, when_all_busy: ~}}
        """, "k.yaml").routing());
    ModelRouting m1 = c.resolve("m1", null);
    assertThat(m1.weights().gpuCredit()).isEqualTo(0.5);
    assertThat(m1.weights().temperature()).isEqualTo(0.2);
    assertThat(m1.busy().maxKvUsage()).isEqualTo(0.9);
    assertThat(m1.whenAllBusy()).isEqualTo(ModelRouting.WhenAllBusy.LEAST_LOADED);
    assertThatThrownBy(() -> KvrouterConfig.parse("routing: {models: {m1: {weights: {bogus: ~}, busy: {nope: ~}}}}\n",
        "k.yaml"))
        .hasMessageContaining("routing.models.m1.weights.bogus: unknown weight `bogus`")
        .hasMessageContaining("routing.models.m1.busy: unknown key `nope`");
  }

  /**
   * Keys are exact in kvrouter.yaml (`GPU_Credit` under routing.weights is an unknown key), but a model's weights
   * went through the header's parser, which trims and lower-cases its keys.
   */
  @Test
  void aModelsWeightKeysAreAsExactAsTheGlobalOnes() {
    assertThatThrownBy(() -> KvrouterConfig.parse("routing: {models: {m1: {weights: {GPU_Credit: 0.5}}}}\n",
        "k.yaml"))
        .hasMessageContaining("routing.models.m1.weights.GPU_Credit: unknown weight `GPU_Credit`");
    assertThatThrownBy(() -> KvrouterConfig.parse("routing: {weights: {GPU_Credit: 0.5}}\n", "k.yaml"))
        .hasMessageContaining("routing.weights.GPU_Credit: unknown key");
  }

  @Test
  void ejectionsDefaultToFiveSecondsDoublingToAMinuteAndTheMaximumCoversTheFirst() throws Exception {
    KvrouterConfig.Health h = KvrouterConfig.parse("routing: {policy: kv_aware}\n", "k.yaml").routing().health();
    assertThat(h.ejectSeconds()).isEqualTo(5);
    assertThat(h.ejectMaxSeconds()).isEqualTo(60);
    assertThat(KvrouterConfig.parse("routing: {health: {eject_seconds: 90}}\n", "k.yaml").routing().health()
        .ejectMaxSeconds()).as("a longer first ejection raises the default maximum").isEqualTo(90);
    assertThatThrownBy(() -> KvrouterConfig.parse("routing: {health: {eject_seconds: 10, eject_max_seconds: 5}}\n",
        "k.yaml")).hasMessageContaining("routing.health.eject_max_seconds: must be >= eject_seconds (10)");
  }

  @Test
  void unknownRoutingKeysNameTheAllowedOnes() {
    assertThatThrownBy(() -> KvrouterConfig.parse("routing:\n  weights:\n    gpu_credits: 1\n", "k.yaml"))
        .hasMessageContaining("routing.weights.gpu_credits: unknown key")
        .hasMessageContaining("gpu_credit");
  }

  /** An "uncapped" output reservation reserved a client's max_tokens as it came, up to Integer.MAX_VALUE. */
  @Test
  void theOutputReservationCapIsBounded() {
    assertThatThrownBy(() -> KvrouterConfig.parse("""
        routing:
          load: {max_expected_output_tokens: 2147483647}
        """, "k.yaml"))
        .hasMessageContaining("routing.load.max_expected_output_tokens: must be in [0, 16777216]");
    RoutingConfig c = RoutingSettings.toConfig(KvrouterConfig.parse("""
        routing:
          load: {max_expected_output_tokens: 16777216}
        """, "k.yaml").routing());
    assertThat(c.expectedOutputTokens(Integer.MAX_VALUE)).isEqualTo(16_777_216);
  }
}
