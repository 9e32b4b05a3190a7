package dev.kvrouter.bench.index;

import dev.kvrouter.index.IndexConfig;
import dev.kvrouter.index.KvIndex;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.WorkerView;
import dev.kvrouter.index.events.EventApplier;
import dev.kvrouter.index.wire.WireLayout;
import java.time.Clock;

/**
 * The ingestion benchmarks' steady state: one worker's cyclic {@link EventStream} (each batch 4 BlockStored of 4
 * chained 16-token blocks plus 16 BlockRemoved of blocks stored 512 batches earlier), applied once around the
 * cycle so every remove hits a stored block, optionally beside {@code otherWorkers} workers' blocks in the shared
 * table (512 batches each, about 8k blocks per worker) so table writes miss the caches as in a real fleet.
 */
final class IngestFixture {

  static final int CYCLE = 4096;
  static final int WINDOW = 512;

  final EventStream stream;
  final KvIndex index;
  final EventApplier applier;
  final IngestPath path;

  IngestFixture(WireLayout layout, int otherWorkers) {
    stream = new EventStream(42, CYCLE, 4, 4, 16, WINDOW, layout);
    index = new KvIndex(IndexConfig.defaults(), Clock.systemUTC());
    for (int w = 0; w < otherWorkers; w++) {
      WorkerView v = index.register(WorkerId.of("other-" + w));
      EventApplier a = new EventApplier(v, "model", 16, BenchHealth.of(v));
      EventStream s = new EventStream(1000 + w, WINDOW + 1, 4, 4, 16, 0, layout);
      for (int b = 0; b < WINDOW; b++) {
        a.apply(s.batches[b]);
      }
    }
    WorkerView view = index.register(WorkerId.of("bench"));
    applier = new EventApplier(view, "model", 16, BenchHealth.of(view));
    path = new IngestPath(applier);
    for (int b = 0; b < CYCLE; b++) {
      path.apply(stream.payloads[b]);
    }
  }
}
