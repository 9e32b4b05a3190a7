package dev.kvrouter.index.media;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.PrefixMatches;
import dev.kvrouter.index.TestClock;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.WorkerView;
import dev.kvrouter.index.block.BlockHasher;
import dev.kvrouter.index.block.CacheNamespace;
import dev.kvrouter.index.events.EventApplier;
import dev.kvrouter.index.events.EventPlaneHealth;
import dev.kvrouter.index.wire.BlockStored;
import dev.kvrouter.index.wire.EventBatch;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Learning engine identifiers of media sent without a uuid: pending items, stores, bounds and scopes. */
class MediaIdentitiesTest {

  private static final String R1 = "kvr1-mm:image:00000000000000a1";
  private static final String R2 = "kvr1-mm:image:00000000000000b2";
  private static final long NS = CacheNamespace.of("google/gemma-3-4b-it").rootSeed();
  private static final long NS_TENANT = new CacheNamespace("google/gemma-3-4b-it", null, "kvr1:tenant-b").rootSeed();
  private static final WorkerId W1 = WorkerId.of("w1");
  private static final WorkerId W2 = WorkerId.of("w2");
  private static final long PARENT = 0x1234_5678_9ABCL;

  private final TestClock clock = new TestClock();
  private MediaIdentities media = new MediaIdentities(MediaIdentityConfig.defaults(), clock);

  private void store(WorkerId w, long parent, String id, int offset) {
    media.observe(w, parent, new String[] {id}, new int[] {offset}, 1);
  }

  @Test
  void theExpectedWorkersStoreAtTheParentAndOffsetTeachesTheEngineIdentifier() {
    assertThat(media.engineId(NS, R1)).isNull();
    media.expect(W1, PARENT, 5, NS, R1, List.of());
    store(W1, PARENT, "sim-mm:image:e1", 5);

    assertThat(media.engineId(NS, R1)).isEqualTo("sim-mm:image:e1");
    assertThat(media.learnedTotal()).isEqualTo(1);
    assertThat(media.usedTotal()).isEqualTo(1);
    assertThat(media.expectedTotal()).isEqualTo(1);
    assertThat(media.conflictsTotal()).isZero();
  }

  @Test
  void laterItemsOfTheRequestAreReadFromTheSameStoreAtTheirDistanceAndOffset() {
    media.expect(W1, PARENT, 5, NS, R1, List.of(new MediaIdentities.FollowUp(0, 12, R2),
        new MediaIdentities.FollowUp(3, 2, "kvr1-mm:image:00000000000000c3")));
    MediaIdentities.Chain chain = media.observe(W1, PARENT, new String[] {"e1", "e2"}, new int[] {5, 12}, 2);
    assertThat(chain).isNotNull();
    chain.observe(0, new String[] {"e1", "e2"}, new int[] {5, 12}, 2);
    chain.observe(2, new String[] {"e-elsewhere"}, new int[] {2}, 1); // the wrong distance
    chain.observe(3, new String[] {"e1", "e3"}, new int[] {-43, 2}, 2);

    assertThat(media.engineId(NS, R1)).isEqualTo("e1");
    assertThat(media.engineId(NS, R2)).isEqualTo("e2");
    assertThat(media.engineId(NS, "kvr1-mm:image:00000000000000c3")).isEqualTo("e3");
    assertThat(media.learnedTotal()).isEqualTo(3);
  }

  @Test
  void storesNobodyAwaitsAreIgnored() {
    store(W1, PARENT, "e-nobody", 5); // nothing expected at all
    media.expect(W1, PARENT, 5, NS, R1, List.of());
    store(W2, PARENT, "e-other-worker", 5);
    store(W1, PARENT + 1, "e-other-parent", 5);
    store(W1, PARENT, "e-other-offset", 6);
    media.observe(W1, PARENT, new String[] {"e-continued"}, new int[] {-11}, 1); // an item begun earlier

    assertThat(media.engineId(NS, R1)).isNull();
    assertThat(media.learnedTotal()).isZero();
    store(W1, PARENT, "e-right", 5); // still awaited after all of those
    assertThat(media.engineId(NS, R1)).isEqualTo("e-right");
  }

