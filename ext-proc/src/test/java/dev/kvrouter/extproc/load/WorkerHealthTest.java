package dev.kvrouter.extproc.load;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class WorkerHealthTest {

  final FakeClock clock = new FakeClock();
  final WorkerHealth health = new WorkerHealth(clock, 3, 5, TimeUnit.SECONDS.toNanos(30));

  @Test
  void unknownWorkersAreHealthy() {
    assertThat(health.unhealthyReason("w")).isNull();
  }

  @Test
  void consecutiveUnreachableScrapesMarkUnhealthyUntilOneSucceeds() {
    health.scrapeUnreachable("w");
    health.scrapeUnreachable("w");
    assertThat(health.unhealthyReason("w")).isNull();
    health.scrapeUnreachable("w");
    assertThat(health.unhealthyReason("w")).isEqualTo(WorkerHealth.UNREACHABLE);
    health.scrapeUnreachable("w");
    assertThat(health.unhealthyReason("w")).isEqualTo(WorkerHealth.UNREACHABLE);
    health.scrapeReached("w");
    assertThat(health.unhealthyReason("w")).isNull();
  }

  @Test
  void aReachedScrapeInBetweenResetsTheCount() {
    health.scrapeUnreachable("w");
    health.scrapeUnreachable("w");
    health.scrapeReached("w");
    health.scrapeUnreachable("w");
    health.scrapeUnreachable("w");
    assertThat(health.unhealthyReason("w")).isNull();
  }

  @Test
  void consecutive5xxEjectForAPeriod() {
    for (int i = 0; i < 4; i++) {
      health.response("w", 503);
    }
    health.response("w", 200); // breaks the streak
    for (int i = 0; i < 4; i++) {
      health.response("w", 500);
    }
    assertThat(health.unhealthyReason("w")).isNull();
    health.response("w", 502);
    assertThat(health.unhealthyReason("w")).isEqualTo(WorkerHealth.EJECTED);
    clock.advance(29, TimeUnit.SECONDS);
    assertThat(health.unhealthyReason("w")).isEqualTo(WorkerHealth.EJECTED);
    clock.advance(2, TimeUnit.SECONDS);
    assertThat(health.unhealthyReason("w")).isNull();
  }

  @Test
  void onProbationOne5xxEjectsAgainForTwiceAsLongUpToTheMaximum() {
    WorkerHealth h = new WorkerHealth(clock, 3, 5, TimeUnit.SECONDS.toNanos(5), TimeUnit.SECONDS.toNanos(12));
    for (int i = 0; i < 5; i++) {
      h.response("w", 503);
    }
    assertThat(h.unhealthyReason("w")).isEqualTo(WorkerHealth.EJECTED);
    // responses of requests sent before the ejection neither extend it nor count towards the next
    for (int i = 0; i < 10; i++) {
      h.response("w", 503);
    }
    clock.advance(5001, TimeUnit.MILLISECONDS);
    assertThat(h.unhealthyReason("w")).isNull();
    h.response("w", 503); // the probe fails: 10 s
    assertThat(h.unhealthyReason("w")).isEqualTo(WorkerHealth.EJECTED);
    clock.advance(9999, TimeUnit.MILLISECONDS);
    assertThat(h.unhealthyReason("w")).isEqualTo(WorkerHealth.EJECTED);
    clock.advance(2, TimeUnit.MILLISECONDS);
    assertThat(h.unhealthyReason("w")).isNull();
    h.response("w", 500); // 20 s, capped at 12
    clock.advance(11999, TimeUnit.MILLISECONDS);
    assertThat(h.unhealthyReason("w")).isEqualTo(WorkerHealth.EJECTED);
    clock.advance(2, TimeUnit.MILLISECONDS);
    assertThat(h.unhealthyReason("w")).isNull();
  }

  @Test
  void aGoodAnswerEndsProbation() {
    WorkerHealth h = new WorkerHealth(clock, 3, 5, TimeUnit.SECONDS.toNanos(5), TimeUnit.SECONDS.toNanos(60));
    for (int i = 0; i < 5; i++) {
      h.response("w", 503);
    }
    clock.advance(6, TimeUnit.SECONDS);
    h.response("w", 200);
    for (int i = 0; i < 4; i++) {
      h.response("w", 503);
    }
    assertThat(h.unhealthyReason("w")).as("a new streak is needed").isNull();
    h.response("w", 503);
    assertThat(h.unhealthyReason("w")).isEqualTo(WorkerHealth.EJECTED);
    clock.advance(5001, TimeUnit.MILLISECONDS);
    assertThat(h.unhealthyReason("w")).as("the first ejection's length again").isNull();
  }

  @Test
  void clientErrorsAreNotTheWorkersFault() {
    for (int i = 0; i < 10; i++) {
      health.response("w", 400);
      health.response("w", 429);
    }
    assertThat(health.unhealthyReason("w")).isNull();
  }

  @Test
  void zeroThresholdsDisableTheSignals() {
    WorkerHealth off = new WorkerHealth(clock, 0, 0, 1);
    for (int i = 0; i < 20; i++) {
      off.scrapeUnreachable("w");
      off.response("w", 500);
    }
    assertThat(off.unhealthyReason("w")).isNull();
  }

  @Test
  void departedWorkersAreForgotten() {
    for (int i = 0; i < 3; i++) {
      health.scrapeUnreachable("gone");
    }
    health.retain(List.of("other"));
    assertThat(health.unhealthyReason("gone")).isNull();
  }
  /**
   * A worker's requests still in flight when it leaves the fleet are answered afterwards, by Envoy with a 503 once
   * its cluster is gone, and its last scrape may fail after it: those reports re-created the state the fleet change
   * had dropped, so a worker re-added under the same name came back ejected and unreachable.
   */
  @Test
  void reportsArrivingAfterAWorkerLeftDoNotFollowItBackWhenReAdded() {
    health.retain(List.of("w"));
    health.retain(List.of());
    for (int i = 0; i < 5; i++) {
      health.response("w", 503);
    }
    for (int i = 0; i < 3; i++) {
      health.scrapeUnreachable("w");
    }
    health.retain(List.of("w"));
    assertThat(health.unhealthyReason("w")).isNull();
  }
}
