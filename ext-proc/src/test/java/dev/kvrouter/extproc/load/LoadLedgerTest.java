package dev.kvrouter.extproc.load;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.index.WorkerId;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class LoadLedgerTest {

  static final WorkerId A = WorkerId.of("a");
  static final WorkerId B = WorkerId.of("b");
  final FakeClock clock = new FakeClock();
  final LoadLedger ledger = new LoadLedger(clock, TimeUnit.SECONDS.toNanos(300), 1000);

  static long[] chain(long... hashes) {
    return hashes;
  }

  @Test
  void reserveChargesPrefillBlocksAndARequestImmediately() {
    Reservation r = ledger.reserve(A, 640, chain(1, 2, 3, 4), 3);
    // 4 hashed + 3 unique blocks: 7 distinct, 7 of context
    assertThat(ledger.local(A)).isEqualTo(new LocalLoad(640, 7, 7, 1, 640, 7, 1));
    assertThat(ledger.local(B)).isEqualTo(LocalLoad.ZERO);
    assertThat(r.blocks()).isEqualTo(7);
    assertThat(r.addedBlocks()).isEqualTo(7);
  }

  @Test
  void firstByteReleasesThePrefillAndTheEndReleasesTheRest() {
    Reservation r = ledger.reserve(A, 640, chain(1, 2, 3, 4), 3);
    ledger.prefillDone(r);
    assertThat(ledger.local(A).prefillTokens()).isZero();
    assertThat(ledger.local(A).decodeBlocks()).isEqualTo(7);
    assertThat(ledger.local(A).requests()).isEqualTo(1);
    ledger.release(r);
    assertThat(ledger.local(A)).isEqualTo(LocalLoad.ZERO);
    assertThat(ledger.liveReservations()).isZero();
  }

  @Test
  void releaseWithoutFirstByteReleasesBothParts() {
    Reservation r = ledger.reserve(A, 100, chain(1), 0);
    ledger.release(r); // cancelled before any byte
    assertThat(ledger.local(A)).isEqualTo(LocalLoad.ZERO);
    assertThat(ledger.totals()).containsExactly(0, 0, 0, 0, 0);
  }

  @Test
  void everyReleaseIsIdempotent() {
    Reservation r = ledger.reserve(A, 100, chain(1, 2), 1);
    ledger.prefillDone(r);
    ledger.prefillDone(r);
    ledger.release(r);
    ledger.release(r);
    ledger.prefillDone(r);
    assertThat(ledger.local(A)).isEqualTo(LocalLoad.ZERO);
    ledger.release(Reservation.NONE);
    ledger.prefillDone(Reservation.NONE);
    ledger.release(null);
    assertThat(ledger.totals()).containsExactly(0, 0, 0, 0, 0);
  }

  @Test
  void sharedPrefixBlocksCountOncePerWorker() {
    // two requests share blocks 1,2 (same chain), then diverge
    Reservation r1 = ledger.reserve(A, 0, chain(1, 2, 3), 0);
    Reservation r2 = ledger.reserve(A, 0, chain(1, 2, 9), 0);
    assertThat(ledger.local(A).decodeBlocks()).isEqualTo(4); // 1,2,3,9
    assertThat(r2.addedBlocks()).isEqualTo(1);
    // the same prefix on another worker is that worker's own blocks
    ledger.reserve(B, 0, chain(1, 2), 0);
    assertThat(ledger.local(B).decodeBlocks()).isEqualTo(2);
    ledger.release(r1); // 1,2 still held by r2
    assertThat(ledger.local(A).decodeBlocks()).isEqualTo(3);
    ledger.release(r2);
    assertThat(ledger.local(A).decodeBlocks()).isZero();
  }

  @Test
  void contextBlocksCountASharedPrefixOncePerRequestAndReleaseAtTheEnd() {
    // a 3-block document (1, 2, 3) with a 1-block question each (8, 9) and 2 output blocks each: memory holds
    // 1, 2, 3, 8, 9 + 2 + 2 = 9 blocks; decode reads each request's 4 + 2 = 6 blocks: 12
    Reservation r1 = ledger.reserve(A, 64, chain(1, 2, 3, 8), 2);
    Reservation r2 = ledger.reserve(A, 16, chain(1, 2, 3, 9), 2);
    assertThat(ledger.local(A).decodeBlocks()).isEqualTo(9);
    assertThat(ledger.local(A).contextBlocks()).isEqualTo(12);
    // the first byte releases prefill only: the request still decodes, reading its context every step
    ledger.prefillDone(r1);
    assertThat(ledger.local(A).contextBlocks()).isEqualTo(12);
    // another worker's reads are its own
    Reservation other = ledger.reserve(B, 0, chain(1, 2, 3), 0);
    assertThat(ledger.local(B).contextBlocks()).isEqualTo(3);
    assertThat(ledger.local(A).contextBlocks()).isEqualTo(12);
    ledger.release(r1);
    assertThat(ledger.local(A).decodeBlocks()).isEqualTo(6); // 1, 2, 3, 9 + 2
    assertThat(ledger.local(A).contextBlocks()).isEqualTo(6);
    ledger.release(r2);
    ledger.release(r2);
    ledger.release(other);
    assertThat(ledger.totals()).containsExactly(0, 0, 0, 0, 0);
    assertThat(ledger.local(A)).isEqualTo(LocalLoad.ZERO);
  }

  @Test
  void anExpiredReservationReleasesItsContext() {
    Reservation r = ledger.reserve(A, 0, chain(1, 2), 3);
    clock.advance(301, TimeUnit.SECONDS);
    assertThat(ledger.sweep()).isEqualTo(1);
    assertThat(r.released()).isTrue();
    assertThat(ledger.local(A).contextBlocks()).isZero();
    assertThat(ledger.totals()).containsExactly(0, 0, 0, 0, 0);
  }

  @Test
  void activePrefixBlocksFindsTheLongestHeldPrefixByBinarySearch() {
    ledger.reserve(A, 0, chain(10, 11, 12, 13, 14), 0);
    assertThat(ledger.activePrefixBlocks(A, chain(10, 11, 12, 13, 14, 15, 16))).isEqualTo(5);
    assertThat(ledger.activePrefixBlocks(A, chain(10, 11, 12, 99))).isEqualTo(3);
    assertThat(ledger.activePrefixBlocks(A, chain(10, 11, 12))).isEqualTo(3);
    assertThat(ledger.activePrefixBlocks(A, chain(77))).isZero();
    assertThat(ledger.activePrefixBlocks(A, chain())).isZero();
    assertThat(ledger.activePrefixBlocks(B, chain(10))).isZero();
    for (int n = 1; n <= 5; n++) {
      long[] probe = new long[n + 3];
      for (int i = 0; i < probe.length; i++) {
        probe[i] = i < n ? 10 + i : 1000 + i;
      }
      assertThat(ledger.activePrefixBlocks(A, probe)).as("prefix %d", n).isEqualTo(n);
    }
  }

  @Test
  void stragglersExpireAfterTheTtlAndOnlyThen() {
    Reservation old = ledger.reserve(A, 100, chain(1), 2);
    clock.advance(200, TimeUnit.SECONDS);
    Reservation young = ledger.reserve(A, 50, chain(5), 0);
    assertThat(ledger.sweep()).isZero();
    clock.advance(101, TimeUnit.SECONDS);
    assertThat(ledger.sweep()).isEqualTo(1);
    assertThat(old.released()).isTrue();
    assertThat(young.released()).isFalse();
    assertThat(ledger.local(A)).isEqualTo(new LocalLoad(50, 1, 1, 1, 50, 1, 1));
    assertThat(ledger.expired()).isEqualTo(1);
    // the response that finally ends releases nothing twice
    ledger.release(old);
    assertThat(ledger.local(A).decodeBlocks()).isEqualTo(1);
    ledger.release(young);
    assertThat(ledger.totals()).containsExactly(0, 0, 0, 0, 0);
  }

  /**
   * Turns are a Lamport clock over every replica's decisions: own reservations take the next one, a copied one
   * moves the clock up to its sender's, and each worker remembers the latest it was given, released or not.
   */
  @Test
  void turnsOrderEveryReplicasDecisionsAndEachWorkerKeepsItsLatest() {
    assertThat(ledger.lastTurn(A)).as("never given a request").isZero();
    Reservation first = ledger.reserve(A, 10, chain(1), 0);
    Reservation second = ledger.reserve(B, 10, chain(2), 0);
    assertThat(first.turn()).isEqualTo(1);
    assertThat(second.turn()).isEqualTo(2);
    ledger.release(first);
    assertThat(ledger.lastTurn(A)).as("kept after the release").isEqualTo(1);

    Reservation copied = ledger.reserveRemote(A, 10, chain(3), 0, 40, 0, 0); // a peer that has decided more
    assertThat(copied.turn()).isEqualTo(40);
    assertThat(ledger.lastTurn(A)).isEqualTo(40);
    assertThat(ledger.reserve(B, 10, chain(4), 0).turn()).as("after everything heard").isEqualTo(41);
    ledger.reserveRemote(B, 10, chain(5), 0, 7, 0, 0); // a late copy of an older decision
    assertThat(ledger.lastTurn(B)).as("an older turn does not move a worker back").isEqualTo(41);
    assertThat(ledger.reserveRemote(A, 10, chain(6), 0, 0, 0, 0).turn()).as("a peer that sends no turn")
        .isEqualTo(42);
  }

  /**
   * A peer's turn moves this ledger's clock up to it: one at Long.MAX_VALUE (a confused or hostile replica) made the
   * next own turn wrap negative, so no worker's last turn moved again and the least-recently-given tie-break froze
   * on one worker.
   */
  @Test
  void aPeersTurnNearTheTopOfALongCannotWrapTheClock() {
    ledger.reserveRemote(A, 10, chain(1), 0, Long.MAX_VALUE, 0, 0);
    ledger.noteTurn(A, Long.MAX_VALUE - 1);
    Reservation first = ledger.reserve(B, 10, chain(2), 0);
    Reservation second = ledger.reserve(A, 10, chain(3), 0);
    assertThat(first.turn()).isPositive();
    assertThat(second.turn()).isGreaterThan(first.turn());
    assertThat(ledger.lastTurn(B)).isEqualTo(first.turn());
    assertThat(ledger.lastTurn(A)).as("given a request after B").isGreaterThan(ledger.lastTurn(B));
  }

  @Test
  void aRequestTheFullLedgerCannotAccountStillTakesItsTurn() {
    LoadLedger small = new LoadLedger(clock, TimeUnit.SECONDS.toNanos(300), 1);
    small.reserve(A, 10, chain(1), 0);
    assertThat(small.reserve(B, 10, chain(2), 0)).isSameAs(Reservation.NONE);
    assertThat(small.lastTurn(B)).isEqualTo(2);
  }

  @Test
  void aFullLedgerRoutesWithoutAccounting() {
    LoadLedger small = new LoadLedger(clock, 1_000_000_000L, 2);
    small.reserve(A, 1, chain(), 1);
    small.reserve(A, 1, chain(), 1);
    Reservation r = small.reserve(A, 1, chain(), 1);
    assertThat(r).isSameAs(Reservation.NONE);
    assertThat(small.refused()).isEqualTo(1);
    assertThat(small.local(A).requests()).isEqualTo(2);
  }

  @Test
  void departedWorkersAreForgottenAndTheirReservationsStillReleaseSafely() {
    Reservation r = ledger.reserve(A, 100, chain(1, 2), 0);
    ledger.reserve(B, 100, chain(1), 0);
    ledger.retain(Set.of(B));
    assertThat(ledger.workers()).containsExactly(B);
    assertThat(ledger.local(A)).isEqualTo(LocalLoad.ZERO);
    ledger.release(r);
    assertThat(ledger.local(A)).isEqualTo(LocalLoad.ZERO); // a returning worker starts clean
    ledger.reserve(A, 10, chain(), 0);
    assertThat(ledger.local(A).prefillTokens()).isEqualTo(10);
  }

  /**
   * A peer's turns and copies name workers as the peer knows them: one naming workers this replica's fleet does
   * not hold (a hostile or confused peer, or many distinct names) must not add a ledger per name until the next
   * fleet change.
   */
  @Test
  void aPeerNamingWorkersOutsideTheFleetCreatesNoState() {
    ledger.retain(Set.of(A));
    for (int i = 0; i < 100; i++) {
      ledger.noteTurn(WorkerId.of("ghost-" + i), 5 + i);
    }
    Reservation copy = ledger.reserveRemote(WorkerId.of("ghost-x"), 10, chain(1, 2), 0, 200, 0, 0);
    assertThat(copy).isSameAs(Reservation.NONE);
    assertThat(ledger.workers()).isEmpty();
    assertThat(ledger.lastTurns()).isEmpty();
    assertThat(ledger.liveReservations()).isZero();
    // the clock still moves: ties stay ordered the same on every replica
    assertThat(ledger.reserve(A, 1, chain(), 0).turn()).isEqualTo(201);
    ledger.noteTurn(A, 300);
    assertThat(ledger.lastTurn(A)).isEqualTo(300);
    assertThat(ledger.reserveRemote(A, 10, chain(3), 0, 301, 0, 0)).isNotSameAs(Reservation.NONE);
  }

  /**
   * A scrape that was reading a worker's page when the worker left the fleet arrives after the fleet change: it made
   * the departed worker a ledger again, kept until the next fleet change.
   */
  @Test
  void aScrapeArrivingAfterItsWorkerLeftCreatesNoLedger() {
    ledger.retain(Set.of(A, B));
    ledger.retain(Set.of(A));
    ledger.scraped(B);
    assertThat(ledger.workers()).isEmpty();
  }

  /**
   * Another replica's copy carries its own block counts: the router bounds its own so that prompt and output blocks
   * stay an int, a peer's message (an older or confused replica) need not, and the sum wrapped negative, driving the
   * worker's context blocks below zero for as long as the copy lived.
   */
  @Test
  void aCopyWhoseBlocksOverflowAnIntCannotMakeTheContextNegative() {
    Reservation r = ledger.reserveRemote(A, 10, chain(1, 2, 3), Integer.MAX_VALUE, 0, 0, 0);
    LocalLoad l = ledger.local(A);
    assertThat(r.blocks()).isPositive();
    assertThat(l.contextBlocks()).isPositive();
    assertThat(l.contextBlocks()).isGreaterThanOrEqualTo(l.decodeBlocks());
    assertThat(ledger.meanContextBlocks()).isPositive();
    ledger.release(r);
    assertThat(ledger.totals()).containsExactly(0, 0, 0, 0, 0);
  }

  /**
   * A peer's copy carries its own prefill count, checked only for sign: two huge ones wrapped the worker's prefill
   * counter (and the mean prefill per reservation) negative, which made the worker the cheapest to send a prompt to.
   */
  @Test
  void copiesWithHugePrefillCannotWrapTheWorkersPrefillNegative() {
    Reservation r1 = ledger.reserveRemote(A, Long.MAX_VALUE / 2 + 1, chain(1), 0, 0, 0, 0);
    Reservation r2 = ledger.reserveRemote(A, Long.MAX_VALUE / 2 + 1, chain(2), 0, 0, 0, 0);
    assertThat(ledger.local(A).prefillTokens()).isPositive();
    assertThat(ledger.local(A).sincePrefillTokens()).isPositive();
    assertThat(ledger.meanPrefillTokens()).isPositive();
    ledger.release(r1);
    ledger.release(r2);
    assertThat(ledger.totals()).containsExactly(0, 0, 0, 0, 0);
  }

  @Test
  void theSinceCountersHoldTheNetChangeAfterTheLastScrape() {
    Reservation before = ledger.reserve(A, 100, chain(1, 2), 1);
    ledger.scraped(A);
    assertThat(ledger.local(A)).isEqualTo(new LocalLoad(100, 3, 3, 1, 0, 0, 0));
    Reservation after = ledger.reserve(A, 40, chain(1, 2, 3), 0);
    // one new distinct block (3), three of context (1, 2, 3 are read again by this request)
    assertThat(ledger.local(A)).isEqualTo(new LocalLoad(140, 4, 6, 2, 40, 1, 1));
    // made before the scrape, so the scrape counted it; now it is gone: the scrape overstates by what it held
    // alone (its prefill, its one unique block; blocks 1 and 2 are still held by the later request) and by all
    // three blocks of its context
    ledger.release(before);
    assertThat(ledger.local(A)).isEqualTo(new LocalLoad(40, 3, 3, 1, -60, 0, 0));
    ledger.prefillDone(after);
    ledger.release(after);
    assertThat(ledger.local(A)).isEqualTo(new LocalLoad(0, 0, 0, 0, -100, -3, -1));
    ledger.scraped(A);
    assertThat(ledger.local(A)).isEqualTo(LocalLoad.ZERO);
  }

  @Test
  void meanPrefillTokensAveragesEveryReservation() {
    ledger.reserve(A, 100, chain(), 0);
    ledger.reserve(B, 300, chain(), 0);
    assertThat(ledger.meanPrefillTokens()).isEqualTo(200.0);
    ledger.reserve(A, 0, chain(1, 2, 3), 5);
    // context 0, 0 and 8 blocks over three reservations
    assertThat(ledger.meanContextBlocks()).isEqualTo(8.0 / 3);
    assertThat(ledger.workers()).containsExactlyInAnyOrder(A, B);
  }

  @Test
  void aLongPromptCostsNoObjectPerBlock() {
    // a long document held by one request in flight; the next request reads it and adds 256 blocks of its own
    long[] document = java.util.stream.LongStream.rangeClosed(1, 512).toArray();
    long[] next = java.util.stream.LongStream.concat(java.util.stream.LongStream.rangeClosed(1, 256),
        java.util.stream.LongStream.rangeClosed(10_001, 10_256)).toArray();
    ledger.reserve(A, 8192, document, 0, 8192, 16);
    // and a worker that serves one such request at a time
    assertThat(bytesPerRequest(A, next)).isLessThan(2048);
    assertThat(bytesPerRequest(B, document)).isLessThan(2048);
    assertThat(ledger.local(A)).isEqualTo(new LocalLoad(8192, 512, 512, 1, 8192, 512, 1));
    assertThat(ledger.local(B)).isEqualTo(new LocalLoad(0, 0, 0, 0, 0, 0, 0));
    assertThat(ledger.activePrefixBlocks(A, next)).isEqualTo(256);
  }

  /** Allocation per reservation of {@code chain} on {@code worker}, its prefill done and released. */
  private long bytesPerRequest(WorkerId worker, long[] chain) {
    for (int i = 0; i < 50; i++) { // the ledger's tables at their size, the code compiled
      Reservation r = ledger.reserve(worker, 8192, chain, 2, 8192, 16);
      ledger.prefillDone(r);
      ledger.release(r);
    }
    com.sun.management.ThreadMXBean threads =
        (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
    int rounds = 100;
    long before = threads.getCurrentThreadAllocatedBytes();
    for (int i = 0; i < rounds; i++) {
      Reservation r = ledger.reserve(worker, 8192, chain, 2, 8192, 16);
      ledger.prefillDone(r);
      ledger.release(r);
    }
    // the reservation and its handful of objects; a boxed reference count per block was over 20 KB here
    return (threads.getCurrentThreadAllocatedBytes() - before) / rounds;
  }
}
