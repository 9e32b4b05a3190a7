package dev.kvrouter.examples.loadgen;

import dev.kvrouter.examples.report.RequestRecord;
import dev.kvrouter.examples.report.RouterSnapshot;
import dev.kvrouter.examples.report.RoutingOverhead;
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
 */
public final class RunContext {

  private final String policy;
  private final Map<String, String> headers;
  private final List<WorkerTarget> workers;
  private final Supplier<RouterSnapshot> routerSnapshot;
  private final Function<List<RequestRecord>, RoutingOverhead> routingOverhead;

  private RunContext(Builder b) {
    this.policy = b.policy;
    this.headers = Map.copyOf(b.headers);
    this.workers = List.copyOf(b.workers);
    this.routerSnapshot = b.routerSnapshot;
    this.routingOverhead = b.routingOverhead;
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

  /** Mutable builder; the A/B runner hands one to each {@link PolicyPreparer}. */
  public static final class Builder {
    private final String policy;
    private final Map<String, String> headers = new LinkedHashMap<>();
    private List<WorkerTarget> workers = List.of();
    private Supplier<RouterSnapshot> routerSnapshot;
    private Function<List<RequestRecord>, RoutingOverhead> routingOverhead;

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
