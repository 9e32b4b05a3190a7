package dev.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * Two engine hashes naming one of our blocks on one worker (aliases): the engine's hash covers what ours does not
 * (an older vLLM's integer LoRA id in the extra keys, a hash seed changed by a restart the router did not see), so
 * one worker can hold our block once under each. Each handle lives as long as the copies stored under it.
 */
class EngineHashAliasTest {

  private static final long E1 = 0x1111L;
  private static final long E2 = 0x2222L;
  private static final long H = Mix.mix(42);

  private static WorkerView view() {
    return new KvIndex(IndexConfig.defaults(), new TestClock()).register(WorkerId.of("w"));
  }

  /**
   * The alias in the first handle's tier (counted as a duplicate there) or in another; either handle may be engine
   * hash 0, which the handle map keeps aside.
   */
  @Test
  void aHandleGoesWithItsOwnCopiesNotWithTheBlocks() {
    for (long[] pair : new long[][] {{E1, E2}, {0, E2}, {E1, 0}}) {
      for (Tier second : new Tier[] {Tier.GPU, Tier.CPU}) {
        WorkerView v = view();
        v.store(pair[0], H, Tier.GPU);
        v.store(pair[1], H, second);
        v.remove(pair[0], Tier.GPU);
        assertThat(v.hasHandle(pair[0])).as("%x's copy is gone (%x in %s)", pair[0], pair[1], second).isFalse();
        assertThat(v.tiers(H)).isEqualTo(WorkerView.bit(second));
        v.remove(pair[1], second);
        assertThat(v.tiers(H)).isZero();
        assertThat(v.hasHandle(pair[1])).isFalse();
        assertThat(v.size()).isZero();
      }
    }
  }

  /** Each handle keeps its own duplicates: the block stays while either handle still names a copy. */
  @Test
  void aliasesKeepTheirOwnDuplicates() {
    WorkerView v = view();
    v.store(E1, H, Tier.GPU);
    v.store(E1, H, Tier.GPU);
    v.store(E2, H, Tier.GPU);
    v.remove(E2, Tier.GPU);
    assertThat(v.hasHandle(E2)).isFalse();
    v.remove(E1, Tier.GPU);
    assertThat(v.tiers(H)).isEqualTo(BlockTable.GPU);
    assertThat(v.hasHandle(E1)).isTrue();
    v.remove(E1, Tier.GPU);
    assertThat(v.tiers(H)).isZero();
    assertThat(v.size()).isZero();
  }

  /**
   * What the leak costs: a handle left behind counts toward the worker's share, and when the block comes back under
   * another handle, the share eviction may take the dead handle and with it the block the worker holds.
   */
  @Test
  void aDeadAliasNeverEvictsTheBlockHeldUnderAnotherHandle() {
    KvIndex index = new KvIndex(IndexConfig.defaults().withMaxEntries(64, 64), new TestClock());
    WorkerView v = index.register(WorkerId.of("w"));
    v.store(E1, H, Tier.GPU);
    v.store(E2, H, Tier.GPU);
    v.remove(E1, Tier.GPU);
    v.remove(E2, Tier.GPU);
    v.store(E2, H, Tier.GPU);
    for (long e = 1; e < 64; e++) {
      v.store(0x9000L + e, Mix.mix(1000 + e), Tier.GPU);
    }
    assertThat(v.evictions()).as("64 handles fit a share of 64").isZero();
    assertThat(v.tiers(H)).isEqualTo(BlockTable.GPU);
  }
}
