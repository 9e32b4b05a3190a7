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

  /**
   * Adds (or removes) {@code tiers} of {@code ord} on {@code h} in the table and in the model (hash to ordinal to
   * tier mask), checking the table's answer (the mask before an add, after a remove) against the model's.
   */
  private static void addOrRemove(BlockTable t, Map<Long, Map<Integer, Integer>> model, long h, int ord, int tiers,
      boolean add, String at) {
    Map<Integer, Integer> holders = model.computeIfAbsent(h, k -> new HashMap<>());
    int before = holders.getOrDefault(ord, 0);
    if (add) {
      assertThat(t.add(h, ord, tiers)).as(at + " add").isEqualTo(before);
      holders.put(ord, before | tiers);
    } else {
      int after = before & ~tiers;
      assertThat(t.remove(h, ord, tiers)).as(at + " remove").isEqualTo(after);
      if (after == 0) {
        holders.remove(ord);
      } else {
        holders.put(ord, after);
      }
    }
    if (holders.isEmpty()) {
      model.remove(h);
    }
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
        String at = "seed " + seed + " step " + step;
        addOrRemove(t, ref, h, ord, tiers, r.nextBoolean(), at);
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

  /**
   * Hashes the code treats specially or that sit at the edges: 0 (an empty slot; the table stores it under a
   * stand-in, the primitive maps keep it aside), the table's {@code MOVING} marker (stored under a stand-in too), -1,
   * the extremes and their neighbours, half-word masks. Tests mix them with random ones.
   */
  static final long[] SPECIAL = {0L, -1L, Long.MIN_VALUE, Long.MAX_VALUE, 1L, 0x4D4F56494E472121L, 2L, -2L,
      Long.MIN_VALUE + 1, -3L, 0xFFFFFFFF00000000L, 0x00000000FFFFFFFFL};

  /**
   * Adds and removes of the {@link #SPECIAL} hashes and of random ones, by ordinals 0 to 2 and up to
   * {@link BlockTable#MAX_ORDINAL} (the highest included), against a map; every few steps every key is read back,
   * with {@link BlockTable#tiers} and with a lock-free read over every ordinal word.
   */
  @Test
  void specialHashesAndTheHighestOrdinalsMatchAReferenceMap() {
    for (long seed = 1; seed <= 10; seed++) {
      SplittableRandom r = new SplittableRandom(seed);
      BlockTable t = new BlockTable(1 << r.nextInt(3), 8);
      Map<Long, Map<Integer, Integer>> model = new HashMap<>();
      long[] keys = new long[SPECIAL.length + 40];
      System.arraycopy(SPECIAL, 0, keys, 0, SPECIAL.length);
      for (int i = SPECIAL.length; i < keys.length; i++) {
        keys[i] = r.nextLong();
      }
      int maxOrd = r.nextBoolean() ? 200 : BlockTable.MAX_ORDINAL;
      int[] ords = new int[12];
      for (int i = 0; i < ords.length; i++) {
        ords[i] = i < 3 ? i : r.nextInt(maxOrd + 1);
      }
      ords[3] = BlockTable.MAX_ORDINAL;
      for (int step = 0; step < 20_000; step++) {
        long k = keys[r.nextInt(keys.length)];
        int o = ords[r.nextInt(ords.length)];
        int tiers = 1 + r.nextInt(15);
        String at = "seed " + seed + " step " + step + " key " + Long.toHexString(k) + " ord " + o;
        addOrRemove(t, model, k, o, tiers, r.nextInt(100) < 55, at);
        // every key, every tracked ordinal, lock-free read too
        if (step % 97 == 0) {
          int words = (BlockTable.MAX_ORDINAL >>> 6) + 1;
          long[] g = new long[words];
          long[] c = new long[words];
          long[] d = new long[words];
          long[] p = new long[words];
          for (long kk : keys) {
            Map<Integer, Integer> mm = model.getOrDefault(kk, Map.of());
            boolean any = t.read(kk, 0, words - 1, g, c, d, p, null);
            assertThat(any).as(at + " read any " + Long.toHexString(kk)).isEqualTo(!mm.isEmpty());
            for (int oo : ords) {
              int exp = mm.getOrDefault(oo, 0);
              assertThat(t.tiers(kk, oo)).as(at + " tiers " + Long.toHexString(kk) + " " + oo).isEqualTo(exp);
              long bit = 1L << oo;
              int w = oo >>> 6;
              int got = ((g[w] & bit) != 0 ? 1 : 0) | ((c[w] & bit) != 0 ? 2 : 0) | ((d[w] & bit) != 0 ? 4 : 0)
                  | ((p[w] & bit) != 0 ? 8 : 0);
              assertThat(got).as(at + " read " + Long.toHexString(kk) + " " + oo).isEqualTo(exp);
            }
          }
        }
      }
      assertThat(t.size()).isEqualTo(model.size());
    }
  }

  /**
   * Blocks held by more than three workers keep their holders in a record area; when they go back to three or
   * fewer holders (workers left) the area is given back, not kept at its peak for records nobody uses.
   */
  @Test
  void theRecordAreaShrinksWhenBlocksAreNoLongerShared() {
    BlockTable shared = new BlockTable(4, 8);
    BlockTable single = new BlockTable(4, 8);
    int n = 20_000;
    for (long h = 1; h <= n; h++) {
      single.add(h, 0, BlockTable.GPU);
      for (int ord = 0; ord < 6; ord++) {
        shared.add(h, ord == 5 ? 100 : ord, BlockTable.GPU); // ordinal 100: two-word records too
      }
    }
    assertThat(shared.overflowBlocks()).isEqualTo(n);
    long peak = shared.footprintBytes();
    for (long h = 1; h <= n; h++) {
      for (int ord = 1; ord < 6; ord++) {
        shared.remove(h, ord == 5 ? 100 : ord, BlockTable.GPU);
      }
    }
    assertThat(shared.overflowBlocks()).isZero();
    assertThat(shared.size()).isEqualTo(n);
    assertThat(peak).isGreaterThan(2 * single.footprintBytes());
    // what may stay unused: a long per four slots, an eighth of the slots' bytes
    assertThat(shared.footprintBytes()).isLessThanOrEqualTo(single.footprintBytes() * 9 / 8);
    for (long h = 1; h <= n; h++) {
      assertThat(shared.tiers(h, 0)).isEqualTo(BlockTable.GPU);
      assertThat(read(shared, h, 2)[0]).isEqualTo(1L);
    }
  }
}