  @Test
  void theItemAtTheAwaitedOffsetIsTakenAmongSeveralInOneBlock() {
    media.expect(W1, PARENT, 9, NS, R1, List.of());
    media.observe(W1, PARENT, new String[] {"uuid-before", "e-second"}, new int[] {-3, 9}, 2);
    assertThat(media.engineId(NS, R1)).isEqualTo("e-second");
  }

  @Test
  void severalItemsAfterTheSameTextOnOneWorkerAreTakenOldestFirst() {
    media.expect(W1, PARENT, 5, NS, R1, List.of());
    clock.advance(10);
    media.expect(W1, PARENT, 5, NS, R2, List.of());
    store(W1, PARENT, "e1", 5);
    store(W1, PARENT, "e2", 5);
    assertThat(media.engineId(NS, R1)).isEqualTo("e1");
    assertThat(media.engineId(NS, R2)).isEqualTo("e2");
  }

  @Test
  void aConflictingObservationReplacesTheLearnedIdentifier() {
    media.expect(W1, PARENT, 5, NS, R1, List.of());
    media.expect(W2, PARENT, 5, NS, R1, List.of()); // routed twice before the first store arrived
    store(W1, PARENT, "e-old-content", 5);
    store(W2, PARENT, "e-new-content", 5);

    assertThat(media.engineId(NS, R1)).isEqualTo("e-new-content");
    assertThat(media.conflictsTotal()).isEqualTo(1);
    assertThat(media.learnedTotal()).isEqualTo(1);
    // the replaced identifier is free again: another item may learn it
    media.expect(W1, PARENT, 5, NS, R2, List.of());
    store(W1, PARENT, "e-old-content", 5);
    assertThat(media.engineId(NS, R2)).isEqualTo("e-old-content");
  }

  @Test
  void aStoreOfAnIdentifierLearnedForAnotherItemIsNotAttributed() {
    media.expect(W1, PARENT, 5, NS, R1, List.of());
    store(W1, PARENT, "e1", 5);
    media.expect(W2, PARENT, 5, NS, R2, List.of());
    store(W2, PARENT, "e1", 5); // R1's image stored on W2 (routed there as learned) while R2 awaits

    assertThat(media.engineId(NS, R2)).isNull();
    assertThat(media.claimedTotal()).isEqualTo(1);
    store(W2, PARENT, "e2", 5); // R2's own store still teaches it
    assertThat(media.engineId(NS, R2)).isEqualTo("e2");
  }

  @Test
  void tenantsNeverShareALearnedIdentifier() {
    media.expect(W1, PARENT, 5, NS, R1, List.of());
    store(W1, PARENT, "e-tenant-a", 5);

    assertThat(media.engineId(NS_TENANT, R1)).isNull();
    media.expect(W1, PARENT + 7, 5, NS_TENANT, R1, List.of());
    store(W1, PARENT + 7, "e-tenant-b", 5);
    assertThat(media.engineId(NS_TENANT, R1)).isEqualTo("e-tenant-b");
    assertThat(media.engineId(NS, R1)).isEqualTo("e-tenant-a");
  }

  @Test
  void aPendingItemExpiresAfterItsTtl() {
    media.expect(W1, PARENT, 5, NS, R1, List.of());
    clock.advance(MediaIdentityConfig.defaults().pendingTtl().toMillis() + 1);
    store(W1, PARENT, "e-late", 5);
    assertThat(media.engineId(NS, R1)).isNull();
    media.cleanUp();
    assertThat(media.pendingSlots()).isZero();
  }

  @Test
  void aLearnedIdentifierExpiresAfterItsTtl() {
    media.expect(W1, PARENT, 5, NS, R1, List.of());
    store(W1, PARENT, "e1", 5);
    clock.advance(MediaIdentityConfig.defaults().learnedTtl().toMillis() + 1);
    assertThat(media.engineId(NS, R1)).isNull();
    media.cleanUp();
    assertThat(media.evictedTotal()).isEqualTo(1);
    assertThat(media.learnedSize()).isZero();
  }

