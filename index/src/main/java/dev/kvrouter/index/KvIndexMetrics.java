package dev.kvrouter.index;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;

/** Index-wide meters ({@code kvrouter_index_*}); per-worker ones come with the event plane's health. */
public final class KvIndexMetrics {

  private KvIndexMetrics() {}

  public static void bind(KvIndex index, MeterRegistry registry) {
    Gauge.builder("kvrouter.index.entries", index, KvIndex::entries)
        .description("(worker, block) residencies from events").register(registry);
    Gauge.builder("kvrouter.index.max.entries", index, i -> i.config().maxEntries())
        .description("configured bound on residencies").register(registry);
    Gauge.builder("kvrouter.index.distinct.blocks", index, KvIndex::distinctBlocks)
        .description("distinct blocks held by any worker (events and predictions)").register(registry);
    Gauge.builder("kvrouter.index.shared.blocks", index, KvIndex::sharedBlocks)
        .description("blocks held by more than three workers").register(registry);
    Gauge.builder("kvrouter.index.memory", index, KvIndex::footprintBytes).baseUnit("bytes")
        .description("approximate bytes of the index tables").register(registry);
    Gauge.builder("kvrouter.index.workers", index, i -> i.workers().size()).register(registry);
    FunctionCounter.builder("kvrouter.index.evictions", index, KvIndex::evictions)
        .description("residencies evicted because a worker exceeded its share").register(registry);
    Gauge.builder("kvrouter.index.predicted.entries", index, KvIndex::predictedEntries).register(registry);
    FunctionCounter.builder("kvrouter.index.predicted.dropped", index, KvIndex::predictionsDropped)
        .description("predictions dropped because the queue was full").register(registry);
    FunctionCounter.builder("kvrouter.index.predicted.expired", index, KvIndex::predictionsExpired)
        .register(registry);
    FunctionCounter.builder("kvrouter.index.predicted.evicted", index, KvIndex::predictionsEvicted)
        .description("predictions evicted by the bound before their TTL").register(registry);
  }
}
