package dev.kvrouter.examples.workload;

import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The closed-loop edges among a run's requests ({@link WorkloadRequest#after}: the previous turn of a conversation)
 * by position, and the count of turns held back past their planned time for them, which both drivers (the
 * virtual-time A/B and the HTTP load generator) report.
 *
 * <p>What happens between a turn's due time and its predecessor's completion (who holds, who releases, on which
 * thread) stays each driver's own: one runs single-threaded in virtual time, the other races completions on HTTP
 * threads against its send thread.
 *
 * <p>Threads: the edge table is fixed at construction and may be read from any thread that sees this object
 * (final fields). The hold counters are unsynchronized: one thread records and reads them (the virtual run's
 * thread, the load generator's send thread).
 */
public final class SessionChain {

  private final int[] predecessor;
  private final int[] successor;
  private final int dependentTurns;
  private long heldBackTurns;
  private long heldBackNanos;
  private long maxHeldBackNanos;

  /**
   * @param requests the requests of a run in workload order (a workload's, or a prefix of them): position is index
   * @throws IllegalArgumentException if a request waits for one that is not earlier among them, or two wait for
   *     the same one
   */
  public SessionChain(List<WorkloadRequest> requests) {
    int n = requests.size();
    predecessor = new int[n];
    successor = new int[n];
    Arrays.fill(predecessor, -1);
    Arrays.fill(successor, -1);
    Map<String, Integer> byId = new HashMap<>();
    for (int i = 0; i < n; i++) {
      byId.put(requests.get(i).id(), i);
    }
    int dependent = 0;
    for (int i = 0; i < n; i++) {
      WorkloadRequest r = requests.get(i);
      if (r.after() == null) {
        continue;
      }
      Integer p = byId.get(r.after());
      if (p == null || p >= i) {
        throw new IllegalArgumentException(r.id() + " waits for " + r.after() + ", which is not an earlier request");
      }
      if (successor[p] >= 0) {
        throw new IllegalArgumentException(r.after() + " has two requests waiting for it");
      }
      successor[p] = i;
      predecessor[i] = p;
      dependent++;
    }
    dependentTurns = dependent;
  }

  /** Position of the request {@code i} waits for, or -1. */
  public int predecessor(int i) {
    return predecessor[i];
  }

  /** Position of the request waiting for {@code i}, or -1. */
  public int successor(int i) {
    return successor[i];
  }

  /** Requests that wait for another (0: the run is open loop). */
  public int dependentTurns() {
    return dependentTurns;
  }

  /** Counts one turn held back {@code nanos} past its planned time (the recording thread only). */
  public void held(long nanos) {
    heldBackTurns++;
    heldBackNanos += nanos;
    maxHeldBackNanos = Math.max(maxHeldBackNanos, nanos);
  }

  /** Turns held back so far. */
  public long heldBackTurns() {
    return heldBackTurns;
  }

  /** Their total hold. */
  public long heldBackNanos() {
    return heldBackNanos;
  }

  /** The longest hold. */
  public long maxHeldBackNanos() {
    return maxHeldBackNanos;
  }

  /** {@link #summary(long, long, double, double)} of the holds counted so far. */
  public String summary() {
    return summary(heldBackTurns, dependentTurns, heldBackNanos / 1e9, maxHeldBackNanos / 1e9);
  }

  /** The run notes' closed-loop line, the same in both drivers' reports; each appends what is its own. */
  public static String summary(long heldBack, long dependent, double heldBackSeconds, double maxHeldBackSeconds) {
    return String.format(Locale.ROOT,
        "closed loop: %d of %d dependent turns held back for the previous answer, %.3f s in total (max %.3f s)",
        heldBack, dependent, heldBackSeconds, maxHeldBackSeconds);
  }
}
