package dev.kvrouter.extproc.routing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class EvictionPressureTest {

  static final double D = EvictionPressure.DECAY;

  /** {@code n} random block hashes of which every one is sampled (top three bits zero). */
  static long[] sampled(SplittableRandom r, int n) {
    long[] h = new long[n];
    for (int i = 0; i < n; i++) {
      h[i] = r.nextLong() >>> 3;
    }
    return h;
  }

  @Test
  void blocksNoWorkerHoldsThatCameBeforeAreEvictedOnesHeldOrNewOnesAreNot() {
    SplittableRandom r = new SplittableRandom(1);
    EvictionPressure p = new EvictionPressure(1 << 16);
    long[] doc = sampled(r, 40);
    assertThat(p.observe(doc, 0).evictionShare()).isZero(); // the share before it: nothing yet
    assertThat(p.share()).isZero(); // all 40 new

    // The same document again while a worker holds all of it: nothing came back from eviction.
    assertThat(p.observe(doc, 40).evictionShare()).isZero();
    assertThat(p.share()).isZero();

    // Again, a worker holding only its first 10 blocks: 30 came back.
    p.observe(doc, 10);
    double blocks = (40 * D + 40) * D + 40;
    assertThat(p.share()).isCloseTo(30 / blocks, within(1e-12));

    // A fresh prompt nobody holds: nothing came back, the share falls.
    double before = p.share();
    assertThat(p.observe(sampled(r, 40), 0).evictionShare()).isEqualTo(before);
    assertThat(p.share()).isCloseTo(30 * D / (blocks * D + 40), within(1e-12));
  }

  @Test
  void afterAWorkersCacheWasEmptiedWhatComesBackIsNotCountedAndTheShareSoFarDecays() {
    SplittableRandom r = new SplittableRandom(9);
    EvictionPressure p = new EvictionPressure(1 << 16);
    long[] doc = sampled(r, 40);
    long[] other = sampled(r, 40);
    p.observe(doc, 0);
    p.observe(doc, 0); // came back: all 40
    double share = p.share();
    assertThat(share).isCloseTo(40 / (40 * D + 40), within(1e-12));
    p.observe(other, 0);

    p.forgetSeen();
    // both were seen before the reset; neither counts now, and the share measured so far only decays
    double blocks = (40 * D + 40) * D + 40;
    assertThat(p.observe(doc, 0).evictionShare()).isCloseTo(40 * D / blocks, within(1e-12));
    assertThat(p.observe(other, 0).evictionShare()).isCloseTo(40 * D * D / (blocks * D + 40), within(1e-12));
    assertThat(p.share()).isCloseTo(40 * D * D * D / ((blocks * D + 40) * D + 40), within(1e-12));
    // seen again after the reset: an eviction again
    p.observe(doc, 0);
    assertThat(p.share()).isGreaterThan(40 * D * D * D * D / (((blocks * D + 40) * D + 40) * D + 40));
  }

  @Test
  void onlyHashesWithTheTopThreeBitsZeroAreTrackedSoEveryBlockIsAlwaysOrNeverSampled() {
    SplittableRandom r = new SplittableRandom(2);
    long[] unsampled = new long[64];
    for (int i = 0; i < unsampled.length; i++) {
      unsampled[i] = (r.nextLong() >>> 3) | ((1L + r.nextInt(7)) << 61);
    }
    EvictionPressure p = new EvictionPressure(1 << 16);
    p.observe(unsampled, 0);
    p.observe(unsampled, 0);
    assertThat(p.share()).isZero();

    // Mixed: about one in eight of random hashes is tracked, and the share is theirs alone.
    long[] mixed = new long[8000];
    for (int i = 0; i < mixed.length; i++) {
      mixed[i] = r.nextLong();
    }
    EvictionPressure q = new EvictionPressure(1 << 22); // no two of this seed's ~1,000 tracked blocks share a slot
    q.observe(mixed, 0);
    q.observe(Arrays.copyOf(mixed, 4000), 0); // half of it comes back
    // tracked blocks in the first half / (all tracked x D + tracked in the first half)
    long firstHalf = Arrays.stream(mixed, 0, 4000).filter(h -> h >>> 61 == 0).count();
    long all = Arrays.stream(mixed).filter(h -> h >>> 61 == 0).count();
    assertThat(all).isBetween(800L, 1200L);
    assertThat(q.share()).isCloseTo(firstHalf / (all * D + firstHalf), within(1e-12));
  }

  @Test
  void aSlotRemembersTheLastBlockWrittenToIt() {
    EvictionPressure p = new EvictionPressure(4); // four slots: hashes 4 apart share one
    long a = 1L << 29; // slot 0, fingerprint 1
    long b = (2L << 29); // slot 0, fingerprint 2
    p.observe(new long[] {a}, 0);
    p.observe(new long[] {b}, 0); // overwrites a
    p.observe(new long[] {a}, 0); // forgotten: counted as new
    assertThat(p.share()).isZero();
    p.observe(new long[] {a}, 0); // remembered now
    assertThat(p.share()).isGreaterThan(0);
  }

  @Test
  void theShareIsAMovingAverageThatForgetsOldRequests() {
    SplittableRandom r = new SplittableRandom(3);
    EvictionPressure p = new EvictionPressure(1 << 20);
    long[] doc = sampled(r, 16);
    p.observe(doc, 0);
    p.observe(doc, 0); // 16 of 32 came back
    assertThat(p.share()).isCloseTo(16 / (16 * D + 16), within(1e-12));
    for (int i = 0; i < 5000; i++) {
      p.observe(sampled(r, 16), 0);
    }
    // 16 x D^5000 / (about 16 / (1 - D)): five thousand fresh requests later it is all but gone
    assertThat(p.share()).isLessThan(1e-3).isGreaterThan(0);
  }

  @Test
  void theHeldPrefixsHeatIsItsShareOfRecentRequestsAndScalesTheChargedShareDown() {
    SplittableRandom r = new SplittableRandom(4);
    EvictionPressure p = new EvictionPressure(1 << 16);
    long[] hot = sampled(r, 8);
    assertThat(p.observe(hot, 8).prefixHeat()).isZero(); // first time: no share yet
    p.observe(sampled(r, 8), 0); // a request reusing nothing counts in the total
    // 1 of 2 requests (decayed: 1 x D / (1 x D + 1)) held a prefix ending in hot's last block
    assertThat(p.observe(hot, 8).prefixHeat()).isCloseTo(D / (D + 1), within(1e-12));
    assertThat(p.observe(hot, 3).prefixHeat()).isZero(); // a shorter held prefix is another prefix

    EvictionPressure.Reading cold = new EvictionPressure.Reading(0.2, 0.05);
    assertThat(cold.chargedShare(8)).isCloseTo(0.2 * 0.6, within(1e-12)); // 5% of requests on 8 owners: 40% of one's
    assertThat(new EvictionPressure.Reading(0.2, 0.125).chargedShare(8)).isZero(); // one owner's share: none
    assertThat(new EvictionPressure.Reading(0.2, 0.5).chargedShare(8)).isZero();
    assertThat(new EvictionPressure.Reading(0.2, 0).chargedShare(8)).isEqualTo(0.2);

    // where the exemption ends, the base charge's relief starts: owners' shares past the first, capped at 1
    assertThat(cold.hotExcess(8)).isZero();
    assertThat(new EvictionPressure.Reading(0.2, 0.125).hotExcess(8)).isZero(); // one owner's share
    assertThat(new EvictionPressure.Reading(0, 0.1875).hotExcess(8)).isCloseTo(0.5, within(1e-12)); // 1.5 owners'
    assertThat(new EvictionPressure.Reading(0, 0.25).hotExcess(8)).isEqualTo(1.0); // two owners'
    assertThat(new EvictionPressure.Reading(0, 1).hotExcess(8)).isEqualTo(1.0);
  }

  @Test
  void heatKeepsTheHeavyHittersAmongManyColdPrefixes() {
    PrefixHeat heat = new PrefixHeat();
    SplittableRandom r = new SplittableRandom(5);
    double last = 0;
    for (int i = 0; i < 20_000; i++) {
      if (i % 4 == 0) {
        last = heat.observe(42L); // a quarter of the requests
      } else {
        heat.observe(r.nextLong()); // each of the rest seen once: they churn the other 63 counters
      }
    }
    assertThat(last).isCloseTo(0.25, within(0.01));
  }

  /**
   * More prefixes in use than {@link PrefixHeat#SLOTS}, none near one worker's share: Space-Saving's newcomer
   * inherits the smallest count, and read whole that inherited count made prefixes with 0.5% of the requests read
   * up to 1.9%, lifting their eviction charge at 64 owners (1.56% is one owner's share) though none was hot.
   */
  @Test
  void noPrefixReadsHotterThanItsShareWhenMorePrefixesThanSlotsAreInUse() {
    EvictionPressure p = new EvictionPressure(1024);
    java.util.Random rnd = new java.util.Random(1);
    int owners = 64;
    double maxHeat = 0;
    for (int i = 0; i < 20_000; i++) {
      long key = 1_000_003L * (1 + rnd.nextInt(200)); // 200 prefixes of 0.5% each
      EvictionPressure.Reading reading = p.observe(new long[] {key}, 1);
      if (i >= 5_000) {
        maxHeat = Math.max(maxHeat, reading.prefixHeat());
      }
    }
    assertThat(maxHeat).as("heat of a prefix with 0.5% of the requests").isLessThan(0.01);
    // chargedShare's factor, 1 - heat x owners: the charge stays at least a third, never lifted whole
    assertThat(new EvictionPressure.Reading(1, maxHeat).chargedShare(owners)).isGreaterThan(0.3);
  }

  @Test
  void slotsAreBoundedAndRoundedUpToAPowerOfTwo() {
    assertThat(new EvictionPressure(1000).bytes()).isEqualTo(4 * 1024);
    assertThat(new EvictionPressure(1024).bytes()).isEqualTo(4 * 1024);
    assertThatThrownBy(() -> new EvictionPressure(0)).hasMessageContaining("slots");
    assertThatThrownBy(() -> new EvictionPressure(EvictionPressure.MAX_SLOTS + 1)).hasMessageContaining("2^28");
  }
}