  @Test
  void learnedAndPendingAreBounded() {
    media = new MediaIdentities(new MediaIdentityConfig(true, 3, Duration.ofMinutes(5), 4, Duration.ofSeconds(30)),
        clock);
    for (int i = 0; i < 20; i++) {
      media.expect(W1, PARENT + i, 5, NS, "kvr1-mm:image:" + i, List.of());
      store(W1, PARENT + i, "e" + i, 5);
      media.expect(W2, PARENT + i, 5, NS, "kvr1-mm:image:unstored-" + i, List.of());
    }
    media.cleanUp();
    assertThat(media.learnedTotal()).isEqualTo(20);
    assertThat(media.learnedSize()).isLessThanOrEqualTo(3);
    assertThat(media.evictedTotal()).isGreaterThanOrEqualTo(17);
    assertThat(media.pendingSlots()).isLessThanOrEqualTo(4);
    // one slot holds at most PER_SLOT items: the oldest go first
    for (int i = 0; i < MediaIdentityConfig.PER_SLOT + 2; i++) {
      media.expect(W1, 99, 5, NS, "kvr1-mm:image:slot-" + i, List.of());
    }
    store(W1, 99, "e-slot", 5);
    assertThat(media.engineId(NS, "kvr1-mm:image:slot-0")).isNull();
    assertThat(media.engineId(NS, "kvr1-mm:image:slot-2")).isEqualTo("e-slot");
  }

  /** What the caches hold is measured beside the index's memory, and the measure falls as entries expire. */
  @Test
  void theMediaMemoryGaugeFollowsWhatTheCachesHold() {
    KvIndex index = new KvIndex(IndexConfig.defaults(), clock);
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    dev.kvrouter.index.KvIndexMetrics.bind(index, registry);
    media = index.media();
    double empty = registry.get("kvrouter.index.media.memory").gauge().value();
    for (int i = 0; i < 1000; i++) {
      media.expect(W1, PARENT + i, 5, NS, "kvr1-mm:image:" + i, List.of(new MediaIdentities.FollowUp(1, 0, R2)));
      store(W1, PARENT + i, "sim-mm:image:e" + i, 5); // learned
      media.expect(W2, PARENT + i, 5, NS, "kvr1-mm:image:w2-" + i, List.of()); // still pending
    }
    media.cleanUp();
    assertThat(media.learnedSize()).isEqualTo(1000);
    assertThat(media.pendingSlots()).isEqualTo(1000);
    double held = registry.get("kvrouter.index.media.memory").gauge().value();
    // two learned entries per item (both directions) and a pending slot, each with keys and identifiers
    assertThat(held - empty).isGreaterThan(1000 * 3 * 100.0);
    clock.advance(MediaIdentityConfig.defaults().learnedTtl().toMillis() + 1);
    media.cleanUp();
    assertThat(registry.get("kvrouter.index.media.memory").gauge().value()).isEqualTo(empty);
  }

  @Test
  void disabledLearnsNothing() {
    media = new MediaIdentities(MediaIdentityConfig.disabled(), clock);
    media.expect(W1, PARENT, 5, NS, R1, List.of());
    store(W1, PARENT, "e1", 5);
    assertThat(media.engineId(NS, R1)).isNull();
    assertThat(media.expectedTotal()).isZero();
  }

