package dev.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** The open-addressing maps against java.util.HashMap, with small key spaces so probe runs collide and wrap. */
class PrimitiveMapsTest {

  @Test
  void longLongMapMatchesHashMap() {
    for (long seed = 1; seed <= 20; seed++) {
      SplittableRandom r = new SplittableRandom(seed);
      LongLongMap m = new LongLongMap();
      Map<Long, Long> ref = new HashMap<>();
      int keySpace = 1 + r.nextInt(3000);
      for (int step = 0; step < 20_000; step++) {
        long k = r.nextInt(keySpace) - 5; // includes 0 and negatives
        String at = "seed " + seed + " step " + step;
        switch (r.nextInt(4)) {
          case 0, 1 -> {
            long v = r.nextLong();
            assertThat(m.put(k, v)).as(at).isEqualTo(ref.put(k, v) == null);
          }
          case 2 -> assertThat(m.remove(k)).as(at).isEqualTo(ref.remove(k) != null);
          default -> {
            assertThat(m.containsKey(k)).as(at).isEqualTo(ref.containsKey(k));
            if (ref.containsKey(k)) {
              assertThat(m.get(k, 7)).as(at).isEqualTo(ref.get(k));
            }
          }
        }
        assertThat(m.size()).as(at).isEqualTo(ref.size());
      }
      // every entry reachable by slot iteration exactly once (zero key aside)
      int seen = m.hasZeroKey() ? 1 : 0;
      for (int i = 0; i < m.capacity(); i++) {
        if (m.usedAt(i)) {
          seen++;
          assertThat(ref.get(m.keyAt(i))).isEqualTo(m.valueAt(i));
        }
      }
      assertThat(seen).isEqualTo(ref.size());
    }
  }

  @Test
  void longIntMapMatchesHashMap() {
    for (long seed = 1; seed <= 20; seed++) {
      SplittableRandom r = new SplittableRandom(seed);
      LongIntMap m = new LongIntMap();
      Map<Long, Integer> ref = new HashMap<>();
      int keySpace = 1 + r.nextInt(500);
      for (int step = 0; step < 20_000; step++) {
        long k = r.nextInt(keySpace) - 3;
        int delta = r.nextInt(5) - 2;
        int expected = ref.getOrDefault(k, 0) + delta;
        if (expected == 0) {
          ref.remove(k);
        } else {
          ref.put(k, expected);
        }
        assertThat(m.add(k, delta)).as("seed %d step %d", seed, step).isEqualTo(expected);
        assertThat(m.size()).isEqualTo(ref.size());
        long q = r.nextInt(keySpace) - 3;
        assertThat(m.get(q)).isEqualTo(ref.getOrDefault(q, 0));
      }
    }
  }

  /**
   * Both maps give their slots back once emptied by removals alone (a worker's duplicate counts as its blocks go,
   * the predictions' multiplicities as they expire), not only on {@code clear()}: a fleet that churns must not keep
   * its peak table sizes.
   */
  @Test
  void mapsEmptiedByRemovalsGiveTheirCapacityBack() {
    LongIntMap counts = new LongIntMap();
    LongLongMap handles = new LongLongMap();
    long countsEmpty = counts.footprintBytes();
    long handlesEmpty = handles.footprintBytes();
    for (long k = 1; k <= 100_000; k++) {
      counts.add(k, 2);
      handles.put(k, k);
    }
    assertThat(counts.footprintBytes()).isGreaterThan(1_000_000);
    assertThat(handles.footprintBytes()).isGreaterThan(1_000_000);
    for (long k = 1; k <= 100_000; k++) {
      counts.add(k, -1);
      counts.add(k, -1);
      handles.remove(k);
    }
    assertThat(counts.size()).isZero();
    assertThat(counts.footprintBytes()).isEqualTo(countsEmpty);
    assertThat(handles.footprintBytes()).isLessThanOrEqualTo(handlesEmpty);
    // and still a map: it grows again and finds what it holds
    for (long k = 1; k <= 1000; k++) {
      counts.add(k, 1);
    }
    for (long k = 1; k <= 1000; k++) {
      assertThat(counts.get(k)).isEqualTo(1);
    }
  }
}
