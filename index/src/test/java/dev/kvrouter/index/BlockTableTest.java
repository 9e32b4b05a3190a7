package dev.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class BlockTableTest {

  private static long[] read(BlockTable t, long h, int words) {
    long[] g = new long[words];
    long[] c = new long[words];
    long[] d = new long[words];
    long[] p = new long[words];
    boolean found = t.read(h, 0, words - 1, g, c, d, p, null);
    long any = 0;
    for (int w = 0; w < words; w++) {
      any |= g[w] | c[w] | d[w] | p[w];
    }
    assertThat(found).as("found iff some holder bit in range").isEqualTo(any != 0 || found);
    long[] out = new long[4 * words];
    System.arraycopy(g, 0, out, 0, words);
    System.arraycopy(c, 0, out, words, words);
    System.arraycopy(d, 0, out, 2 * words, words);
    System.arraycopy(p, 0, out, 3 * words, words);
    return out;
  }

  @Test
  void inlineHoldersSpillToBitsetsAndComeBack() {
    BlockTable t = new BlockTable(4, 8);
    long h = 12345;
    assertThat(t.add(h, 1, BlockTable.GPU)).isZero();
    assertThat(t.add(h, 1, BlockTable.CPU)).isEqualTo(BlockTable.GPU);
    assertThat(t.add(h, 70, BlockTable.DISK)).isZero();
    assertThat(t.add(h, 3, BlockTable.PREDICTED)).isZero();
    assertThat(t.overflowBlocks()).isZero();
    assertThat(t.add(h, 200, BlockTable.GPU)).isZero(); // fourth holder: overflow
    assertThat(t.overflowBlocks()).isEqualTo(1);
    long[] r = read(t, h, 4);
    assertThat(r[0]).isEqualTo(1L << 1 | 0); // GPU word 0: ordinal 1
    assertThat(r[3]).isEqualTo(1L << (200 - 192)); // GPU word 3: ordinal 200
    assertThat(r[4]).isEqualTo(1L << 1); // CPU word 0
    assertThat(r[8 + 1]).isEqualTo(1L << (70 - 64)); // DISK word 1
    assertThat(r[12]).isEqualTo(1L << 3); // PREDICTED word 0
    assertThat(t.tiers(h, 1)).isEqualTo(BlockTable.GPU | BlockTable.CPU);
    assertThat(t.remove(h, 200, BlockTable.GPU)).isZero();
    assertThat(t.overflowBlocks()).as("back to inline with three holders").isZero();
    assertThat(t.tiers(h, 70)).isEqualTo(BlockTable.DISK);
    assertThat(t.remove(h, 1, BlockTable.REAL)).isZero();
    assertThat(t.remove(h, 70, BlockTable.REAL)).isZero();
    assertThat(t.size()).isEqualTo(1);
    assertThat(t.remove(h, 3, BlockTable.PREDICTED)).isZero();
    assertThat(t.size()).isZero();
    assertThat(t.read(h, 0, 3, new long[4], new long[4], new long[4], new long[4], null)).isFalse();
  }

  @Test
  void zeroHashIsAKeyLikeAnyOther() {
    BlockTable t = new BlockTable(1, 8);
    t.add(0, 5, BlockTable.GPU);
    assertThat(t.tiers(0, 5)).isEqualTo(BlockTable.GPU);
    assertThat(read(t, 0, 1)[0]).isEqualTo(1L << 5);
    t.remove(0, 5, BlockTable.GPU);
    assertThat(t.size()).isZero();
  }

  /** Random adds and removes over many ordinals against a map of (hash, ordinal) to tier mask. */
  @Test
  void randomOperationsMatchAReferenceMap() {
    for (long seed = 1; seed <= 10; seed++) {
      SplittableRandom r = new SplittableRandom(seed);
      BlockTable t = new BlockTable(1 << r.nextInt(4), 8);
      Map<Long, Map<Integer, Integer>> ref = new HashMap<>();
      int ords = 1 + r.nextInt(300);
      int words = (ords + 63) / 64;
      int keys = 1 + r.nextInt(400);
      for (int step = 0; step < 30_000; step++) {
        long h = r.nextInt(keys) * 0x9E3779B97F4A7C15L;
        int ord = r.nextInt(ords);
        int tiers = 1 + r.nextInt(15);
        Map<Integer, Integer> holders = ref.computeIfAbsent(h, k -> new HashMap<>());
        int before = holders.getOrDefault(ord, 0);
        String at = "seed " + seed + " step " + step;
        if (r.nextBoolean()) {
          assertThat(t.add(h, ord, tiers)).as(at).isEqualTo(before);
          holders.put(ord, before | tiers);
        } else {
          int after = before & ~tiers;
          assertThat(t.remove(h, ord, tiers)).as(at).isEqualTo(after);
          if (after == 0) {
            holders.remove(ord);
          } else {
            holders.put(ord, after);
          }
        }
        if (holders.isEmpty()) {
          ref.remove(h);
        }
        if (step % 97 == 0) {
          long q = r.nextInt(keys) * 0x9E3779B97F4A7C15L;
          long[] got = read(t, q, words);
          long[] want = new long[4 * words];
          ref.getOrDefault(q, Map.of()).forEach((o, m) -> {
            for (int tier = 0; tier < 4; tier++) {
              if ((m & (1 << tier)) != 0) {
                want[tier * words + (o >>> 6)] |= 1L << o;
              }
            }
          });
          assertThat(got).as(at).containsExactly(want);
        }
        assertThat(t.size()).as(at).isEqualTo(ref.size());
      }
    }
  }
}
