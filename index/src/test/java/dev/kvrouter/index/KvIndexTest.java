package dev.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

class KvIndexTest {

  private static long[] chain(int n, long seed) {
    long[] h = new long[n];
    for (int i = 0; i < n; i++) {
      h[i] = Mix.mix(seed * 1_000_003 + i);
    }
    return h;
  }

  /** Predictions live 5 s on workers with an event stream, 120 s on the others; at most {@code max} of them. */
  private static KvIndex predicting(TestClock clock, int max) {
    return new KvIndex(
        IndexConfig.defaults().withPredictions(Duration.ofSeconds(5), Duration.ofSeconds(120), max, 64), clock);
  }

  @Test
  void lookupSplitsTiersByBestTierAndStopsAtTheFirstGap() {
    KvIndex index = new KvIndex(IndexConfig.defaults(), new TestClock());
    WorkerId a = WorkerId.of("a");
    WorkerId b = new WorkerId("a", 1);
    long[] h = chain(10, 1);
    WorkerView va = index.register(a);
    for (int i = 0; i < 6; i++) {
      va.store(i, h[i], i < 3 ? Tier.GPU : Tier.CPU);
    }
    va.store(3, h[3], Tier.GPU); // block 3 in GPU and CPU counts as GPU
    va.store(6, h[6], Tier.DISK);
    va.store(8, h[8], Tier.GPU); // after the gap at 7: never counted
    index.register(b).store(0, h[0], Tier.DISK);
    PrefixMatches m = index.lookup(h, 10);
    int ia = m.indexOf(a);
    assertThat(m.matchedBlocks(ia)).isEqualTo(7);
    assertThat(m.gpuBlocks(ia)).isEqualTo(4);
    assertThat(m.cpuBlocks(ia)).isEqualTo(2);
    assertThat(m.diskBlocks(ia)).isEqualTo(1);
    int ib = m.indexOf(b);
    assertThat(m.matchedBlocks(ib)).isEqualTo(1);
    assertThat(m.diskBlocks(ib)).isEqualTo(1);
    assertThat(index.longestHeldPrefix(index.newCursor(), h, 10)).isEqualTo(7);
    assertThat(index.lookup(chain(3, 2), 3).size()).isZero();
  }

  @Test
  void eachWorkerEvictsItsOwnBeyondItsShare() {
    KvIndex index = new KvIndex(IndexConfig.defaults().withMaxEntries(4000, 500), new TestClock());
    WorkerView[] v = new WorkerView[4];
    for (int w = 0; w < 4; w++) {
      v[w] = index.register(WorkerId.of("w" + w));
    }
    assertThat(index.perWorkerCap()).isEqualTo(1000);
    long[] h = chain(5000, 3);
    for (int i = 0; i < h.length; i++) {
      v[0].store(i, h[i], Tier.GPU);
    }
    for (int i = 0; i < 600; i++) {
      v[1].store(i, h[i], Tier.GPU);
    }
    assertThat(v[0].size()).isLessThanOrEqualTo(1000);
    assertThat(v[0].evictions()).isEqualTo(5000 - v[0].size());
    assertThat(v[1].size()).isEqualTo(600);
    assertThat(v[1].evictions()).isZero();
    assertThat(index.entries()).isLessThanOrEqualTo(4000);
    // the table holds exactly the union of what the two workers still hold
    int union = 0;
    for (int i = 0; i < h.length; i++) {
      boolean held = v[0].tiers(h[i]) != 0 || v[1].tiers(h[i]) != 0;
      union += held ? 1 : 0;
    }
    assertThat(index.distinctBlocks()).isEqualTo(union);
    // most recent store is never the victim
    assertThat(v[0].tiers(h[4999])).isEqualTo(BlockTable.GPU);
  }

