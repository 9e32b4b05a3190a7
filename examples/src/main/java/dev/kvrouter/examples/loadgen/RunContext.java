package dev.kvrouter.examples.loadgen;

import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.report.RouterSnapshot;
import dev.kvrouter.examples.report.RoutingOverhead;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * What one run needs beyond the workload: its policy label, per-run request headers (the trusted
 * {@code x-kvrouter-policy}), the workers to scrape, and optional probes of the router. The probes are how the
 * router's cost enters the report without the driver knowing the router:
 *
 * <ul>
 *   <li>{@code routerSnapshot}: called before and after the run, and at every load sample for the peak heap
 *       ({@link JvmProbes} has in-process implementations); must be cheap and thread-safe;
 *   <li>{@code routingOverhead}: called once after the run with every request record (decision ids included),
 *       e.g. to join them with the router's decision records.
 * </ul>
 *
 * <p>{@code actions} happen to the system under test at fixed offsets from the run's start (a worker crash): the
 * same moment of the workload under every policy.
 */
public final class RunContext {

  private final String policy;
  private final Map<String, String> headers;
  private final List<WorkerTarget> workers;
  private final Supplier<RouterSnapshot> routerSnapshot;
  private final Function<List<RequestRecord>, RoutingOverhead> routingOverhead;
  private final List<TimedAction> actions;

  private RunContext(Builder b) {
    this.policy = b.policy;
    this.headers = Map.copyOf(b.headers);
    this.workers = List.copyOf(b.workers);
    this.routerSnapshot = b.routerSnapshot;
    this.routingOverhead = b.routingOverhead;
    this.actions = List.copyOf(b.actions);
  }

  /**
   * Something done to the system under test {@code at} after the run's start.
   *
   * @param at offset from the run's start (its first planned send)
   * @param label what it is, for the run's notes
   * @param action runs on the driver's timer thread, so it must return quickly (hand long work to another thread)
   */
  public record TimedAction(Duration at, String label, Runnable action) {
    public TimedAction {
      Objects.requireNonNull(label, "label");
      Objects.requireNonNull(action, "action");
      if (at == null || at.isNegative()) {
        throw new IllegalArgumentException("an action's offset must be >= 0");
      }
    }
  }

  public static Builder builder(String policy) {
    return new Builder(policy);
  }

  public String policy() {
    return policy;
  }

  public Map<String, String> headers() {
    return headers;
  }

  public List<WorkerTarget> workers() {
    return workers;
  }

  /** May be null. */
  public Supplier<RouterSnapshot> routerSnapshot() {
    return routerSnapshot;
  }

  /** May be null. */
  public Function<List<RequestRecord>, RoutingOverhead> routingOverhead() {
    return routingOverhead;
  }

  public List<TimedAction> actions() {
    return actions;
  }

  /** Mutable builder; the A/B runner hands one to each {@link PolicyPreparer}. */
  public static final class Builder {
    private final String policy;
    private final Map<String, String> headers = new LinkedHashMap<>();
    private List<WorkerTarget> workers = List.of();
    private Supplier<RouterSnapshot> routerSnapshot;
    private Function<List<RequestRecord>, RoutingOverhead> routingOverhead;
    private final List<TimedAction> actions = new ArrayList<>();

    private Builder(String policy) {
      this.policy = Objects.requireNonNull(policy, "policy");
    }

    public Builder header(String name, String value) {
      headers.put(name, value);
      return this;
    }

    public Builder workers(List<WorkerTarget> w) {
      workers = List.copyOf(w);
      return this;
    }

    public Builder routerSnapshot(Supplier<RouterSnapshot> s) {
      routerSnapshot = s;
      return this;
    }

    public Builder routingOverhead(Function<List<RequestRecord>, RoutingOverhead> f) {
      routingOverhead = f;
      return this;
    }

    /** Does {@code action} {@code at} after the run's start (see {@link TimedAction}). */
    public Builder at(Duration at, String label, Runnable action) {
      actions.add(new TimedAction(at, label, action));
      return this;
    }

    public String policy() {
      return policy;
    }

    public List<WorkerTarget> workers() {
      return workers;
    }

    public RunContext build() {
      return new RunContext(this);
    }
  }
}
