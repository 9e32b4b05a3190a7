package dev.kvrouter.extproc.server;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.extproc.routing.Decision;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class InFlightTest {

  private static Exchange exchange(long seq) {
    return exchange(seq, "d-" + seq);
  }

  private static Exchange exchange(long seq, String id) {
    return new Exchange(new Decision(seq, id, "m", "round_robin", null, -1, "test", null, null, null, null, 0));
  }

  /**
   * A client that reuses its x-request-id for the next request once the first is over (a retry): the first's
   * orphan, claimed late by its observer, still waited in the queue under that id when the retry registered it, and
   * the queue's round claimed the retry's decision for it (found by ExtProcStreamPropertyTest). The retry then had
   * no end: its observer found nothing (and counted as late, which stops orphans being ended at all), and its
   * reservation held load until the ledger's expiry.
   */
  @Test
  void anOrphanLeavesANewRequestWithItsIdAlone() {
    InFlight inFlight = new InFlight(100, Duration.ofMinutes(1));
    java.util.List<String> ended = new java.util.ArrayList<>();
    Exchange first = inFlight.register(exchange(1, "req-7"));
    inFlight.routingClosedUnclaimed(first, 0, () -> ended.add("first"));
    assertThat(inFlight.claim("req-7")).as("its observer, within the grace").isSameAs(first);
    Exchange retry = inFlight.register(exchange(2, "req-7"));
    assertThat(retry.decision().id()).as("the id is free again").isEqualTo("req-7");
    assertThat(inFlight.endOrphans(10_000, 1_000)).isZero();
    assertThat(ended).isEmpty();
    assertThat(inFlight.claim("req-7")).as("there for the retry's observer").isSameAs(retry);
    assertThat(inFlight.observerMissing()).isZero();
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

  @Test
  void aDecisionNoObserverClaimedIsEndedAfterTheGrace() {
    InFlight inFlight = new InFlight(100, Duration.ofMinutes(1));
    java.util.List<String> ended = new java.util.ArrayList<>();
    for (int i = 1; i <= 3; i++) {
      Exchange x = inFlight.register(exchange(i));
      String id = "d-" + i;
      inFlight.routingClosedUnclaimed(x, 1_000L * i, () -> ended.add(id));
    }
    assertThat(inFlight.endOrphans(1_500, 1_000)).as("no grace over yet").isZero();
    assertThat(inFlight.claim("d-2")).as("a late observer, within the grace").isNotNull();
    assertThat(inFlight.endOrphans(2_000, 1_000)).isEqualTo(1);
    assertThat(ended).containsExactly("d-1");
    assertThat(inFlight.endOrphans(10_000, 1_000)).as("d-2 was claimed: its observer ends it").isEqualTo(1);
    assertThat(ended).containsExactly("d-1", "d-3");
    assertThat(inFlight.observerMissing()).isEqualTo(2);
    assertThat(inFlight.pending()).isZero();
    assertThat(inFlight.endOrphans(20_000, 1_000)).isZero();
    inFlight.unclaimedByObserver("d-9"); // an observer for a decision of another replica: not a late one
    assertThat(inFlight.lateObservers()).isZero();
    Exchange fifth = inFlight.register(exchange(5));
    assertThat(inFlight.claim("d-5")).isNotNull(); // its observer follows the response to its end
    inFlight.routingClosedUnclaimed(fifth, 20_000, () -> ended.add("d-5"));
    assertThat(inFlight.orphansWaiting()).as("a claimed decision does not wait").isZero();
  }

  @Test
  void anObserverThatComesForAnEndedOrphanStopsTheEnding() {
    // An Envoy whose routing filter closes its stream before the response: the first orphan ended was a response
    // still to come, and its observer says so.
    InFlight inFlight = new InFlight(100, Duration.ofMinutes(1));
    java.util.List<String> ended = new java.util.ArrayList<>();
    for (int i = 1; i <= 2; i++) {
      Exchange x = inFlight.register(exchange(i));
      String id = "d-" + i;
      inFlight.routingClosedUnclaimed(x, 0, () -> ended.add(id));
    }
    Exchange third = inFlight.register(exchange(3));
    inFlight.routingClosedUnclaimed(third, 5_000, () -> ended.add("d-3"));
    assertThat(inFlight.endOrphans(1_000, 1_000)).isEqualTo(2);
    assertThat(inFlight.claim("d-1")).isNull();
    inFlight.unclaimedByObserver("d-1");
    assertThat(inFlight.lateObservers()).isEqualTo(1);
    assertThat(inFlight.endOrphans(10_000, 1_000)).isZero();
    assertThat(ended).containsExactly("d-1", "d-2");
    assertThat(inFlight.claim("d-3")).as("left to its observer").isNotNull();
  }

  @Test
  void behindARoutingStreamThatClosesAtTheFirstChunkUnclaimedDecisionsAreLeftToTheirObserver() {
    // Observers had to follow more streamed responses than they could leave: the routing stream was closed at
    // their first chunk, and an unclaimed decision may be a response that has not started yet.
    InFlight inFlight = new InFlight(100, Duration.ofMinutes(1));
    inFlight.observerLeft();
    inFlight.observerStayed();
    assertThat(inFlight.closesAtTheEnd()).as("one race does not decide it").isTrue();
    inFlight.observerStayed();
    assertThat(inFlight.closesAtTheEnd()).isFalse();
    Exchange x = inFlight.register(exchange(1));
    java.util.List<String> ended = new java.util.ArrayList<>();
    inFlight.routingClosedUnclaimed(x, 0, () -> ended.add("d-1"));
    assertThat(inFlight.endOrphans(10_000, 1_000)).isZero();
    assertThat(inFlight.claim("d-1")).as("still there for its observer").isNotNull();
    assertThat(inFlight.endOrphans(20_000, 1_000)).isZero();
    assertThat(ended).isEmpty();
    assertThat(inFlight.observerMissing()).isZero();
  }

  @Test
  void pastTheBoundTheOldestOrphansLeaveTheQueueWithoutWaiting() {
    // room for every decision, two orphans waiting at most
    InFlight inFlight = new InFlight(100, 2, Duration.ofMinutes(1));
    java.util.List<String> ended = new java.util.ArrayList<>();
    for (int i = 1; i <= 4; i++) {
      Exchange x = inFlight.register(exchange(i));
      String id = "d-" + i;
      inFlight.routingClosedUnclaimed(x, 0, () -> ended.add(id));
    }
    assertThat(inFlight.orphansWaiting()).isEqualTo(4);
    // only the oldest two leave the queue before their grace is over, and the queue is back to its bound
    inFlight.endOrphans(0, 1_000);
    assertThat(inFlight.orphansWaiting()).isEqualTo(2);
    assertThat(ended).isSubsetOf("d-1", "d-2");
    inFlight.endOrphans(1_000, 1_000);
    assertThat(inFlight.orphansWaiting()).isZero();
  }

  @Test
  void claimedOrphansDoNotWaitBehindOneStillUnclaimed() {
    // Behind a routing stream that closes before the response, each orphan waits for its observer. One whose
    // response has not started (a long non-streamed generation) held every orphan closed after it in the queue,
    // claimed or not, each with its stream and decision, up to the bound of 200,000.
    InFlight inFlight = new InFlight(10_000, Duration.ofMinutes(1));
    inFlight.observerStayed();
    assertThat(inFlight.closesAtTheEnd()).isFalse();
    java.util.List<String> ended = new java.util.ArrayList<>();
    inFlight.routingClosedUnclaimed(inFlight.register(exchange(0)), 0, () -> ended.add("d-0"));
    for (int i = 1; i <= 1_000; i++) {
      String id = "d-" + i;
      inFlight.routingClosedUnclaimed(inFlight.register(exchange(i)), i, () -> ended.add(id));
      assertThat(inFlight.claim(id)).as("its observer came when its response started").isNotNull();
    }
    assertThat(inFlight.endOrphans(10_000_000, 1_000)).isZero();
    assertThat(inFlight.orphansWaiting()).as("only the unclaimed one waits").isEqualTo(1);
    assertThat(ended).isEmpty();
    assertThat(inFlight.claim("d-0")).as("still there for its observer").isNotNull();
    assertThat(inFlight.endOrphans(20_000_000, 1_000)).isZero();
    assertThat(inFlight.orphansWaiting()).isZero();
  }
}