  @Test
  void removePurgesEverythingAndTheOrdinalIsReused() {
    TestClock clock = new TestClock();
    KvIndex index = new KvIndex(IndexConfig.defaults(), clock);
    WorkerId a = WorkerId.of("a");
    long[] h = chain(20, 4);
    WorkerView va = index.register(a);
    int ord = va.ordinal();
    for (int i = 0; i < 20; i++) {
      va.store(i, h[i], Tier.GPU);
    }
    index.predict(a, chain(5, 5), 5);
    assertThat(index.distinctBlocks()).isEqualTo(25);
    index.remove(a);
    assertThat(index.distinctBlocks()).isZero();
    assertThat(index.predictedEntries()).isZero();
    assertThat(index.lookup(h, 20).size()).isZero();
    WorkerView vb = index.register(WorkerId.of("b"));
    assertThat(vb.ordinal()).isEqualTo(ord);
    assertThat(index.lookup(chain(5, 5), 5).size()).as("no stale predicted bits inherited").isZero();
  }

  /**
   * A lookup that read a worker's blocks, and the worker is removed and its ordinal given to another before the
   * answer is built: the answer must not credit the newcomer (or the same worker registered afresh, with nothing)
   * with what the removed worker held, nor report it with the newcomer's stale flag. Deterministic through the
   * request path's incremental form (advance while tokenizing, then finish).
   */
  @Test
  void aLookupNeverCreditsARemovedWorkersBlocksToTheWorkerReusingItsOrdinal() {
    KvIndex index = new KvIndex(IndexConfig.defaults(), new TestClock());
    WorkerId a = WorkerId.of("a");
    WorkerId b = WorkerId.of("b");
    long[] doc = chain(8, 1);
    WorkerView keep = index.register(WorkerId.of("keep")); // holds the first 4 blocks throughout
    WorkerView va = index.register(a);
    for (int i = 0; i < doc.length; i++) {
      if (i < 4) {
        keep.store(100 + i, doc[i], Tier.GPU);
      }
      va.store(1000 + i, doc[i], Tier.GPU);
    }
    PrefixCursor cursor = index.newCursor();
    PrefixMatches out = new PrefixMatches();

    for (WorkerId newcomer : new WorkerId[] {b, a}) {
      cursor.reset();
      for (long h : doc) {
        assertThat(cursor.advance(h)).isTrue();
      }
      index.remove(a); // the fleet changes while the answer is pending: a leaves, newcomer takes its ordinal
      WorkerView vn = index.register(newcomer);
      assertThat(vn.ordinal()).isEqualTo(va.ordinal());
      vn.setStale(true);
      cursor.finish(out);
      assertThat(out.indexOf(newcomer)).as("%s holds nothing, but the answer is %s", newcomer, out).isEqualTo(-1);
      assertThat(out.matchedBlocks(out.indexOf(WorkerId.of("keep")))).isEqualTo(4);
      // the next lookup sees the fleet as it is
      index.remove(newcomer);
      va = index.register(a);
      for (int i = 0; i < doc.length; i++) {
        va.store(1000 + i, doc[i], Tier.GPU);
      }
      PrefixMatches now = index.lookup(doc, doc.length);
      assertThat(now.matchedBlocks(now.indexOf(a))).isEqualTo(8);
    }
  }

  /**
   * A prediction for a worker that left the fleet (an in-flight request's, a late background one) must not
   * register it again: it would keep an ordinal, shrink every worker's share and hold long-lived predictions.
   * Workers the fleet lists are still registered by their first prediction (approximate mode).
   */
  @Test
  void predictionsRegisterOnlyWorkersTheFleetLists() {
    KvIndex index = new KvIndex(IndexConfig.defaults(), new TestClock());
    WorkerId a = WorkerId.of("a");
    WorkerId b = WorkerId.of("b");
    long[] h = chain(4, 9);
    index.setFleet(List.of(a, b));
    assertThat(index.predict(a, h, 4)).as("a worker without events, in the fleet").isTrue();
    assertThat(index.predict(b, h, 4)).isTrue();
    assertThat(index.workers()).containsExactlyInAnyOrder(a, b);
    int share = index.perWorkerCap();

    index.setFleet(List.of(a)); // b leaves: the fleet's owner removes it
    index.remove(b);
    long dropped = index.predictionsDropped();
    assertThat(index.predict(b, h, 4)).as("a late prediction for b").isFalse();
    assertThat(index.predict(WorkerId.of("never"), h, 4)).isFalse();
    assertThat(index.predictionsDropped()).isEqualTo(dropped + 2);
    assertThat(index.workers()).containsExactly(a);
    assertThat(index.perWorkerCap()).isGreaterThan(share);
    PrefixMatches m = index.lookup(h, 4);
    assertThat(m.size()).isEqualTo(1);
    assertThat(m.predictedBlocks(m.indexOf(a))).isEqualTo(4);

    index.setFleet(List.of(a, b)); // b comes back
    assertThat(index.predict(b, h, 4)).isTrue();
    assertThat(index.workers()).containsExactlyInAnyOrder(a, b);
  }

