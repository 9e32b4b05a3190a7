package dev.kvrouter.extproc.load;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.index.WorkerId;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The blend rule: max(local, scraped + local since that scrape), per signal. */
class LoadTrackerTest {

  static final WorkerId W = WorkerId.of("w");
  final FakeClock clock = new FakeClock();
  final LoadLedger ledger = new LoadLedger(clock, TimeUnit.SECONDS.toNanos(300), 1000);
  final Map<WorkerId, ScrapedLoad> scraped = new HashMap<>();
  final LoadTracker tracker = new LoadTracker(ledger, scraped::get, clock, TimeUnit.SECONDS.toNanos(2));

  void scrape(double running, double waiting, double usage, long blocks) {
    ledger.scraped(W);
    scraped.put(W, new ScrapedLoad(running, waiting, usage, blocks, clock.getAsLong()));
  }

  @Test
  void withoutAScrapeTheLedgerIsTheLoad() {
    ledger.reserve(W, 320, new long[] {1, 2}, 1);
    assertThat(tracker.load(W)).isEqualTo(new WorkerLoad(320, 3, 3, 1, -1, Double.NaN, false));
  }

  @Test
  void otherReplicasTrafficShowsThroughTheScrape() {
    // this replica has one request in flight; the worker reports 10 running and 4 waiting (the others' traffic)
    ledger.reserve(W, 200, new long[] {1, 2, 3}, 0);
    ledger.reserve(W, 200, new long[] {7}, 0);
    scrape(10, 4, 0.5, 1000);
    WorkerLoad l = tracker.load(W);
    assertThat(l.requests()).isEqualTo(14); // max(2 local, 10 + 4 + 0 since)
    // engines report no context: 14 requests at this replica's 2 blocks per request there (4 context / 2)
    assertThat(l.contextBlocks()).isEqualTo(28);
    assertThat(l.decodeBlocks()).isEqualTo(500); // max(4 local, 0.5 x 1000 + 0 since)
    assertThat(l.prefillTokens()).isEqualTo(800); // max(400, 0 since + 4 waiting x 200 mean)
    assertThat(l.waiting()).isEqualTo(4);
    assertThat(l.kvUsage()).isEqualTo(0.5);
    assertThat(l.scraped()).isTrue();
  }

  @Test
  void reservationsSinceTheScrapeAddOnTopUntilTheNextScrape() {
    scrape(2, 0, 0.1, 1000);
    ledger.reserve(W, 160, new long[] {1, 2, 3, 4, 5}, 5);
    WorkerLoad l = tracker.load(W);
    assertThat(l.requests()).isEqualTo(3); // 2 scraped + 1 since
    assertThat(l.decodeBlocks()).isEqualTo(110); // 100 scraped + 10 since
    assertThat(l.prefillTokens()).isEqualTo(160); // max(160 local, 160 since + 0 waiting)
    // the next scrape includes the request; the since counters restart from it
    scrape(3, 0, 0.11, 1000);
    l = tracker.load(W);
    assertThat(l.requests()).isEqualTo(3);
    assertThat(l.decodeBlocks()).isEqualTo(110);
  }

  @Test
  void aRequestThatFinishesAfterTheScrapeLeavesTheBooksAtOnce() {
    // a long prompt is running when the scrape is taken: the worker reports its 188 blocks in use
    Reservation r = ledger.reserve(W, 3000, java.util.stream.LongStream.rangeClosed(1, 188).toArray(), 0);
    scrape(1, 0, 0.188, 1000);
    assertThat(tracker.load(W).decodeBlocks()).isEqualTo(188);
    ledger.prefillDone(r);
    ledger.release(r);
    // it finished before the next scrape: the blocks are now cached, not in use, and must not count as load
    WorkerLoad l = tracker.load(W);
    assertThat(l.decodeBlocks()).isZero();
    assertThat(l.requests()).isZero();
    assertThat(l.prefillTokens()).isZero();
  }

