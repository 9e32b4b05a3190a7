package dev.kvrouter.xds.registry;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * An immutable, versioned view of the fleet. Readers take the current set once per request and work on it
 * without locks; the registry swaps in a new set on every change.
 */
public final class WorkerSet {

  private static final WorkerSet EMPTY = new WorkerSet(0, List.of());

  private final long version;
  private final List<Worker> workers;
  private final Map<String, Worker> byName;
  private final Map<String, List<Worker>> byModel;

  public WorkerSet(long version, List<Worker> workers) {
    this.version = version;
    this.workers = List.copyOf(workers);
    Map<String, Worker> names = new LinkedHashMap<>();
    Map<String, List<Worker>> models = new LinkedHashMap<>();
    for (Worker w : this.workers) {
      if (names.put(w.name(), w) != null) {
        throw new IllegalArgumentException("duplicate worker name: " + w.name());
      }
      models.computeIfAbsent(w.model(), k -> new ArrayList<>()).add(w);
    }
    models.replaceAll((k, v) -> List.copyOf(v));
    this.byName = Collections.unmodifiableMap(names);
    this.byModel = Collections.unmodifiableMap(models);
  }

  public static WorkerSet empty() {
    return EMPTY;
  }

  public long version() {
    return version;
  }

  public List<Worker> all() {
    return workers;
  }

  public Worker get(String name) {
    return byName.get(name);
  }

  /** Workers whose base model is {@code model}. */
  public List<Worker> forModel(String model) {
    return byModel.getOrDefault(model, List.of());
  }

  /** Base model names, sorted. */
  public List<String> models() {
    return List.copyOf(new TreeSet<>(byModel.keySet()));
  }

  public boolean isEmpty() {
    return workers.isEmpty();
  }

  @Override
  public String toString() {
    return "WorkerSet{v" + version + ", " + byName.keySet() + "}";
  }
}