  @Test
  void predictionsExpireByTheWorkersTtlClass() {
    TestClock clock = new TestClock();
    KvIndex index = predicting(clock, 1000);
    WorkerId live = WorkerId.of("live");
    WorkerId approx = WorkerId.of("approx");
    index.register(live).setEventStream(true);
    long[] h = chain(8, 6);
    index.predict(live, h, 8);
    index.predict(approx, h, 4);
    PrefixMatches m = index.lookup(h, 8);
    assertThat(m.predictedBlocks(m.indexOf(live))).isEqualTo(8);
    assertThat(m.matchedBlocks(m.indexOf(live))).isZero();
    assertThat(m.overlapBlocks(m.indexOf(live))).isEqualTo(8);
    assertThat(m.predictedBlocks(m.indexOf(approx))).isEqualTo(4);
    clock.advance(5_000);
    index.maintain();
    m = index.lookup(h, 8);
    assertThat(m.indexOf(live)).isEqualTo(-1);
    assertThat(m.predictedBlocks(m.indexOf(approx))).isEqualTo(4);
    // re-predicting refreshes: the older entry expiring does not remove the bit
    clock.advance(100_000);
    index.predict(approx, h, 2);
    clock.advance(20_001);
    index.maintain();
    m = index.lookup(h, 8);
    assertThat(m.predictedBlocks(m.indexOf(approx))).isEqualTo(2);
    assertThat(index.predictionsExpired()).isEqualTo(8 + 4);
  }

  @Test
  void predictionsAreBounded() {
    TestClock clock = new TestClock();
    KvIndex index = predicting(clock, 100);
    for (int k = 0; k < 50; k++) {
      index.predict(WorkerId.of("w" + (k % 3)), chain(10, 100 + k), 10);
    }
    index.maintain();
    assertThat(index.predictedEntries()).isEqualTo(100);
    assertThat(index.predictionsEvicted()).isEqualTo(400);
    // the newest survive, the oldest went first
    assertThat(index.lookup(chain(10, 149), 10).longest()).isEqualTo(10);
    assertThat(index.lookup(chain(10, 100), 10).size()).isZero();
  }

  @Test
  void aReusedEngineHandleRepointsWithoutLeaking() {
    KvIndex index = new KvIndex(IndexConfig.defaults(), new TestClock());
    WorkerView v = index.register(WorkerId.of("a"));
    v.store(42, 1001, Tier.GPU);
    v.store(42, 1001, Tier.GPU); // duplicate store: refcounted
    v.store(42, 2002, Tier.GPU); // same handle, different block: the old residency goes
    assertThat(v.conflicts()).isEqualTo(1);
    assertThat(v.tiers(1001)).isZero();
    assertThat(v.tiers(2002)).isEqualTo(BlockTable.GPU);
    assertThat(v.remove(42, Tier.GPU)).isTrue();
    assertThat(v.size()).isZero();
    assertThat(index.distinctBlocks()).isZero();
    assertThat(v.remove(42, Tier.GPU)).as("unknown handle").isFalse();
  }

