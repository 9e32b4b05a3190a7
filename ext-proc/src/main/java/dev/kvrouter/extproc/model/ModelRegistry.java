package dev.kvrouter.extproc.model;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The configured models: resolves a requested name (model or LoRA adapter) to its base model, block size,
 * tenancy override and {@link ModelResources}, loaded lazily and at most once per model.
 *
 * <p>An unknown model is not an error: its requests are routed by load with {@code fallback=unknown_model}. A
 * model whose resources are loading or failed to load is routed the same way with its own reason, and every
 * fallback is counted in {@code kvrouter_model_fallback_total{reason, model}} ({@code model="_unknown_"} for names
 * the registry does not list, so clients cannot create label values).
 *
 * <p>Concurrency: {@link #resolve} runs on request threads and never blocks: it reads each model's state from an
 * atomic reference, and the first reader (or the first after a failure's back-off) wins a compare-and-set that
 * hands the load to the loader executor. Loads run only there, one at a time per model; their result is
 * published by a single atomic write. The model maps are immutable after construction.
 */
public final class ModelRegistry implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(ModelRegistry.class);

  /** The {@code model} label value for names the registry does not list. */
  public static final String UNKNOWN_LABEL = "_unknown_";
  /** How long a failed load waits before a request may trigger a retry. */
  public static final Duration RETRY_AFTER = Duration.ofSeconds(30);

  private static final ResourceState UNKNOWN = new ResourceState.Unknown();
  private static final ResourceState NOT_CONFIGURED = new ResourceState.NotConfigured();
  private static final ResourceState LOADING = new ResourceState.Loading();

  private final Map<String, Entry> models;
  private final Map<String, Entry> adapters;
  private final ModelResourcesLoader loader;
  private final Executor executor;
  private final LongSupplier nanoTime;
  private final MeterRegistry meters;
  private final Map<String, Counter> counters = new ConcurrentHashMap<>();
  /** Names the fleet serves that are not configured, each logged once ({@link #fleetServes}). */
  private final Set<String> toldUnconfigured = ConcurrentHashMap.newKeySet();
  private volatile boolean closed;

  private final class Entry {
    final ModelSpec spec;
    final ModelFiles files;
    // null until the first load starts; then LOADING, Ready or Failed. NOT_CONFIGURED for models without files.
    final AtomicReference<ResourceState> state;
    /** The first load has ended, loaded or failed; a retry after a failure does not take it back. */
    volatile boolean firstLoadEnded;

    Entry(ModelSpec spec, ModelFiles files) {
      this.spec = spec;
      this.files = files;
      this.state = new AtomicReference<>(files == null ? NOT_CONFIGURED : null);
    }

    ResourceState current() {
      ResourceState s = state.get();
      boolean start = s == null || s instanceof ResourceState.Failed f && nanoTime.getAsLong() - f.retryAtNanos() >= 0;
      if (start && !closed && state.compareAndSet(s, LOADING)) {
        submit();
        return LOADING;
      }
      return s == null ? state.get() : s;
    }

    private void submit() {
      try {
        executor.execute(this::load);
      } catch (RejectedExecutionException e) {
        state.set(new ResourceState.Failed("loader executor rejected the load", retryAt()));
        firstLoadEnded = true;
      }
    }

    private void load() {
      long start = nanoTime.getAsLong();
      ResourceState result;
      try {
        ModelResources r = loader.load(spec, files);
        if (r == null) {
          throw new IllegalStateException("loader returned no resources");
        }
        result = new ResourceState.Ready(r);
        log.info("model {} loaded in {} ms", spec.name(), (nanoTime.getAsLong() - start) / 1_000_000);
      } catch (Exception | LinkageError e) {
        String detail = e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + e.getMessage());
        result = new ResourceState.Failed(detail, retryAt());
        log.warn("model {} failed to load; its requests are routed by load until a retry succeeds: {}",
            spec.name(), detail);
      }
      state.set(result);
      firstLoadEnded = true;
      if (closed && result instanceof ResourceState.Ready r) {
        r.resources().close();
      }
    }

    private long retryAt() {
      return nanoTime.getAsLong() + RETRY_AFTER.toNanos();
    }
  }

  private ModelRegistry(List<ModelSpec> specs, List<ModelFiles> files, ModelResourcesLoader loader,
      Executor executor, LongSupplier nanoTime, MeterRegistry meters) {
    this.loader = loader;
    this.executor = executor;
    this.nanoTime = nanoTime;
    this.meters = meters;
    Map<String, Entry> m = new LinkedHashMap<>();
    Map<String, Entry> a = new LinkedHashMap<>();
    for (int i = 0; i < specs.size(); i++) {
      Entry e = new Entry(specs.get(i), files.get(i));
      m.put(e.spec.name(), e);
      for (String adapter : e.spec.adapters()) {
        a.put(adapter, e);
      }
    }
    this.models = java.util.Collections.unmodifiableMap(m);
    this.adapters = java.util.Collections.unmodifiableMap(a);
  }

  /**
   * Validates the specs and their files and builds the registry; nothing is loaded until {@link #preload} or a
   * request.
   *
   * @param baseDir directory relative paths resolve against (kvrouter.yaml's)
   * @param executor runs loads (a small dedicated pool: tokenizer loading takes up to seconds)
   * @throws InvalidModelConfig listing every problem
   */
  public static ModelRegistry create(List<ModelSpec> specs, Path baseDir, ModelResourcesLoader loader,
      Executor executor, LongSupplier nanoTime, MeterRegistry meters) {
    List<String> problems = new ArrayList<>(ModelSpecs.validate(specs));
    List<ModelFiles> files = new ArrayList<>();
    if (problems.isEmpty()) {
      for (int i = 0; i < specs.size(); i++) {
        ModelSpec s = specs.get(i);
        files.add(s.tokenizer() == null ? null : ModelSpecs.resolveFiles(s, "models[" + i + "]", baseDir, problems));
      }
    }
    if (!problems.isEmpty()) {
      throw new InvalidModelConfig(problems);
    }
    return new ModelRegistry(specs, files, loader, executor, nanoTime, meters);
  }

  /** A registry without models: every request falls back to {@code unknown_model}. */
  public static ModelRegistry empty(MeterRegistry meters) {
    return new ModelRegistry(List.of(), List.of(), ModelResourcesLoader.NONE, Runnable::run, System::nanoTime,
        meters);
  }

  /** Resolves a requested model or adapter name. Never blocks; may start a load. Counts fallbacks. */
  public ModelResolution resolve(String requested) {
    Entry e = models.get(requested);
    String adapter = null;
    if (e == null) {
      e = adapters.get(requested);
      adapter = e == null ? null : requested;
    }
    if (e == null) {
      count(UNKNOWN.fallback(), UNKNOWN_LABEL);
      return new ModelResolution(requested, requested, null, null, ModelSpec.DEFAULT_BLOCK_SIZE, null, UNKNOWN);
    }
    ResourceState s = e.current();
    if (s.fallback() != null) {
      count(s.fallback(), e.spec.name());
    }
    ModelSpec spec = e.spec;
    return new ModelResolution(requested, spec.name(), adapter, spec, spec.blockSize(),
        spec.tenancy() == null ? null : spec.tenancy().shareAcrossTenants(), s);
  }

  /** Starts loading every model configured with {@code preload} (the default). Returns at once. */
  public void preload() {
    for (Entry e : models.values()) {
      if (e.spec.preload()) {
        e.current();
      }
    }
  }

  /**
   * Whether every model configured with {@code preload} (and a tokenizer) has ended its first load, loaded or failed:
   * until then its requests are routed by load alone, and the router is not ready (admin /health). A failed model is
   * retried in the background without taking this back.
   */
  public boolean preloaded() {
    for (Entry e : models.values()) {
      if (e.spec.preload() && e.files != null && !e.firstLoadEnded) {
        return false;
      }
    }
    return true;
  }

  /**
   * Waits until a model's load is no longer in progress (for startup readiness, tests and benchmarks; never on a
   * request thread), starting it if needed.
   */
  public ResourceState await(String model, Duration timeout) throws InterruptedException {
    Entry e = models.get(model);
    if (e == null) {
      return UNKNOWN;
    }
    long deadline = System.nanoTime() + timeout.toNanos();
    ResourceState s = e.current();
    while (s instanceof ResourceState.Loading && System.nanoTime() - deadline < 0) {
      Thread.sleep(5);
      s = e.state.get();
    }
    return s;
  }

  /**
   * Tells the operator, once per name, about a model or adapter the fleet serves that is not configured: every one
   * of its requests is routed by load alone ({@code unknown_model}), without KV-cache affinity, which a router
   * started from the example configuration ({@code models: []}) would otherwise do in silence.
   *
   * @param served the names the workers serve: their {@code model} and {@code adapters}
   */
  public void fleetServes(Collection<String> served) {
    for (String name : new TreeSet<>(served)) {
      if (!models.containsKey(name) && !adapters.containsKey(name) && toldUnconfigured.add(name)) {
        log.warn("workers serve {} but kvrouter.yaml's models: does not list it (as a model or one of its adapters):"
            + " its requests are routed by load alone, without KV-cache affinity (prompt_unavailable=unknown_model);"
            + " add it with its tokenizer (docs/configuration.md, \"models\")", name);
      }
    }
  }

  /** The configured models, in configuration order. */
  public List<ModelSpec> specs() {
    return models.values().stream().map(e -> e.spec).toList();
  }

  private void count(String reason, String model) {
    counters.computeIfAbsent(reason + '\0' + model, k -> Counter.builder("kvrouter.model.fallback")
        .description("Requests routed by load alone because the model's pipeline could not be used")
        .tag("reason", reason)
        .tag("model", model)
        .register(meters)).increment();
  }

  /** Releases loaded resources; loads finishing later release theirs at once. */
  @Override
  public void close() {
    closed = true;
    for (Entry e : models.values()) {
      if (e.state.get() instanceof ResourceState.Ready r) {
        r.resources().close();
      }
    }
  }
}
