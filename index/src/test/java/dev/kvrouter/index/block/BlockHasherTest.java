package dev.kvrouter.index.block;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

class BlockHasherTest {

  private static int[] tokens(int n, int start) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = start + i * 7;
    }
    return t;
  }

  @Test
  void extrasChangeTheirBlockAndEveryLaterOne() {
    int[] t = new int[50];
    Arrays.setAll(t, i -> i * 7 + 1);
    long root = CacheNamespace.of("m").rootSeed();
    long[] plain = BlockHasher.hashFullBlocks(root, t, t.length, 16);
    assertThat(BlockHasher.hashBlocksWithExtras(root, t, 16, new long[3])).containsExactly(plain);
    long[] withItem = BlockHasher.hashBlocksWithExtras(root, t, 16, new long[] {0, 42, 0});
    assertThat(withItem[0]).isEqualTo(plain[0]);
    assertThat(withItem[1]).isEqualTo(BlockHasher.blockHash(plain[0], t, 16, 16, 42));
    assertThat(withItem[2]).isEqualTo(BlockHasher.blockHash(withItem[1], t, 32, 16, 0)).isNotEqualTo(plain[2]);
    assertThatThrownBy(() -> BlockHasher.hashBlocksWithExtras(root, t, 16, new long[4]))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void onlyFullBlocksAreHashed() {
    long root = CacheNamespace.of("m").rootSeed();
    assertThat(BlockHasher.hashFullBlocks(root, tokens(47, 1), 47, 16)).hasSize(2);
    assertThat(BlockHasher.hashFullBlocks(root, tokens(15, 1), 15, 16)).isEmpty();
  }

  @Test
  void sharedPrefixGivesSharedHashesAndDivergesAfter() {
    long root = CacheNamespace.of("m").rootSeed();
    int[] a = tokens(64, 1);
    int[] b = Arrays.copyOf(a, 64);
    b[40] = 999_999; // third block differs
    long[] ha = BlockHasher.hashFullBlocks(root, a, 64, 16);
    long[] hb = BlockHasher.hashFullBlocks(root, b, 64, 16);
    assertThat(hb[0]).isEqualTo(ha[0]);
    assertThat(hb[1]).isEqualTo(ha[1]);
    assertThat(hb[2]).isNotEqualTo(ha[2]);
    // the chain carries the difference forward even though block 3's tokens are equal
    assertThat(hb[3]).isNotEqualTo(ha[3]);
  }

  @Test
  void eachNamespaceFieldSeparatesIdentity() {
    Set<Long> roots = new HashSet<>();
    roots.add(new CacheNamespace("m", null, null).rootSeed());
    roots.add(new CacheNamespace("m2", null, null).rootSeed());
    roots.add(new CacheNamespace("m", "lora-a", null).rootSeed());
    roots.add(new CacheNamespace("m", null, "lora-a").rootSeed());
    roots.add(new CacheNamespace("m", "x", "y").rootSeed());
    roots.add(new CacheNamespace("m", "xy", null).rootSeed());
    roots.add(new CacheNamespace("mx", "y", null).rootSeed());
    assertThat(roots).hasSize(7);
    int[] t = tokens(16, 3);
    Set<Long> firstBlocks = new HashSet<>();
    for (long r : roots) {
      firstBlocks.add(BlockHasher.blockHash(r, t, 0, 16, 0));
    }
    assertThat(firstBlocks).hasSize(7);
  }

  @Test
  void emptyAdapterAndSaltMeanNone() {
    assertThat(new CacheNamespace("m", "", "").rootSeed()).isEqualTo(CacheNamespace.of("m").rootSeed());
  }

  @Test
  void incrementalEqualsBatch() {
    long root = new CacheNamespace("Qwen/Qwen3-0.6B", "Alice", "salt").rootSeed();
    int[] t = tokens(640, 11);
    long[] batch = BlockHasher.hashFullBlocks(root, t, t.length, 64);
    long parent = root;
    for (int b = 0; b < batch.length; b++) {
      parent = BlockHasher.blockHash(parent, t, b * 64, 64, 0);
      assertThat(parent).isEqualTo(batch[b]);
    }
  }

  @Test
  void scratchOverloadEqualsThreadLocalForm() {
    long root = CacheNamespace.of("m").rootSeed();
    int[] t = tokens(64, 9);
    byte[] scratch = new byte[BlockHasher.scratchSize(16)];
    for (int b = 0; b < 4; b++) {
      long extra = b % 2 == 0 ? 0 : 77;
      assertThat(BlockHasher.blockHash(root, t, b * 16, 16, extra, scratch))
          .isEqualTo(BlockHasher.blockHash(root, t, b * 16, 16, extra));
    }
  }

  @Test
  void extraKeyChangesTheBlock() {
    long root = CacheNamespace.of("m").rootSeed();
    int[] t = tokens(16, 5);
    assertThat(BlockHasher.blockHash(root, t, 0, 16, 42)).isNotEqualTo(BlockHasher.blockHash(root, t, 0, 16, 0));
  }

  /** Pins the function: any change to it changes every identity in every running index and must be deliberate. */
  @Test
  void knownAnswer() {
    long root = CacheNamespace.of("Qwen/Qwen3-0.6B").rootSeed();
    int[] t = new int[16];
    for (int i = 0; i < 16; i++) {
      t[i] = i + 1;
    }
    long h0 = BlockHasher.blockHash(root, t, 0, 16, 0);
    assertThat(String.format("%016x %016x", root, h0)).isEqualTo(KNOWN);
  }

  /** Computed independently with Python's xxhash (xxh3_64_intdigest) by scripts/fixtures/block_hash_vectors.py. */
  static final String KNOWN = "1c3bc24699c70379 6df482db57e704a1";

  /** The multimodal extra value, pinned by the same independent Python implementation. */
  @Test
  void multimodalExtraKnownAnswer() {
    long root = CacheNamespace.of("Qwen/Qwen3-0.6B").rootSeed();
    int[] t = new int[16];
    for (int i = 0; i < 16; i++) {
      t[i] = i + 1;
    }
    long e = BlockHasher.multimodalExtra(new String[] {"img-uuid-1", "0123abcd\u00e9"},
        new int[] {-3, BlockHasher.NO_OFFSET}, 0, 2);
    assertThat(String.format("%016x %016x", e, BlockHasher.blockHash(root, t, 0, 16, e))).isEqualTo(KNOWN_MM);
  }

  static final String KNOWN_MM = "a005afde404d2556 514e70b4a6e9c502";

  @Test
  void multimodalExtraSeparatesItemsOffsetsAndOrder() {
    Set<Long> seen = new HashSet<>();
    seen.add(BlockHasher.multimodalExtra(new String[] {"a"}, new int[] {0}, 0, 1));
    seen.add(BlockHasher.multimodalExtra(new String[] {"a"}, new int[] {1}, 0, 1));
    seen.add(BlockHasher.multimodalExtra(new String[] {"a"}, new int[] {BlockHasher.NO_OFFSET}, 0, 1));
    seen.add(BlockHasher.multimodalExtra(new String[] {"b"}, new int[] {0}, 0, 1));
    seen.add(BlockHasher.multimodalExtra(new String[] {"a", "b"}, new int[] {0, 0}, 0, 2));
    seen.add(BlockHasher.multimodalExtra(new String[] {"b", "a"}, new int[] {0, 0}, 0, 2));
    seen.add(BlockHasher.multimodalExtra(new String[] {"ab"}, new int[] {0}, 0, 1));
    assertThat(seen).hasSize(7).doesNotContain(0L);
    assertThat(BlockHasher.multimodalExtra(new String[0], new int[0], 0, 0)).isZero();
    assertThat(BlockHasher.multimodalExtra(new String[] {"x", "a"}, new int[] {9, 0}, 1, 1))
        .isEqualTo(BlockHasher.multimodalExtra(new String[] {"a"}, new int[] {0}, 0, 1));
  }

  @Test
  void rejectsNonPositiveBlockSize() {
    assertThatThrownBy(() -> BlockHasher.hashFullBlocks(1, new int[4], 4, 0))
        .isInstanceOf(IllegalArgumentException.class);
  }

  /**
   * The block hash is XXH3-64 (seeded) of exactly the documented byte layout (parent, tokens little-endian, the
   * extra when non-zero), for every block size from 1 to 40, with and without an extra, at offsets into a longer
   * array, over random and extreme token values: the identity the request and event paths share.
   */
  @Test
  void everyBlockSizeHashesTheDocumentedBytesWithXxh3() {
    net.openhft.hashing.LongHashFunction xxh3 = net.openhft.hashing.LongHashFunction.xx3(BlockHasher.CHAIN_SEED);
    java.util.SplittableRandom r = new java.util.SplittableRandom(3);
    int[] extremes = {0, 1, -1, Integer.MAX_VALUE, Integer.MIN_VALUE, 65535, 65536, 151_935};
    int checked = 0;
    for (int bs = 1; bs <= 40; bs++) {
      for (int round = 0; round < 50; round++) {
        int off = r.nextInt(5);
        int[] t = new int[off + bs + r.nextInt(3)];
        for (int i = 0; i < t.length; i++) {
          t[i] = round % 5 == 0 ? extremes[r.nextInt(extremes.length)] : r.nextInt(152_000);
        }
        long parent = round == 1 ? 0 : r.nextLong();
        long extra = round % 2 == 0 ? 0 : (round == 3 ? -1L : r.nextLong() | 1);
        java.nio.ByteBuffer bytes = java.nio.ByteBuffer.allocate(8 + 4 * bs + (extra != 0 ? 8 : 0))
            .order(java.nio.ByteOrder.LITTLE_ENDIAN);
        bytes.putLong(parent);
        for (int i = 0; i < bs; i++) {
          bytes.putInt(t[off + i]);
        }
        if (extra != 0) {
          bytes.putLong(extra);
        }
        long expected = xxh3.hashBytes(bytes.array());
        assertThat(BlockHasher.blockHash(parent, t, off, bs, extra))
            .as("block size %d, round %d", bs, round).isEqualTo(expected);
        checked++;
      }
    }
    assertThat(checked).isEqualTo(2000);
  }
}
