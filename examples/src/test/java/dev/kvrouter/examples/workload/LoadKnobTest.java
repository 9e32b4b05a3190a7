package dev.kvrouter.examples.workload;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The load knob the saturation search turns: which option, and how a spec is rewritten. */
class LoadKnobTest {

  @Test
  void traceReplaysScaleBySpeedAndSyntheticWorkloadsByRate() {
    assertThat(WorkloadCatalog.loadKnob("mooncake:max=10")).isEqualTo("speed");
    assertThat(WorkloadCatalog.loadKnob("mooncake")).isEqualTo("speed");
    for (String name : new String[] {"system-prompt", "multi-turn", "rag", "best-of-n", "unique"}) {
      assertThat(WorkloadCatalog.loadKnob(name + ":seed=3")).as(name).isEqualTo("rate");
    }
  }

  @Test
  void withOptionReplacesInPlaceOrAppends() {
    assertThat(WorkloadCatalog.withOption("rag:count=40,rate=20,seed=1", "rate", "35.5"))
        .isEqualTo("rag:count=40,rate=35.5,seed=1");
    assertThat(WorkloadCatalog.withOption("rag:count=40", "rate", "7")).isEqualTo("rag:count=40,rate=7");
    assertThat(WorkloadCatalog.withOption("rag", "rate", "7")).isEqualTo("rag:rate=7");
  }

  @Test
  void withLoadScalesOpenArrivalsExactly() {
    Workload slow = WorkloadCatalog.create("unique:count=200,rate=10,seed=4");
    Workload fast = WorkloadCatalog.create(WorkloadCatalog.withLoad("unique:count=200,rate=10,seed=4", "40"));
    assertThat(fast.size()).isEqualTo(slow.size());
    // the same exponential draws over a 4x rate: every arrival 4x earlier, to the microsecond's rounding
    for (int i = 0; i < slow.size(); i++) {
      assertThat((double) fast.requests().get(i).arrivalMicros())
          .isCloseTo(slow.requests().get(i).arrivalMicros() / 4.0, org.assertj.core.data.Offset.offset((double) i));
    }
  }

  @Test
  void withLoadKeepsMultiTurnSessionsStartingOverTheSameWindow() {
    String spec = WorkloadCatalog.withLoad("multi-turn:format=tokens,sessions=60,rate=20,seed=2", "50");
    assertThat(spec).isEqualTo("multi-turn:format=tokens,sessions=150,rate=50,seed=2");
    // 60 sessions at 20/s start over ~3 s; 150 at 50/s too
    assertThat(WorkloadCatalog.create(spec).params()).containsEntry("sessions", 150).containsEntry("rate", 50.0);
  }
}
