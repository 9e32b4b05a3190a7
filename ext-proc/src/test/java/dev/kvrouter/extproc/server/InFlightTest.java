package dev.kvrouter.extproc.server;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.extproc.routing.Decision;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class InFlightTest {

  private static Exchange exchange(long seq) {
    return new Exchange(new Decision(seq, "d-" + seq, "m", "round_robin", null, -1, "test", null, null, null, null,
        0));
  }

  @Test
  void aDecisionIsClaimedOnceAndCountedOnce() {
    InFlight inFlight = new InFlight(100, Duration.ofMinutes(1));
    Exchange x = exchange(1);
    inFlight.register(x);
    assertThat(inFlight.pending()).isEqualTo(1);
    assertThat(inFlight.claim("d-1")).isSameAs(x);
    assertThat(inFlight.claim("d-1")).as("the routing stream's late reclaim").isNull();
    assertThat(inFlight.claim("d-2")).isNull();
    assertThat(inFlight.claim(null)).isNull();
    assertThat(inFlight.claimed()).isEqualTo(1);
    assertThat(inFlight.pending()).isZero();
    assertThat(inFlight.unclaimed()).isZero();
  }

  @Test
  void whoeverSeesAClaimLeavePendingSeesItCounted() throws Exception {
    // Read in this order, pending() then claimed(), the two always add up to at least what was registered: the
    // e2e contract relies on it to tell its own claims from an earlier test's.
    int n = 200_000;
    InFlight inFlight = new InFlight(n + 1, Duration.ofMinutes(1));
    for (int i = 0; i < n; i++) {
      inFlight.register(exchange(i));
    }
    AtomicLong violations = new AtomicLong();
    Thread claimer = new Thread(() -> {
      for (int i = 0; i < n; i++) {
        inFlight.claim("d-" + i);
      }
    });
    claimer.start();
    long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
    while (claimer.isAlive() && System.nanoTime() < deadline) {
      long pending = inFlight.pending();
      long claimed = inFlight.claimed();
      if (pending + claimed < n) {
        violations.incrementAndGet();
      }
    }
    claimer.join(Duration.ofSeconds(20).toMillis());
    assertThat(claimer.isAlive()).isFalse();
    assertThat(violations.get()).isZero();
    assertThat(inFlight.claimed()).isEqualTo(n);
    assertThat(inFlight.pending()).isZero();
  }
}
