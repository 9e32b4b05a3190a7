package dev.kvrouter.examples.ab;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import dev.kvrouter.examples.report.RequestRecord;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class DecisionRecordsTest {

  static RequestRecord request(int i, String decisionId) {
    return new RequestRecord(i, "r" + i, null, 0, 0, 30_000, 90_000, 200, null, "w", decisionId, 10, 0, 2, 2, -1);
  }

  static final List<String> LOG = List.of(
      "{\"event\":\"decision\",\"id\":\"d1\",\"fallback\":null,\"timings_us\":{\"parse\":5,\"tokenize\":20,"
          + "\"hash\":3,\"decision\":12}}",
      "{\"event\":\"decision\",\"id\":\"d2\",\"fallback\":\"stale_events\",\"timings_us\":{\"parse\":5,"
          + "\"decision\":15}}",
      "{\"event\":\"outcome\",\"id\":\"d1\",\"truth\":\"within_block\",\"ttft_ms\":20.0}",
      "{\"event\":\"outcome\",\"id\":\"d2\",\"truth\":\"over\",\"ttft_ms\":40.0}",
      "{\"event\":\"outcome\",\"id\":\"d3\",\"truth\":\"under\",\"ttft_ms\":1000.0}",
      "not json", "{\"event\":\"decision\",\"id\":");

  @Test
  void readsTheRunsOwnRecordsOnly() {
    DecisionRecords d = DecisionRecords.parse(LOG);
    // d3 belongs to no request of this run; r2 carried no decision id
    List<RequestRecord> run = List.of(request(0, "d1"), request(1, "d2"), request(2, null));
    assertThat(d.decisions()).isEqualTo(2);
    assertThat(d.overhead(run).decisions()).isEqualTo(2);
    assertThat(d.overhead(run).meanMicros()).isCloseTo((40 + 20) / 2.0, within(0.1));
    assertThat(d.overhead(run).fallbacks()).isEqualTo(1);
    assertThat(d.truth(run)).isEqualTo(Map.of("within_block", 1L, "over", 1L));
    DecisionRecords.RouterTtft ttft = d.routerTtft(run);
    assertThat(ttft.meanMs()).isCloseTo(30.0, within(0.05));
    assertThat(ttft.p50Ms()).isCloseTo(20.0, within(0.05));
    assertThat(d.routerTtft(List.of(request(0, null)))).as("no outcome with a TTFT").isNull();
  }
}