  @Test
  void theLocalViewIsAFloorWhenTheScrapeLags() {
    scrape(0, 0, 0.0, 1000);
    for (int i = 0; i < 5; i++) {
      ledger.reserve(W, 100, new long[] {i * 10L}, 0);
    }
    ledger.scraped(W); // a scrape taken before the engine saw them: reports nothing
    scraped.put(W, new ScrapedLoad(0, 0, 0.0, 1000, clock.getAsLong()));
    WorkerLoad l = tracker.load(W);
    assertThat(l.requests()).isEqualTo(5);
    assertThat(l.decodeBlocks()).isEqualTo(5);
    assertThat(l.prefillTokens()).isEqualTo(500);
    assertThat(l.kvUsage()).isEqualTo(0.005); // local blocks over capacity beat the scraped 0
  }

  @Test
  void contextOfOtherReplicasRequestsIsEstimatedFromTheReplicasOwnMean() {
    // nothing of ours on W, 6 blocks per request elsewhere: the scrape's 3 requests read about 18 blocks
    ledger.reserve(WorkerId.of("other"), 0, new long[] {1, 2, 3, 4}, 2);
    scrape(3, 0, 0.0, 1000);
    assertThat(tracker.load(W).contextBlocks()).isEqualTo(18);
    // the scrape agrees with the ledger (one router replica): the exact local figure, no estimate
    ledger.reserve(W, 0, new long[] {5}, 0);
    ledger.reserve(W, 0, new long[] {5, 6, 7}, 0);
    ledger.reserve(W, 0, new long[] {8}, 1);
    scrape(3, 0, 0.0, 1000);
    assertThat(tracker.load(W).contextBlocks()).isEqualTo(6);
  }

  @Test
  void anOldScrapeIsIgnored() {
    scrape(50, 50, 0.9, 1000);
    clock.advance(3, TimeUnit.SECONDS);
    ledger.reserve(W, 10, new long[0], 1);
    WorkerLoad l = tracker.load(W);
    assertThat(l.scraped()).isFalse();
    assertThat(l.requests()).isEqualTo(1);
    assertThat(l.waiting()).isEqualTo(-1);
    assertThat(l.kvUsage()).isEqualTo(0.001); // capacity is still known
  }

  @Test
  void withoutCapacityTheScrapedUsageCannotBecomeBlocks() {
    ledger.reserve(W, 10, new long[] {1}, 0);
    scrape(1, 0, 0.8, 0);
    WorkerLoad l = tracker.load(W);
    assertThat(l.decodeBlocks()).isEqualTo(1);
    assertThat(l.kvUsage()).isEqualTo(0.8);
  }
  /**
   * A page the parser accepts can hold any finite number: one huge gauge saturated Math.round at Long.MAX_VALUE, and
   * the "since" counter added to it wrapped to Long.MIN_VALUE, so the worker reporting the most looked idle.
   */
  @Test
  void aHugeScrapedGaugeCannotWrapTheLoadToLookIdle() {
    scrape(1e19, 1e19, 1e300, 1000);
    ledger.reserve(W, 100, new long[] {1}, 0);
    WorkerLoad l = tracker.load(W);
    assertThat(l.requests()).as("requests").isGreaterThan(1_000_000);
    assertThat(l.decodeBlocks()).as("decode blocks: usage at most the whole cache").isEqualTo(1001);
    assertThat(l.prefillTokens()).as("prefill").isGreaterThan(1_000_000);
    assertThat(l.contextBlocks()).as("context").isGreaterThan(1_000_000);
    assertThat(l.kvUsage()).isEqualTo(1.0);
  }

  /**
   * A negative gauge plus a negative "since" (a request released after the scrape) wrapped Long.MIN_VALUE over to
   * Long.MAX_VALUE: an idle worker looked infinitely loaded, and its negative waiting count reached the policies.
   */
  @Test
  void aNegativeScrapedGaugeCannotMakeALoadNegativeOrHuge() {
    Reservation r = ledger.reserve(W, 100, new long[] {1}, 0);
    scrape(-1e19, -5, -0.5, 1000);
    ledger.release(r);
    WorkerLoad l = tracker.load(W);
    assertThat(l.requests()).isZero();
    assertThat(l.decodeBlocks()).isZero();
    assertThat(l.contextBlocks()).isZero();
    assertThat(l.prefillTokens()).isZero();
    assertThat(l.waiting()).isZero();
    assertThat(l.kvUsage()).isZero();
  }
}
