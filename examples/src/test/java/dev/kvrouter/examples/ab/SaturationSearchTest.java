package dev.kvrouter.examples.ab;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.data.Offset.offset;

import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadCatalog;
import java.io.PrintStream;
import java.io.OutputStream;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The saturation search: its rates, its capacity, and operating points that offer what they claim. */
class SaturationSearchTest {

  private static final PrintStream QUIET = new PrintStream(OutputStream.nullOutputStream());

  @Test
  void middleRateCountsTheMiddleHalfOfTheInstants() {
    // 8 instants: the 25th percentile is index 2 (t = 2 s), the 75th index 6 (t = 10 s): 4 events in 8 s
    long[] t = {0, 1_000_000, 2_000_000, 3_000_000, 4_000_000, 5_000_000, 10_000_000, 11_000_000};
    assertThat(SaturationSearch.middleRate(t)).isEqualTo(0.5);
    // order does not matter
    long[] shuffled = {10_000_000, 0, 5_000_000, 2_000_000, 11_000_000, 1_000_000, 4_000_000, 3_000_000};
    assertThat(SaturationSearch.middleRate(shuffled)).isEqualTo(0.5);
    assertThat(SaturationSearch.middleRate(new long[] {1, 2, 3})).isZero();
  }

  @Test
  void lastCompletionIgnoresFailedAndUnsentRequests() {
    List<RequestRecord> rs = List.of(
        new RequestRecord(0, "a", null, 0, 0, 10, 500, 200, null, "w", "d", 1, 0, 1, 1, -1),
        new RequestRecord(1, "b", null, 100, 100, 10, 300, 200, null, "w", "d", 1, 0, 1, 1, -1),
        new RequestRecord(2, "c", null, 200, 200, -1, 9_000, 500, "http_500", "w", "d", -1, -1, -1, 0, -1),
        RequestRecord.unsent(3, "d", null, 300, "not_sent"));
    assertThat(SaturationSearch.lastCompletion(rs)).isEqualTo(500);
  }

  @Test
  void knobsRoundToFourSignificantDigits() {
    assertThat(SaturationSearch.roundKnob(313.2468)).isEqualTo(313.2);
    assertThat(SaturationSearch.roundKnob(2.56749)).isEqualTo(2.567);
    assertThat(SaturationSearch.format(40.0)).isEqualTo("40");
    assertThat(SaturationSearch.format(2.567)).isEqualTo("2.567");
  }

  @Test
  void solvedOperatingPointOffersTheTargetShareOfCapacity() {
    String spec = "unique:count=400,rate=10,seed=3";
    SaturationSearch.OperatingPoint p = SaturationSearch.solve(spec, "rate", 10, 0.9, 200);
    assertThat(p.offeredRps()).isCloseTo(180, offset(180 * SaturationSearch.RATE_TOLERANCE));
    assertThat(SaturationSearch.offeredRate(WorkloadCatalog.create(p.spec()))).isCloseTo(p.offeredRps(),
        offset(0.001));
    // a session workload, whose think time does not scale: still within tolerance
    SaturationSearch.OperatingPoint m = SaturationSearch.solve("multi-turn:format=tokens,sessions=100,rate=5,seed=3",
        "rate", 5, 0.5, 120);
    assertThat(m.offeredRps()).isCloseTo(60, offset(60 * SaturationSearch.RATE_TOLERANCE));
  }

  @Test
  void capacityIsWhatRoundRobinCompletesUnderOverloadAndTheOperatingPointKeepsUp() {
    VirtualSetup small = VirtualSetup.defaults().withWorkers(2).withNumGpuBlocks(4096);
    String spec = "unique:count=300,rate=20,prompt=1024,output=16,seed=5";
    SaturationSearch.Result r = SaturationSearch.find(spec, small, List.of(0.9, 0.5), List.of(0.5), null, QUIET);

    // the last two probes were overloaded, every one before kept up, and capacity is the larger overloaded figure
    List<SaturationSearch.Probe> probes = r.overload();
    assertThat(probes.size()).isGreaterThanOrEqualTo(2);
    SaturationSearch.Probe a = probes.get(probes.size() - 2);
    SaturationSearch.Probe b = probes.get(probes.size() - 1);
    assertThat(a.keepsUp()).isFalse();
    assertThat(b.keepsUp()).isFalse();
    assertThat(b.knob()).isEqualTo(2 * a.knob());
    assertThat(probes.subList(0, probes.size() - 2)).allMatch(SaturationSearch.Probe::keepsUp);
    assertThat(r.capacityRps()).isEqualTo(Math.max(a.completedRps(), b.completedRps()));
    assertThat(a.completedRps()).isLessThan(SaturationSearch.OVERLOAD_SHARE * a.arrivalRps());

    // a hand bound: a 1024-token prefill costs at least 2 x 6.9e9 linear params x 1024 tokens of H100 FLOP/s at
    // 50% MFU (about 29 ms), so two workers cannot complete more than ~70 such requests a second
    double prefillSeconds = 2 * 6.9e9 * 1024 / (989.4e12 * 0.5);
    assertThat(r.capacityRps()).isLessThan(2 / prefillSeconds).isGreaterThan(0.5 / prefillSeconds);

    assertThat(r.points()).extracting(SaturationSearch.OperatingPoint::utilisation).containsExactly(0.9, 0.5);
    for (SaturationSearch.OperatingPoint p : r.points()) {
      assertThat(p.offeredRps()).isCloseTo(p.utilisation() * r.capacityRps(),
          offset(p.utilisation() * r.capacityRps() * SaturationSearch.RATE_TOLERANCE + 0.01));
    }
    assertThat(r.curve()).singleElement().satisfies(p -> {
      assertThat(p.keepsUp()).isTrue();
      assertThat(p.utilisation()).isCloseTo(0.5, offset(0.01));
    });
  }

  @Test
  void rejectsTargetsOutsideTheRange() {
    assertThatThrownBy(() -> SaturationSearch.find("unique:count=10", VirtualSetup.defaults(), List.of(0.0),
        List.of(), null, QUIET)).hasMessageContaining("(0, 2]");
  }
}