  @Test
  void aFullPredictionQueueDropsAndCounts() throws Exception {
    TestClock clock = new TestClock();
    KvIndex index = new KvIndex(
        IndexConfig.defaults().withPredictions(Duration.ofSeconds(5), Duration.ofSeconds(120), 10_000, 2), clock);
    // hold the drain lock from another thread so offers cannot drain inline
    java.util.concurrent.CountDownLatch held = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
    java.lang.reflect.Field f = KvIndex.class.getDeclaredField("predicted");
    f.setAccessible(true);
    PredictedBlocks pb = (PredictedBlocks) f.get(index);
    java.lang.reflect.Field lf = PredictedBlocks.class.getDeclaredField("drainLock");
    lf.setAccessible(true);
    java.util.concurrent.locks.ReentrantLock lock = (java.util.concurrent.locks.ReentrantLock) lf.get(pb);
    Thread t = new Thread(() -> {
      lock.lock();
      held.countDown();
      try {
        release.await();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } finally {
        lock.unlock();
      }
    });
    t.start();
    held.await();
    assertThat(index.predict(WorkerId.of("a"), chain(2, 1), 2)).isTrue();
    assertThat(index.predict(WorkerId.of("a"), chain(2, 2), 2)).isTrue();
    assertThat(index.predict(WorkerId.of("a"), chain(2, 3), 2)).isFalse();
    assertThat(index.predictionsDropped()).isEqualTo(1);
    release.countDown();
    t.join();
    index.maintain();
    assertThat(index.predictedEntries()).isEqualTo(4);
  }

  /**
   * The prediction rings and the multiplicity map are the index's memory too: the gauge counts them while they
   * hold entries, and they give their slots back once the entries expire (or their worker leaves).
   */
  @Test
  void predictionsAreMeasuredAndGiveTheirMemoryBackWhenTheyExpire() {
    TestClock clock = new TestClock();
    KvIndex index = predicting(clock, 200_000);
    WorkerId live = WorkerId.of("live");
    WorkerId approx = WorkerId.of("approx");
    index.register(live).setEventStream(true);
    index.register(approx);
    index.maintain();
    long before = index.footprintBytes();
    for (int k = 0; k < 500; k++) {
      index.predict(live, chain(100, k), 100);
      index.predict(approx, chain(100, 10_000 + k), 100);
    }
    index.maintain();
    assertThat(index.predictedEntries()).isEqualTo(100_000);
    // per entry at least a ring slot (8 + 4 + 8 bytes) and a multiplicity slot (12 bytes), besides the table's
    assertThat(index.footprintBytes() - before).isGreaterThan(100_000L * (20 + 12 + 16));
    clock.advance(5_000);
    index.maintain(); // the short class expires
    index.remove(approx); // the long class goes with its worker
    assertThat(index.predictedEntries()).isZero();
    assertThat(index.footprintBytes()).isLessThanOrEqualTo(before);
  }

  /** Everything a worker brought goes with it: an index whose workers all left is as small as a new one. */
  @Test
  void anIndexWhoseWorkersAllLeftIsAsSmallAsANewOne() {
    TestClock clock = new TestClock();
    KvIndex index = new KvIndex(IndexConfig.defaults(), clock);
    long fresh = index.footprintBytes();
    long[] h = chain(20_000, 11);
    for (int w = 0; w < 6; w++) {
      WorkerView v = index.register(WorkerId.of("w" + w));
      for (int i = 0; i < h.length; i++) {
        v.store(i + 1, h[i], Tier.GPU);
        if (i % 4 == 0) {
          v.store(i + 1, h[i], Tier.GPU); // a duplicate, reference-counted aside
        }
      }
    }
    assertThat(index.sharedBlocks()).isEqualTo(h.length);
    for (int w = 0; w < 6; w++) {
      index.remove(WorkerId.of("w" + w));
    }
    assertThat(index.distinctBlocks()).isZero();
    assertThat(index.footprintBytes()).isLessThanOrEqualTo(fresh);
  }
}
