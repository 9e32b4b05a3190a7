package dev.kvrouter.extproc.load;

import dev.kvrouter.index.WorkerId;
import dev.kvrouter.xds.registry.Worker;
import dev.kvrouter.xds.registry.WorkerSet;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Load accounting as metrics: per cache owner the ledger's own counters
 * ({@code kvrouter_ledger_prefill_tokens}, {@code kvrouter_ledger_decode_blocks},
 * {@code kvrouter_ledger_context_blocks}, {@code kvrouter_ledger_requests}; all return to zero when idle), per worker {@code kvrouter_worker_healthy},
 * and {@code kvrouter_ledger_reservations}, {@code kvrouter_ledger_expired_total},
 * {@code kvrouter_ledger_refused_total}, {@code kvrouter_scrapes_total{outcome}}. Per-worker gauges follow the
 * fleet: {@link #fleetChanged} adds and removes them (registry listener thread).
 */
public final class LoadMetrics {

  private final MeterRegistry registry;
  private final LoadLedger ledger;
  private final WorkerHealth health;
  private final Map<String, List<Meter>> perWorker = new HashMap<>();

  public LoadMetrics(MeterRegistry registry, LoadLedger ledger, WorkerHealth health, MetricsScraper scraper) {
    this.registry = registry;
    this.ledger = ledger;
    this.health = health;
    Gauge.builder("kvrouter.ledger.reservations", ledger, LoadLedger::liveReservations)
        .description("Load reservations held (requests in flight the router accounts for)").register(registry);
    Gauge.builder("kvrouter.ledger.block.refs", ledger, l -> l.totals()[3])
        .description("Distinct (worker, block) pairs the reservations held reference (in-flight requests' blocks)")
        .register(registry);
    FunctionCounter.builder("kvrouter.ledger.expired", ledger, LoadLedger::expired)
        .description("Reservations released by expiry because their response never reported an end")
        .register(registry);
    FunctionCounter.builder("kvrouter.ledger.refused", ledger, LoadLedger::refused)
        .description("Requests routed without a reservation because the ledger was full").register(registry);
    if (scraper != null) {
      String[] outcomes = {"ok", "unreachable", "no_metrics"};
      for (int i = 0; i < outcomes.length; i++) {
        int k = i;
        FunctionCounter.builder("kvrouter.scrapes", scraper, s -> s.counts()[k]).tag("outcome", outcomes[i])
            .description("Worker metrics scrapes by outcome").register(registry);
      }
      FunctionCounter.builder("kvrouter.scrape.bytes", scraper, MetricsScraper::bytesRead).baseUnit("bytes")
          .description("Bytes read from workers' metrics pages").register(registry);
      Gauge.builder("kvrouter.scrape.whole.page.workers", scraper, MetricsScraper::wholePageWorkers)
          .description("Workers scraped for their whole metrics page: a request for the router's series alone "
              + "did not answer with them").register(registry);
    }
  }

  /** Registers gauges for new workers and removes those of departed ones. */
  public synchronized void fleetChanged(WorkerSet fleet) {
    Map<String, Worker> now = new HashMap<>();
    for (Worker w : fleet.all()) {
      now.put(w.name() + "#" + w.dpSize(), w);
    }
    perWorker.entrySet().removeIf(e -> {
      if (!now.containsKey(e.getKey())) {
        e.getValue().forEach(registry::remove);
        return true;
      }
      return false;
    });
    for (Map.Entry<String, Worker> e : now.entrySet()) {
      if (perWorker.containsKey(e.getKey())) {
        continue;
      }
      Worker w = e.getValue();
      List<Meter> meters = new ArrayList<>();
      for (WorkerId id : w.cacheOwners()) {
        String rank = Integer.toString(id.dpRank());
        meters.add(Gauge.builder("kvrouter.ledger.prefill.tokens", () -> ledger.local(id).prefillTokens())
            .tags("worker", w.name(), "dp_rank", rank).register(registry));
        meters.add(Gauge.builder("kvrouter.ledger.decode.blocks", () -> ledger.local(id).decodeBlocks())
            .tags("worker", w.name(), "dp_rank", rank).register(registry));
        meters.add(Gauge.builder("kvrouter.ledger.context.blocks", () -> ledger.local(id).contextBlocks())
            .tags("worker", w.name(), "dp_rank", rank).register(registry));
        meters.add(Gauge.builder("kvrouter.ledger.requests", () -> ledger.local(id).requests())
            .tags("worker", w.name(), "dp_rank", rank).register(registry));
      }
      meters.add(Gauge.builder("kvrouter.worker.healthy", () -> health.unhealthyReason(w.name()) == null ? 1 : 0)
          .tag("worker", w.name()).register(registry));
      perWorker.put(e.getKey(), meters);
    }
  }
}
