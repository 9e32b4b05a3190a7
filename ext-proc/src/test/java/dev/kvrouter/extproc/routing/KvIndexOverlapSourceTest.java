package dev.kvrouter.extproc.routing;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.block.BlockHasher;
import dev.kvrouter.index.block.CacheNamespace;
import dev.kvrouter.index.events.EventApplier;
import dev.kvrouter.index.events.EventPlaneHealth;
import dev.kvrouter.index.wire.BlockStored;
import dev.kvrouter.index.wire.EventBatch;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.time.Clock;
import java.util.List;
import org.junit.jupiter.api.Test;

class KvIndexOverlapSourceTest {

  final KvIndex index = new KvIndex(IndexConfig.defaults(), Clock.systemUTC());
  final KvIndexOverlapSource source = new KvIndexOverlapSource(index);
  final WorkerId a = WorkerId.of("a");
  final WorkerId b = WorkerId.of("b");

  static int[] tokens(int n) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = 100 + i;
    }
    return t;
  }

  @Test
  void reportsEventResidencyPredictionsAndNothingForOthers() {
    int[] t = tokens(64);
    long[] hashes = BlockHasher.hashFullBlocks(CacheNamespace.of("m").rootSeed(), t, t.length, 16);
    EventApplierFixture.store(index, a, "m", 16, t, 48); // a holds the first three of four blocks
    PrefixOverlapSource.Lookup l = source.lookup(hashes);
    assertThat(l.overlap(a)).isEqualTo(new Overlap(3, 0, 0, 0, false));
    assertThat(l.overlap(b)).isEqualTo(Overlap.NONE);

    source.recordPrediction(b, hashes);
    index.maintain(); // predictions are applied by the index's maintenance owner
    PrefixOverlapSource.Lookup after = source.lookup(hashes);
    assertThat(after.overlap(b).predicted()).isEqualTo(4);
    assertThat(after.overlap(b).cached()).isZero();
    assertThat(after.overlap(a).gpu()).isEqualTo(3);
  }

  /** Stores a chain on a worker through the event path, as the engine's BlockStored would. */
  static final class EventApplierFixture {
    static void store(KvIndex index, WorkerId w, String model, int blockSize, int[] tokens, int count) {
      var view = index.register(w);
      var health = new EventPlaneHealth(new SimpleMeterRegistry(), Clock.systemUTC(), Duration.ofMinutes(1))
          .register(view);
      EventApplier applier = new EventApplier(view, model, blockSize, health);
      long[] engineHashes = new long[count / blockSize];
      for (int i = 0; i < engineHashes.length; i++) {
        engineHashes[i] = 7000 + i;
      }
      applier.apply(new EventBatch(0, List.of(BlockStored.of(engineHashes, null,
          java.util.Arrays.copyOf(tokens, count), blockSize, "GPU")), 0, 0));
    }
  }
}
