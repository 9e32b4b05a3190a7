package dev.kvrouter.index;

import dev.kvrouter.index.media.MediaIdentities;
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
        .description("approximate bytes of the index tables, per-worker maps and prediction rings").register(registry);
    Gauge.builder("kvrouter.index.workers", index, i -> i.workers().size()).register(registry);
    FunctionCounter.builder("kvrouter.index.evictions", index, KvIndex::evictions)
        .description("residencies evicted because a worker exceeded its share").register(registry);
    Gauge.builder("kvrouter.index.predicted.entries", index, KvIndex::predictedEntries).register(registry);
    FunctionCounter.builder("kvrouter.index.predicted.dropped", index, KvIndex::predictionsDropped)
        .description("predictions dropped: queue full, worker not in the fleet, or no free ordinal")
        .register(registry);
    FunctionCounter.builder("kvrouter.index.predicted.expired", index, KvIndex::predictionsExpired)
        .register(registry);
    FunctionCounter.builder("kvrouter.index.predicted.evicted", index, KvIndex::predictionsEvicted)
        .description("predictions evicted by the bound before their TTL").register(registry);
    MediaIdentities media = index.media();
    FunctionCounter.builder("kvrouter.index.media.learned", media, MediaIdentities::learnedTotal)
        .description("engine identifiers learned for media sent without a uuid").register(registry);
    FunctionCounter.builder("kvrouter.index.media.used", media, MediaIdentities::usedTotal)
        .description("request items hashed with a learned engine identifier").register(registry);
    FunctionCounter.builder("kvrouter.index.media.conflicts", media, MediaIdentities::conflictsTotal)
        .description("stores naming another engine identifier for a learned item (replaced)").register(registry);
    FunctionCounter.builder("kvrouter.index.media.claimed", media, MediaIdentities::claimedTotal)
        .description("stores at an awaited item whose identifier another item had learned (not attributed)")
        .register(registry);
    FunctionCounter.builder("kvrouter.index.media.evicted", media, MediaIdentities::evictedTotal)
        .description("learned identifiers dropped by the size bound or the TTL").register(registry);
    FunctionCounter.builder("kvrouter.index.media.expected", media, MediaIdentities::expectedTotal)
        .description("routed items awaiting their worker's store").register(registry);
    Gauge.builder("kvrouter.index.media.entries", media, MediaIdentities::learnedSize)
        .description("learned engine identifiers held").register(registry);
    Gauge.builder("kvrouter.index.media.pending", media, MediaIdentities::pendingSlots)
        .description("(worker, parent block) slots awaiting a store").register(registry);
    // apart from kvrouter.index.memory: an estimate that walks every entry, where that one reads array lengths
    Gauge.builder("kvrouter.index.media.memory", media, MediaIdentities::footprintBytes).baseUnit("bytes")
        .description("approximate bytes held by the learned and pending media identifiers").register(registry);
  }
}