  /** Through the event path: one store of a two-image request teaches both images. */
  @Test
  void theEventApplierReadsTheSecondImageOfTheRequestFromTheSameStore() {
    int bs = 16;
    String model = "google/gemma-3-4b-it";
    KvIndex index = new KvIndex(IndexConfig.defaults(), clock);
    EventApplier applier = applierFor(index, model, bs);
    int[] tokens = new int[6 * bs];
    Arrays.fill(tokens, 262_144);
    for (int i = 0; i < 20; i++) {
      tokens[i] = 1000 + i; // text, image A at 20..52, text 52..60, image B at 60..96
    }
    for (int i = 52; i < 60; i++) {
      tokens[i] = 2000 + i;
    }
    long root = CacheNamespace.of(model).rootSeed();
    long parent = BlockHasher.hashFullBlocks(root, tokens, bs, bs)[0];
    index.media().expect(W1, parent, 4, root, R1, List.of(new MediaIdentities.FollowUp(2, 12, R2)));
    List<List<Object>> extra = new ArrayList<>();
    extra.add(null);
    extra.add(List.of(List.of("eA", 4L)));
    extra.add(List.of(List.of("eA", -12L)));
    extra.add(List.of(List.of("eA", -28L), List.of("eB", 12L)));
    extra.add(List.of(List.of("eB", -4L)));
    extra.add(List.of(List.of("eB", -20L)));
    applier.apply(new EventBatch(1.0, List.of(BlockStored.of(new long[] {1, 2, 3, 4, 5, 6}, null, tokens, bs, "GPU")
        .withExtraKeys(extra)), 0, 0));
    assertThat(index.media().engineId(root, R1)).isEqualTo("eA");
    assertThat(index.media().engineId(root, R2)).isEqualTo("eB");
  }

  /**
   * Through the event path: a vLLM-like store of [text block, image blocks] under the router's salt teaches the
   * image's identifier, and the request re-hashed with it matches every block from events alone.
   */
  @Test
  void theEventApplierTeachesAndTheRelearnedChainMatchesTheEngineBlocks() {
    int bs = 16;
    String model = "google/gemma-3-4b-it";
    KvIndex index = new KvIndex(IndexConfig.defaults(), clock);
    EventApplier applier = applierFor(index, model, bs);
    int[] tokens = new int[4 * bs];
    for (int i = 0; i < tokens.length; i++) {
      tokens[i] = i < 20 ? 1000 + i : 262_144; // 20 text tokens, then the image's soft tokens
    }
    int itemOffset = 20; // the image runs to the end of block 3
    long root = CacheNamespace.of(model).rootSeed();
    long parent = BlockHasher.hashFullBlocks(root, tokens, bs, bs)[0];
    index.media().expect(W1, parent, itemOffset - bs, root, R1, List.of());

    List<List<Object>> extra = new ArrayList<>();
    extra.add(null);
    for (int b = 1; b < 4; b++) {
      extra.add(List.of(List.of("vllm-hash-of-pixels", (long) (itemOffset - b * bs))));
    }
    applier.apply(new EventBatch(1.0, List.of(BlockStored.of(new long[] {11, 12, 13, 14}, null, tokens, bs, "GPU")
        .withExtraKeys(extra)), 0, 0));

    String learned = index.media().engineId(root, R1);
    assertThat(learned).isEqualTo("vllm-hash-of-pixels");
    long[] extras = new long[4];
    for (int b = 1; b < 4; b++) {
      extras[b] = BlockHasher.multimodalExtra(new String[] {learned}, new int[] {itemOffset - b * bs}, 0, 1);
    }
    long[] request = BlockHasher.hashBlocksWithExtras(root, tokens, bs, extras);
    PrefixMatches m = index.lookup(request, request.length);
    assertThat(m.matchedBlocks(m.indexOf(W1))).isEqualTo(4);
    // hashed with the router's own identifier, only the text block matches
    for (int b = 1; b < 4; b++) {
      extras[b] = BlockHasher.multimodalExtra(new String[] {R1}, new int[] {itemOffset - b * bs}, 0, 1);
    }
    long[] own = BlockHasher.hashBlocksWithExtras(root, tokens, bs, extras);
    PrefixMatches m2 = index.lookup(own, own.length);
    assertThat(m2.matchedBlocks(m2.indexOf(W1))).isEqualTo(1);
  }

  /** The event path of worker W1 into {@code index}. */
  private EventApplier applierFor(KvIndex index, String model, int blockSize) {
    WorkerView view = index.register(W1);
    EventPlaneHealth health = new EventPlaneHealth(new SimpleMeterRegistry(), clock, Duration.ZERO);
    return new EventApplier(view, model, blockSize, health.register(view));
  }
}
