package dev.kvrouter.extproc.load;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.index.WorkerId;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerSet;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class LoadMetricsTest {

  final FakeClock clock = new FakeClock();
  final SimpleMeterRegistry meters = new SimpleMeterRegistry();
  final LoadLedger ledger = new LoadLedger(clock, TimeUnit.SECONDS.toNanos(10), 100);
  final WorkerHealth health = new WorkerHealth(clock, 1, 5, TimeUnit.SECONDS.toNanos(30));
  final LoadMetrics metrics = new LoadMetrics(meters, ledger, health, null);

  static Worker w(String name, int dp) {
    return new Worker(name, "10.0.0.1", 8000, "m", List.of(), Worker.Role.BOTH, null, dp, 16, 1, null, false,
        Map.of());
  }

  @Test
  void perRankGaugesFollowTheLedgerAndTheFleet() {
    metrics.fleetChanged(new WorkerSet(1, List.of(w("a", 1), w("b", 2))));
    Reservation r = ledger.reserve(new WorkerId("b", 1), 300, new long[] {1, 2}, 1);
    assertThat(meters.get("kvrouter.ledger.prefill.tokens").tags("worker", "b", "dp_rank", "1").gauge().value())
        .isEqualTo(300);
    assertThat(meters.get("kvrouter.ledger.decode.blocks").tags("worker", "b", "dp_rank", "1").gauge().value())
        .isEqualTo(3);
    Reservation again = ledger.reserve(new WorkerId("b", 1), 0, new long[] {1, 2}, 0);
    // the same two blocks read again by the second request: 3 distinct, 5 of context
    assertThat(meters.get("kvrouter.ledger.context.blocks").tags("worker", "b", "dp_rank", "1").gauge().value())
        .isEqualTo(5);
    ledger.release(again);
    assertThat(meters.get("kvrouter.ledger.requests").tags("worker", "a", "dp_rank", "0").gauge().value()).isZero();
    assertThat(meters.get("kvrouter.ledger.reservations").gauge().value()).isEqualTo(1);
    health.scrapeUnreachable("a");
    assertThat(meters.get("kvrouter.worker.healthy").tags("worker", "a").gauge().value()).isZero();
    assertThat(meters.get("kvrouter.worker.healthy").tags("worker", "b").gauge().value()).isEqualTo(1);
    clock.advance(11, TimeUnit.SECONDS);
    ledger.sweep();
    assertThat(r.released()).isTrue();
    assertThat(meters.get("kvrouter.ledger.expired").functionCounter().count()).isEqualTo(1);
    assertThat(meters.get("kvrouter.ledger.decode.blocks").tags("worker", "b", "dp_rank", "1").gauge().value())
        .isZero();
    assertThat(meters.get("kvrouter.ledger.context.blocks").tags("worker", "b", "dp_rank", "1").gauge().value())
        .isZero();
    metrics.fleetChanged(new WorkerSet(2, List.of(w("b", 2))));
    assertThat(meters.find("kvrouter.ledger.requests").tags("worker", "a").gauge()).isNull();
    assertThat(meters.find("kvrouter.worker.healthy").tags("worker", "a").gauge()).isNull();
    assertThat(meters.find("kvrouter.ledger.requests").tags("worker", "b").gauges()).hasSize(2);
  }
}
