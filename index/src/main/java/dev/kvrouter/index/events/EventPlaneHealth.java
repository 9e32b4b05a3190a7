package dev.kvrouter.index.events;

import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.WorkerView;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The event plane's health, per worker: counters, last event age, lag, stale flag; exported as Micrometer
 * meters and offered to the router as {@link #staleWorkers()} and {@link StaleListener} callbacks.
 *
 * <p>Meters (Prometheus names): {@code kvrouter_events_<counter>_total{worker, dp_rank[, event|op|result|reason]}}
 * for every {@link EventCounter}, and gauges {@code kvrouter_events_last_event_age_seconds},
 * {@code kvrouter_events_lag_seconds}, {@code kvrouter_events_stale} (0/1), {@code kvrouter_index_worker_blocks},
 * {@code kvrouter_index_worker_walked} and {@code kvrouter_index_worker_not_prefix_closed} (0/1) per worker, plus {@code kvrouter_events_stale_workers} overall. A worker's meters go when it is removed.
 *
 * <p>Registration happens on the worker's event thread; reads from anywhere.
 */
public final class EventPlaneHealth {

  private final MeterRegistry registry;
  private final Clock clock;
  private final long recoveryMillis;
  private final List<StaleListener> listeners = new CopyOnWriteArrayList<>();
  private final Map<WorkerId, WorkerEventHealth> workers = new ConcurrentHashMap<>();
  private final Map<WorkerId, List<Meter>> meters = new ConcurrentHashMap<>();

  /**
   * @param staleRecovery quiet period after which a stale view is trusted again without an explicit recovery
   *     (replay, clear, restart); zero keeps it stale until one of those
   */
  public EventPlaneHealth(MeterRegistry registry, Clock clock, Duration staleRecovery) {
    this.registry = Objects.requireNonNull(registry, "registry");
    this.clock = Objects.requireNonNull(clock, "clock");
    this.recoveryMillis = staleRecovery.toMillis();
    Gauge.builder("kvrouter.events.stale.workers", workers, m -> m.values().stream().filter(WorkerEventHealth::stale)
        .count()).description("workers whose event view may be wrong").register(registry);
  }

  public void addListener(StaleListener listener) {
    listeners.add(Objects.requireNonNull(listener, "listener"));
  }

  public void removeListener(StaleListener listener) {
    listeners.remove(listener);
  }

  /**
   * Starts tracking {@code view}'s stream (replacing an earlier registration of the same worker) and
   * registers its meters. The subscriber calls this; so can any other code that feeds an
   * {@link EventApplier}. Call it on the worker's event thread.
   */
  public WorkerEventHealth register(WorkerView view) {
    WorkerId id = view.id();
    WorkerEventHealth h = new WorkerEventHealth(id, view, recoveryMillis, listeners);
    WorkerEventHealth old = workers.put(id, h);
    if (old != null) {
      removeMeters(id);
    }
    Tags tags = Tags.of("worker", id.name(), "dp_rank", Integer.toString(id.dpRank()));
    List<Meter> ms = new ArrayList<>();
    for (EventCounter c : EventCounter.values()) {
      Tags t = c.tagKey() == null ? tags : tags.and(c.tagKey(), c.tagValue());
      ms.add(FunctionCounter.builder(c.meterName(), h, x -> x.count(c)).tags(t).register(registry));
    }
    ms.add(Gauge.builder("kvrouter.events.last.event.age", h, x -> {
      long last = x.lastEventMillis();
      return last < 0 ? Double.NaN : (clock.millis() - last) / 1000.0;
    }).tags(tags).baseUnit("seconds").description("time since the worker's last event batch").register(registry));
    ms.add(Gauge.builder("kvrouter.events.lag", h, x -> x.lagMillis() / 1000.0).tags(tags).baseUnit("seconds")
        .description("receive time minus engine timestamp of the last batch").register(registry));
    ms.add(Gauge.builder("kvrouter.events.buffer.memory", h, WorkerEventHealth::bufferBytes).tags(tags)
        .baseUnit("bytes").description("bytes of the worker's event batch buffer (its largest recent batch)")
        .register(registry));
    ms.add(Gauge.builder("kvrouter.events.stale", h, x -> x.stale() ? 1 : 0).tags(tags)
        .description("1 when the worker's event view may be wrong").register(registry));
    ms.add(Gauge.builder("kvrouter.index.worker.blocks", view, WorkerView::size).tags(tags)
        .description("blocks the index holds for the worker").register(registry));
    ms.add(Gauge.builder("kvrouter.index.worker.walked", view, v -> v.open() ? 1 : 0).tags(tags)
        .description("1 when lookups read every block of the worker instead of jump-searching it (stale, lost"
            + " events since its last clear, CPU/disk blocks, router eviction, or not prefix-closed)")
        .register(registry));
    ms.add(Gauge.builder("kvrouter.index.worker.not.prefix.closed", view, v -> v.notPrefixClosed() != null ? 1 : 0)
        .tags(tags).description("1 once the worker's events showed (or the configuration says) that its engine may"
            + " remove a block before its children; kept until the worker leaves").register(registry));
    meters.put(id, ms);
    return h;
  }

  /** Stops tracking {@code id} and removes its meters. */
  public void unregister(WorkerId id) {
    WorkerEventHealth h = workers.remove(id);
    removeMeters(id);
    if (h != null && h.stale()) {
      // contained like every other change: thrown on, it would end the removal before the worker's purge
      WorkerEventHealth.notifyListeners(listeners, id, false, "worker removed");
    }
  }

  private void removeMeters(WorkerId id) {
    List<Meter> ms = meters.remove(id);
    if (ms != null) {
      ms.forEach(registry::remove);
    }
  }

  /** The health of {@code id}, or null if no event source follows it. */
  public WorkerEventHealth get(WorkerId id) {
    return workers.get(id);
  }

  /** Workers whose view is stale right now. */
  public Set<WorkerId> staleWorkers() {
    Set<WorkerId> out = new TreeSet<>();
    workers.forEach((id, h) -> {
      if (h.stale()) {
        out.add(id);
      }
    });
    return out;
  }

  /** Snapshots of every followed worker, sorted by worker. */
  public List<WorkerEventHealth.Snapshot> snapshots() {
    long now = clock.millis();
    List<WorkerEventHealth.Snapshot> out = new ArrayList<>();
    new TreeSet<>(workers.keySet()).forEach(id -> {
      WorkerEventHealth h = workers.get(id);
      if (h != null) {
        out.add(h.snapshot(now));
      }
    });
    return out;
  }

  Clock clock() {
    return clock;
  }
}
