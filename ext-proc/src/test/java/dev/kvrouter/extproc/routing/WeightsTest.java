package dev.kvrouter.extproc.routing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class WeightsTest {

  @Test
  void defaultsAreDynamosAndSglangsPublishedOnesButForFourMeasuredChanges() {
    Weights d = Weights.DEFAULTS;
    // ours (docs/routing.md, the A/B): a recomputed block counts once more; decode weighs 0.1 per held block and
    // 0.1 per block read by decode steps
    assertThat(d.newPrefillWeight()).isEqualTo(1.0);
    assertThat(d.decodeLoadScale()).isEqualTo(0.1);
    assertThat(d.decodeReadWeight()).isEqualTo(0.1);
    assertThat(Weights.DYNAMO.newPrefillWeight()).isZero();
    assertThat(Weights.DYNAMO.decodeLoadScale()).isEqualTo(1.0);
    assertThat(Weights.DYNAMO.decodeReadWeight()).isZero();
    // and the recompute charge rises with the fleet's eviction pressure, up to 1 + 8 at a share of 0.05
    assertThat(d.newPrefillEvictionWeight()).isEqualTo(8.0);
    assertThat(d.evictionShareFull()).isEqualTo(0.05);
    assertThat(Weights.DYNAMO.newPrefillEvictionWeight()).isZero();
    // and falls, for a prefix past one worker's share of the requests, to nothing at two workers' share
    assertThat(d.hotPrefixRelief()).isEqualTo(1.0);
    assertThat(Weights.DYNAMO.hotPrefixRelief()).isZero();
    // and, on a worker the fleet leaves idle, for a prefix other requests reuse
    assertThat(d.newPrefillIdleRelief()).isEqualTo(1.0);
    assertThat(Weights.DYNAMO.newPrefillIdleRelief()).isZero();
    assertThat(Weights.DYNAMO.with("new_prefill_weight", 1.0).with("decode_load_scale", 0.1)
        .with("decode_read_weight", 0.1).with("new_prefill_eviction_weight", 8).with("hot_prefix_relief", 1)
        .with("new_prefill_idle_relief", 1)).isEqualTo(d);
    assertThat(d.gpuCredit()).isEqualTo(1.0);
    assertThat(d.cpuCredit()).isEqualTo(0.75);
    assertThat(d.diskCredit()).isEqualTo(0.25);
    assertThat(d.prefillLoadScale()).isEqualTo(1.0);
    assertThat(d.overlapCreditDecay()).isZero();
    assertThat(d.activeRequestWeight()).isZero();
    assertThat(d.temperature()).isZero();
    assertThat(d.imbalanceGate()).isFalse();
    assertThat(d.imbalanceAbs()).isEqualTo(32);
    assertThat(d.imbalanceRel()).isEqualTo(1.1);
    assertThat(d.boundedLoad()).isZero();
  }

  @Test
  void theHeaderOverridesAnySubsetOfKeys() {
    Weights w = Weights.DEFAULTS.withOverrides(" prefill_load_scale=2.5 , temperature=0.1,imbalance_gate=true,"
        + "CPU_CREDIT=0.5,");
    assertThat(w.prefillLoadScale()).isEqualTo(2.5);
    assertThat(w.temperature()).isEqualTo(0.1);
    assertThat(w.imbalanceGate()).isTrue();
    assertThat(w.cpuCredit()).isEqualTo(0.5);
    assertThat(w.gpuCredit()).isEqualTo(1.0);
    Weights read = Weights.DEFAULTS.withOverrides("decode_read_weight=0.25");
    assertThat(read.decodeReadWeight()).isEqualTo(0.25);
    assertThat(read.with("decode_read_weight", 0.1)).isEqualTo(Weights.DEFAULTS);
    assertThat(Weights.DEFAULTS.withOverrides("")).isSameAs(Weights.DEFAULTS);
    assertThat(Weights.DEFAULTS.withOverrides(null)).isSameAs(Weights.DEFAULTS);
    for (String k : Weights.KEYS) {
      String v = k.equals("imbalance_gate") ? "true" : k.equals("imbalance_rel") || k.equals("bounded_load") ? "3"
          : "0.4";
      Weights one = Weights.DEFAULTS.withOverrides(k + "=" + v);
      assertThat(one).as(k).isNotEqualTo(Weights.DEFAULTS);
    }
  }

  @Test
  void badOverridesAreRejectedWholeWithTheReason() {
    assertThatThrownBy(() -> Weights.DEFAULTS.withOverrides("gpu_credit=1,magic=2"))
        .hasMessageContaining("unknown weight `magic`").hasMessageContaining("prefill_load_scale");
    assertThatThrownBy(() -> Weights.DEFAULTS.withOverrides("gpu_credit=lots")).hasMessageContaining("number");
    assertThatThrownBy(() -> Weights.DEFAULTS.withOverrides("gpu_credit=-1")).hasMessageContaining(">= 0");
    assertThatThrownBy(() -> Weights.DEFAULTS.withOverrides("decode_read_weight=-0.1"))
        .hasMessageContaining("decode_read_weight").hasMessageContaining(">= 0");
    assertThatThrownBy(() -> Weights.DEFAULTS.withOverrides("decode_read_weight=Infinity"))
        .hasMessageContaining("finite");
    assertThatThrownBy(() -> Weights.DEFAULTS.withOverrides("temperature=NaN")).hasMessageContaining("finite");
    assertThatThrownBy(() -> Weights.DEFAULTS.withOverrides("imbalance_rel=0.5")).hasMessageContaining(">= 1");
    assertThatThrownBy(() -> Weights.DEFAULTS.withOverrides("imbalance_gate=maybe")).hasMessageContaining("true");
    // a bound below the mean would leave no worker eligible
    assertThatThrownBy(() -> Weights.DEFAULTS.withOverrides("bounded_load=0.9"))
        .hasMessageContaining("bounded_load").hasMessageContaining(">= 1");
    assertThat(Weights.DEFAULTS.withOverrides("bounded_load=1").boundedLoad()).isEqualTo(1.0);
    // a relief is a part of the charge: more than all of it would pay a worker for recomputing
    assertThatThrownBy(() -> Weights.DEFAULTS.withOverrides("hot_prefix_relief=1.5"))
        .hasMessageContaining("hot_prefix_relief").hasMessageContaining("[0, 1]");
    assertThat(Weights.DEFAULTS.withOverrides("hot_prefix_relief=0.5").hotPrefixRelief()).isEqualTo(0.5);
    assertThatThrownBy(() -> Weights.DEFAULTS.withOverrides("new_prefill_idle_relief=1.01"))
        .hasMessageContaining("new_prefill_idle_relief").hasMessageContaining("[0, 1]");
    assertThat(Weights.DEFAULTS.withOverrides("new_prefill_idle_relief=0").newPrefillIdleRelief()).isZero();
    // the step budget is off unless set, and set per request like the rest
    assertThat(Weights.DEFAULTS.stepTokens()).isZero();
    assertThat(Weights.DEFAULTS.withOverrides("step_tokens=8192").stepTokens()).isEqualTo(8192.0);
    assertThatThrownBy(() -> Weights.DEFAULTS.withOverrides("step_tokens=-1")).hasMessageContaining("step_tokens");
    // the time model is off unless its prefill coefficient is set; its keys are set per request like the rest
    assertThat(Weights.DEFAULTS.timeModel()).isFalse();
    Weights time = Weights.DEFAULTS.withOverrides("time_prefill_us_per_token=28.22,time_step_us=6493,"
        + "time_step_us_per_ktoken=48.9");
    assertThat(time.timeModel()).isTrue();
    assertThat(time.timePrefillUsPerToken()).isEqualTo(28.22);
    assertThat(time.timeStepUs()).isEqualTo(6493.0);
    assertThat(time.timeStepUsPerKtoken()).isEqualTo(48.9);
    assertThat(time.withOverrides("time_prefill_us_per_token=0").timeModel()).isFalse();
    assertThatThrownBy(() -> Weights.DEFAULTS.withOverrides("time_prefill_us_per_token=NaN"))
        .hasMessageContaining("time_prefill_us_per_token");
    assertThatThrownBy(() -> Weights.DEFAULTS.withOverrides("time_step_us_per_ktoken=-1"))
        .hasMessageContaining("time_step_us_per_ktoken");
    assertThatThrownBy(() -> Weights.DEFAULTS.withOverrides("temperature")).hasMessageContaining("key=value");
    assertThatThrownBy(() -> Weights.DEFAULTS.withOverrides("temperature=1,".repeat(100)))
        .hasMessageContaining("longer than");
  }
}
