package dev.kvrouter.index;

import java.util.Objects;

/**
 * Identity of one cache owner: a worker (engine instance) and its data-parallel rank.
 *
 * <p>Each data-parallel rank of a vLLM/SGLang engine owns its own KV cache and publishes its own event
 * stream (port + rank), so the router indexes and routes per (worker, rank), as Dynamo does.
 */
public record WorkerId(String name, int dpRank) implements Comparable<WorkerId> {

  public WorkerId {
    Objects.requireNonNull(name, "name");
    if (name.isBlank()) {
      throw new IllegalArgumentException("worker name must not be blank");
    }
    if (dpRank < 0) {
      throw new IllegalArgumentException("dpRank must be >= 0, was " + dpRank);
    }
  }

  public static WorkerId of(String name) {
    return new WorkerId(name, 0);
  }

  @Override
  public int compareTo(WorkerId o) {
    int c = name.compareTo(o.name);
    return c != 0 ? c : Integer.compare(dpRank, o.dpRank);
  }

  @Override
  public String toString() {
    return dpRank == 0 ? name : name + "#dp" + dpRank;
  }
}
