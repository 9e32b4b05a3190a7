package dev.kvrouter.xds.registry;

import java.util.List;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The fleet path's single owner of worker state. Sources ({@code workers.yaml}, an admin API, Kubernetes)
 * call {@link #replace}; readers call {@link #current()}; listeners (xDS snapshots, event subscribers, the
 * router's load ledger) hear every new version, in order, on the thread that made the change.
 */
public final class WorkerRegistry {

  private static final Logger log = LoggerFactory.getLogger(WorkerRegistry.class);

  private volatile WorkerSet current = WorkerSet.empty();
  private final List<Consumer<WorkerSet>> listeners = new CopyOnWriteArrayList<>();

  public WorkerSet current() {
    return current;
  }

  /**
   * Installs a new fleet. A list equal to the current one is ignored, so a rewritten but unchanged file does
   * not churn Envoy's clusters.
   *
   * @return true when the fleet changed
   */
  public synchronized boolean replace(List<Worker> workers) {
    Objects.requireNonNull(workers, "workers");
    if (workers.equals(current.all())) {
      return false;
    }
    WorkerSet next = new WorkerSet(current.version() + 1, workers);
    current = next;
    log.info("fleet changed: version={} workers={}", next.version(), next.all().size());
    for (Consumer<WorkerSet> l : listeners) {
      try {
        l.accept(next);
      } catch (RuntimeException e) {
        log.error("worker registry listener failed", e);
      }
    }
    return true;
  }

  /** Adds a listener and immediately tells it the current fleet. */
  public synchronized void addListener(Consumer<WorkerSet> listener) {
    listeners.add(listener);
    listener.accept(current);
  }

  public void removeListener(Consumer<WorkerSet> listener) {
    listeners.remove(listener);
  }
}
